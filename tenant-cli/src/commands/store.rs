//! `svc-cli store stats|export|report`: read the local store that `reconcile` and `webhook
//! serve` write.

use std::io::Write;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};

use super::Ctx;
use crate::html_report::HtmlReport;
use crate::output;
use svc_reconcile::MAX_FAILURE_ATTEMPTS;
use svc_store::export::{ExportError, ExportFormat};

/// `--format` of `store export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// One call detail per line, exactly as the service sent it.
    Jsonl,
    /// One line per call: the list row's fields and the headline score.
    Csv,
}

impl From<FormatArg> for ExportFormat {
    fn from(arg: FormatArg) -> Self {
        match arg {
            FormatArg::Jsonl => Self::Jsonl,
            FormatArg::Csv => Self::Csv,
        }
    }
}
use super::timestamp_arg;
use svc_store::stats::Stats;
use svc_store::{Store, StoreLocation};

/// Store commands.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// What the store holds: calls per source, deliveries, recovered and changed calls, runs
    Stats(StatsArgs),
    /// Every stored call on stdout, as JSON lines (details as the service sent them) or CSV
    Export(ExportArgs),
    /// One self-contained HTML page (opens offline): score distribution, scores over time per
    /// agency, agents, delivery health per day
    Report(ReportArgs),
}

/// Flags of `store report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The local store: a file or postgres://…
    #[arg(long, env = "SVC_STORE", hide_env_values = true, value_name = "PATH|URL", value_parser = StoreLocation::parse)]
    store: StoreLocation,
    /// The HTML file to write (replaced whole when it exists)
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Only calls listed, deliveries received and changes found at or after this time
    /// (ISO 8601)
    #[arg(long, value_parser = timestamp_arg, value_name = "TS")]
    since: Option<DateTime<Utc>>,
}

/// Flags of `store stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The local store: a file or postgres://…
    #[arg(long, env = "SVC_STORE", hide_env_values = true, value_name = "PATH|URL", value_parser = StoreLocation::parse)]
    store: StoreLocation,
}

/// Flags of `store export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The local store: a file or postgres://…
    #[arg(long, env = "SVC_STORE", hide_env_values = true, value_name = "PATH|URL", value_parser = StoreLocation::parse)]
    store: StoreLocation,
    /// Only this source's calls
    #[arg(long, value_parser = ["roleplay", "real_call"])]
    source: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value = "jsonl")]
    format: FormatArg,
    /// Only calls listed at or after this time (endedAt for practice calls, startedAt for
    /// real calls; ISO 8601)
    #[arg(long, value_parser = timestamp_arg, value_name = "TS")]
    since: Option<DateTime<Utc>>,
}

impl StoreCommand {
    /// Runs the command.
    ///
    /// # Errors
    /// No store at the path or not a store (exit 2), a database error, stdout closed.
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        match self {
            Self::Stats(args) => {
                let store = Store::open(args.store)?;
                let stats = store
                    .blocking(|s| s.stats(Utc::now(), MAX_FAILURE_ATTEMPTS))
                    .await?;
                if ctx.out.json {
                    ctx.out.json_data(&stats)
                } else {
                    print_stats(ctx, &stats)
                }
            }
            Self::Report(args) => report(ctx, args).await,
            Self::Export(args) => {
                let store = Store::open(args.store.clone())?;
                let since = args.since.map(|t| t.timestamp_millis());
                let written = tokio::task::spawn_blocking(move || {
                    let stdout = std::io::stdout();
                    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
                    let written =
                        store.export(args.source.as_deref(), since, args.format.into(), &mut out);
                    let flushed = out.flush();
                    written.and_then(|n| flushed.map(|()| n).map_err(ExportError::from))
                })
                .await?;
                match written {
                    Ok(n) => {
                        ctx.out.note(&format!("{n} call(s) exported"));
                        Ok(())
                    }
                    // A reader that stopped early (`| head`) is not an error.
                    Err(ExportError::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                        Ok(())
                    }
                    Err(e) => Err(e.into()),
                }
            }
        }
    }
}

/// Writes the report and prints its path (the data) and a line about it.
async fn report(ctx: &Ctx, args: ReportArgs) -> anyhow::Result<()> {
    let store = Store::open(args.store.clone())?;
    let since = args.since;
    let report = store
        .blocking(move |s| HtmlReport::build(s, since, Utc::now()))
        .await?;
    let out = args.out.clone();
    let written = report.clone();
    tokio::task::spawn_blocking(move || written.write(&out)).await??;
    let totals = &report.figures.totals;
    if ctx.out.json {
        ctx.out.json_data(&serde_json::json!({
            "out": args.out,
            "calls": totals.calls,
            "practiceCalls": totals.practice,
            "realCalls": totals.real,
            "agents": report.figures.agents.len(),
            "days": report.figures.days.len(),
        }))
    } else {
        ctx.out.note(&format!(
            "report of {} call(s) by {} agent(s) written",
            totals.calls,
            report.figures.agents.len()
        ));
        ctx.out.line(&args.out.display().to_string())
    }
}

fn print_stats(ctx: &Ctx, stats: &Stats) -> anyhow::Result<()> {
    let mut calls = output::table([
        "source",
        "calls",
        "delivered",
        "awaiting",
        "recovered",
        "backfill",
        "watermark",
        "last run",
        "last outcome",
        "last success",
    ]);
    let mut sources: Vec<&str> = stats.calls.iter().map(|c| c.source.as_str()).collect();
    for source in stats.sync.keys() {
        if !sources.contains(&source.as_str()) {
            sources.push(source);
        }
    }
    for source in sources {
        let counts = stats.calls.iter().find(|c| c.source == source);
        let sync = stats.sync.get(source).cloned().unwrap_or_default();
        let n = |f: fn(&svc_store::stats::SourceCalls) -> u64| counts.map_or(0, f).to_string();
        calls.add_row(vec![
            source.to_owned(),
            n(|c| c.calls),
            n(|c| c.delivered),
            n(|c| c.awaiting),
            n(|c| c.recovered),
            n(|c| c.backfill),
            output::opt(sync.watermark.as_deref()),
            output::opt(sync.last_run_at.as_deref()),
            output::opt(sync.last_outcome.as_deref()),
            output::opt(sync.last_success_at.as_deref()),
        ]);
    }
    ctx.out.table(&calls)?;
    let d = &stats.deliveries;
    let not_scored: u64 = d.not_scored.values().sum();
    let reasons = d
        .not_scored
        .iter()
        .map(|(reason, n)| format!("{reason}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut over_time = output::table(["", "24 h", "7 days", "30 days", "all"]);
    for (name, p) in [
        ("recovered (webhook missed)", &stats.recovered),
        ("changed silently", &stats.changed),
    ] {
        over_time.add_row(vec![
            name.to_owned(),
            p.last_24h.to_string(),
            p.last_7d.to_string(),
            p.last_30d.to_string(),
            p.total.to_string(),
        ]);
    }
    ctx.out.table(&over_time)?;
    let last_run = stats.last_run.as_ref().map_or_else(
        || "none".to_owned(),
        |r| {
            format!(
                "{} started {} ({}, exit {})",
                r.id,
                r.started_at,
                r.outcome,
                r.exit_code
                    .map_or_else(|| "-".to_owned(), |c| c.to_string())
            )
        },
    );
    ctx.out.table(&output::pairs([
        (
            "deliveries received",
            format!(
                "{} ({} scored, {} not scored{})",
                d.total,
                d.scored,
                not_scored,
                if reasons.is_empty() {
                    String::new()
                } else {
                    format!(": {reasons}")
                }
            ),
        ),
        (
            "last delivery verified",
            output::opt(d.last_verified_at.as_deref()),
        ),
        (
            "details failing",
            format!(
                "{} retried by the next runs, {} given up",
                stats.failures.retrying, stats.failures.given_up
            ),
        ),
        ("last run", last_run),
        ("schema version", stats.schema_version.to_string()),
    ]))
}
