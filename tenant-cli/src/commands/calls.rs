//! `svc-cli calls list|show`: list scored calls with the contract's filters (one page or
//! `--all`), and show one call as a readable dialogue with its score, audio link and expiry.

use clap::{Args, Subcommand};
use serde_json::Value;

use super::Ctx;
use crate::output::{self, Output};
use svc_client::{AgencyId, AgentId, CallDetail, CallId, CallQuery, CallRow, CallSource};

/// Call commands.
// Parsed once per process: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum CallsCommand {
    /// List scored calls, newest first (one page, or every page with --all)
    List(ListArgs),
    /// Show one call: transcript as a dialogue, score keys, audio link and expiry
    Show(ShowArgs),
}

/// `calls list` flags.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Call source
    #[arg(long, value_parser = ["roleplay", "real_call"])]
    pub source: String,
    /// Inclusive lower bound, ISO 8601 (e.g. 2026-01-01T00:00:00Z)
    #[arg(long, value_parser = timestamp)]
    pub from: String,
    /// Inclusive upper bound, ISO 8601
    #[arg(long, value_parser = timestamp)]
    pub to: Option<String>,
    /// Service agent id (svc_agent_…)
    #[arg(long, conflicts_with = "platform_agent_id")]
    pub agent_id: Option<AgentId>,
    /// Service agency id (svc_agency_…)
    #[arg(long, conflicts_with = "platform_agency_id")]
    pub agency_id: Option<AgencyId>,
    /// The tenant's agent id
    #[arg(long)]
    pub platform_agent_id: Option<String>,
    /// The tenant's agency id
    #[arg(long)]
    pub platform_agency_id: Option<String>,
    /// Earlier rep label (externalUserId)
    #[arg(long)]
    pub external_user_id: Option<String>,
    /// Earlier agency label (externalAgencyId)
    #[arg(long)]
    pub external_agency_id: Option<String>,
    /// Page size (1-100)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: Option<u32>,
    /// Start at this cursor (a nextCursor from an earlier page)
    #[arg(long, conflicts_with = "all")]
    pub cursor: Option<String>,
    /// Follow nextCursor through every page (a row repeated by a shifted page is listed once)
    #[arg(long)]
    pub all: bool,
}

/// `calls show` arguments.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The public call id (svc_call_…)
    pub call_id: CallId,
}

fn timestamp(value: &str) -> Result<String, String> {
    chrono::DateTime::parse_from_rfc3339(value)
        .map(|_| value.to_owned())
        .map_err(|_| "expected an ISO 8601 date-time such as 2026-01-01T00:00:00Z".to_owned())
}

impl CallsCommand {
    /// Runs the command.
    ///
    /// # Errors
    /// Client errors (`CALL_NOT_FOUND`, `INVALID_REQUEST`, …).
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        match self {
            Self::List(args) => list(ctx, args).await,
            Self::Show(args) => show(ctx, &args.call_id).await,
        }
    }
}

async fn list(ctx: &Ctx, args: ListArgs) -> anyhow::Result<()> {
    let client = ctx.client()?;
    let query = CallQuery {
        source: CallSource::from(args.source.as_str()),
        from: args.from,
        to: args.to,
        agent_id: args.agent_id,
        agency_id: args.agency_id,
        platform_agent_id: args.platform_agent_id,
        platform_agency_id: args.platform_agency_id,
        external_user_id: args.external_user_id,
        external_agency_id: args.external_agency_id,
        limit: args.limit,
    };
    super::listing::print_pages(
        &ctx.out,
        args.all,
        client.calls(query.clone()),
        client.calls_page(&query, args.cursor.as_deref()),
        "call",
        print_rows,
    )
    .await
}

/// Prints list rows as a table; the agent column shows the most specific id the row has.
fn print_rows(out: &Output, rows: &[CallRow]) -> anyhow::Result<()> {
    let mut table = output::table([
        "id",
        "source",
        "agent",
        "drill",
        "startedAt",
        "endedAt",
        "durationSec",
        "scoredAt",
    ]);
    for c in rows {
        let agent = c
            .platform_agent_id
            .as_deref()
            .or(c.agent_id.as_ref().map(AgentId::as_str))
            .or(c.external_user_id.as_deref());
        table.add_row(vec![
            c.id.to_string(),
            c.source.to_string(),
            output::opt(agent),
            output::opt(c.drill_key.as_deref()),
            output::opt(c.started_at.as_deref()),
            output::opt(c.ended_at.as_deref()),
            c.duration_sec.to_string(),
            output::opt(c.scored_at.as_deref()),
        ]);
    }
    out.table(&table)
}

async fn show(ctx: &Ctx, call_id: &CallId) -> anyhow::Result<()> {
    let call = ctx.client()?.call(call_id).await?;
    if ctx.out.json {
        return ctx.out.json_data(&call);
    }
    print_call(&ctx.out, &call)
}

fn print_call(out: &Output, call: &CallDetail) -> anyhow::Result<()> {
    let row = &call.row;
    out.table(&output::pairs([
        ("call", row.id.to_string()),
        ("source", row.source.to_string()),
        (
            "agent",
            format!(
                "{} ({})",
                output::opt(row.platform_agent_id.as_deref()),
                output::opt(row.agent_id.as_ref().map(AgentId::as_str))
            ),
        ),
        (
            "agency",
            format!(
                "{} ({})",
                output::opt(row.platform_agency_id.as_deref()),
                output::opt(row.agency_id.as_ref().map(AgencyId::as_str))
            ),
        ),
        ("drill", output::opt(row.drill_key.as_deref())),
        ("started", output::opt(row.started_at.as_deref())),
        ("ended", output::opt(row.ended_at.as_deref())),
        ("duration", format!("{} s", row.duration_sec)),
        ("scored", output::opt(row.scored_at.as_deref())),
        (
            "audio",
            call.audio_url.clone().unwrap_or_else(|| "none".into()),
        ),
        (
            "audio expires",
            output::opt(call.audio_url_expires_at.as_deref()),
        ),
    ]))?;

    let score = &call.score;
    let mut rows: Vec<(String, String)> = vec![
        ("overallScore".into(), number(score.overall_score)),
        ("summary".into(), score.summary.clone()),
        ("feedback".into(), score.feedback.clone()),
    ];
    if let Some(p) = score.compliance_percent {
        rows.push(("compliancePercent".into(), number(p)));
    }
    if let Some(card) = &score.compliance_scorecard {
        rows.push(("complianceScorecard".into(), plain(card)));
    }
    rows.extend(score.extra.iter().map(|(k, v)| (k.clone(), plain(v))));
    let mut table = output::table(["score key", "value"]);
    for (k, v) in rows {
        table.add_row(vec![k, v]);
    }
    out.table(&table)?;

    out.line("Transcript:")?;
    for turn in &call.transcript {
        let at = match (turn.start_time, turn.end_time) {
            (Some(s), Some(e)) => format!("[{} - {}] ", clock(s), clock(e)),
            (Some(s), None) => format!("[{}] ", clock(s)),
            _ => String::new(),
        };
        out.line(&format!("{at}{}: {}", turn.role, turn.content))?;
    }
    Ok(())
}

fn number(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Seconds from call start as `mm:ss.s`.
fn clock(seconds: f64) -> String {
    let minutes = (seconds / 60.0).floor();
    format!("{:02}:{:04.1}", minutes as i64, seconds - minutes * 60.0)
}
