//! `svc-cli reconcile`: the command line of [`crate::reconcile`]. Resolves the flags, takes the
//! store's run lock, runs, prints the report, writes the run's figures for node_exporter
//! (`--metrics-file`, [`crate::ops::textfile`]) and exits with the code cron alerts on.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use super::Ctx;
use super::timestamp_arg;
use crate::exit::{self, CliError};
use crate::ops::logs::{LogArgs, LogFormat};
use crate::ops::textfile::RunFigures;
use crate::reconcile::{self, Reconciled};
use std::sync::Arc;
use svc_client::CallSource;
use svc_reconcile::time::parse_duration;
use svc_reconcile::{LockError, Options, Reconciler};
use svc_store::{Store, StoreLocation};

/// Which sources a run lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SourceArg {
    /// Practice calls.
    Roleplay,
    /// Real calls from a dialer.
    #[value(name = "real_call")]
    RealCall,
    /// Both.
    All,
}

impl SourceArg {
    fn sources(self) -> Vec<CallSource> {
        match self {
            Self::Roleplay => vec![CallSource::Roleplay],
            Self::RealCall => vec![CallSource::RealCall],
            Self::All => vec![CallSource::Roleplay, CallSource::RealCall],
        }
    }
}

/// Flags of `reconcile`.
#[derive(Debug, Args)]
#[command(after_help = "\
Exit codes:
  0   clean: every listed call is stored, nothing was missed or changed (calls scored within
      the delivery grace are not missed yet: the report's awaiting count says how many)
  3   the run succeeded but recovered calls whose webhook never arrived, or found calls whose
      score changed with no webhook (alert on it: webhooks are being lost)
  1   a listed call's detail could not be stored (recorded; the next runs read it again)
  2   usage: bad flags, a store path in a missing directory or a file that is not a store
  4   the API key was refused (the watermark did not move)
  75  temporary: another run holds the store's lock, or the service kept failing (429, 5xx,
      connection errors, timeouts) after retries; the watermark did not move, run again later

A slow or lossy network: each attempt of a request is cut at --timeout (connecting, the
headers and the whole body), so one request with its retries ends within --timeout ×
(--retries + 1) plus the waits between tries (backoff up to 8 s each, or a 429's Retry-After
up to --max-retry-after): the report's requestBoundMs. A run that meets a fault that does not
heal stops with 75 within that bound and releases the store's lock as it exits.")]
pub struct ReconcileArgs {
    /// The local store: a file (created on the first run; its directory must exist) or a
    /// PostgreSQL database, postgres://… (shared by runs on several hosts)
    #[arg(long, env = "SVC_STORE", hide_env_values = true, value_name = "PATH|URL", value_parser = StoreLocation::parse)]
    store: StoreLocation,
    /// Which calls to reconcile
    #[arg(long, value_enum, default_value = "all")]
    source: SourceArg,
    /// How far before the stored watermark each window starts, e.g. 30m, 48h, 7d
    /// [default: 2h for practice calls, 24h for real calls]
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    overlap: Option<Duration>,
    /// Start every window here instead (ISO 8601); a source's first run otherwise reads the
    /// last 30 days
    #[arg(long, value_parser = timestamp_arg, value_name = "TS")]
    since: Option<DateTime<Utc>>,
    /// End every window here instead of at the run's start (ISO 8601)
    #[arg(long, value_parser = timestamp_arg, value_name = "TS")]
    until: Option<DateTime<Utc>>,
    /// List real calls started this far back again, to find re-dispositions (0: off)
    #[arg(long, default_value = "30d", value_parser = parse_duration, value_name = "DUR")]
    refresh_real: Duration,
    /// List only: read no call detail and write nothing; report what a run would store
    #[arg(long)]
    dry_run: bool,
    /// Wait up to this long for another run holding the store's lock (default: exit 75 at once)
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    wait: Option<Duration>,
    /// Call details read at once
    #[arg(long, default_value_t = svc_reconcile::DEFAULT_CONCURRENCY as u16,
          value_parser = clap::value_parser!(u16).range(1..=64), value_name = "N")]
    concurrency: u16,
    /// How long after a call was scored its webhook may still arrive; a call stored later than
    /// that with no webhook counts as recovered
    #[arg(long, default_value = "30m", value_parser = parse_duration, value_name = "DUR")]
    delivery_grace: Duration,
    /// After the run, write its figures here in the Prometheus text format, atomically (for
    /// node_exporter's textfile collector: a path ending in .prom in its directory); a dry
    /// run leaves it as it is
    #[arg(long, value_name = "PATH")]
    metrics_file: Option<PathBuf>,
    /// On a PostgreSQL store: how long the database may leave one statement unanswered (a
    /// stalled network, a hung server) before the run gives up on it and stops with 75
    #[arg(long, default_value_t = 60, value_name = "SECS", value_parser = clap::value_parser!(u64).range(2..=3600))]
    db_timeout: u64,
    #[command(flatten)]
    log: LogArgs,
}

impl ReconcileArgs {
    /// The `--log-format` flag.
    pub fn log(&self) -> LogArgs {
        self.log
    }

    fn options(&self) -> Result<Options, CliError> {
        if let (Some(since), Some(until)) = (self.since, self.until)
            && since > until
        {
            return Err(CliError::Usage(format!(
                "--since ({since}) is after --until ({until})"
            )));
        }
        Ok(Options {
            sources: self.source.sources(),
            overlap: self.overlap,
            since: self.since,
            until: self.until,
            refresh_real: self.refresh_real,
            concurrency: usize::from(self.concurrency),
            delivery_grace: self.delivery_grace,
            webhooks_since: None,
        })
    }

    /// Runs a reconcile.
    ///
    /// # Errors
    /// Usage errors (exit 2), a held lock (75); a run that stopped or found something exits
    /// with the report's code after printing it.
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        let options = self.options()?;
        let client = ctx.client()?;
        let location = self
            .store
            .clone()
            .with_answer_timeout(Duration::from_secs(self.db_timeout));
        let store = if self.dry_run {
            Store::open_or_empty(location)?
        } else {
            Store::open_or_create(location)?
        };
        let reconciler = Reconciler::new(client, Arc::new(store.clone()), options.clone());
        let guard = if self.dry_run {
            None
        } else {
            let wait = self.wait.unwrap_or(Duration::ZERO);
            match reconciler.lock(wait).await {
                Ok(guard) => Some(guard),
                Err(LockError::Busy(e)) => {
                    return Err(CliError::Temporary(format!(
                        "{e}; not running (pass --wait to wait for it)"
                    ))
                    .into());
                }
                Err(LockError::Sink(e)) => return Err(e.into()),
                Err(e) => return Err(anyhow::anyhow!("{e}")),
            }
        };
        // A spinner's redraws would break one-JSON-object-per-line logs.
        let progress = if ctx.out.progress && self.log.log_format == LogFormat::Text {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        } else {
            ProgressBar::hidden()
        };
        let report = reconcile::run(&reconciler, guard.as_ref(), &progress).await;
        progress.finish_and_clear();
        if ctx.out.json {
            ctx.out.json_data(&report)?;
            // Data on stdout, logs on stderr: with JSON logs the run's notes stay, one event
            // each (as plain text they would only repeat the JSON report).
            if self.log.log_format == LogFormat::Json {
                for note in report.table().1 {
                    self.log.note(&ctx.out, &note);
                }
            }
        } else {
            let (table, notes) = report.table();
            ctx.out.table(&table)?;
            for note in notes {
                self.log.note(&ctx.out, &note);
            }
        }
        let mut exit_code = report.exit_code;
        if let Some(path) = &self.metrics_file
            && self.dry_run
        {
            self.log.note(
                &ctx.out,
                &format!(
                    "dry run: the metrics file {} is not written",
                    path.display()
                ),
            );
        } else if let Some(path) = &self.metrics_file
            && let Err(e) = write_figures(path, &store, &options, &report).await
        {
            self.log.error(&format!(
                "svc-cli: error: metrics file {}: {e:#}",
                path.display()
            ));
            // A clean run whose figures are missing is not clean for whoever watches them.
            if exit_code == exit::OK {
                exit_code = exit::FAILURE;
            }
        }
        match (exit_code, &report.error) {
            (0, _) => Ok(()),
            (code, Some(error)) => {
                self.log.error(&format!("svc-cli: error: {error}"));
                Err(CliError::Reported(code).into())
            }
            (code, _) => Err(CliError::Reported(code).into()),
        }
    }
}

/// Writes the run's figures, with each source's last success read from the store.
async fn write_figures(
    path: &std::path::Path,
    store: &Store,
    options: &Options,
    report: &Reconciled,
) -> anyhow::Result<()> {
    let sources: Vec<String> = options
        .sources
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    let last_success = store
        .blocking(move |s| {
            sources
                .into_iter()
                .map(|source| {
                    let state = s.sync_state(&source)?;
                    let at = state
                        .last_success_at
                        .as_deref()
                        .and_then(svc_reconcile::time::parse_ts);
                    Ok((source, at))
                })
                .collect()
        })
        .await?;
    let text = RunFigures {
        report,
        last_success,
    }
    .render();
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || crate::files::write_atomically(&path, text.as_bytes()))
        .await??;
    Ok(())
}
