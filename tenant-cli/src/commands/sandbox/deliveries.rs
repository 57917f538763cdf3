//! `svc-cli sandbox deliveries`: what the sandbox sent its tenant's webhook endpoint, one row
//! per attempt (call id, attempt, when, the answer or the error, the faults injected, whether it
//! was a resend; the webhook id too with `--json`), or with `--by-webhook` one row per webhook with its fate ([`by_webhook`]), read
//! from its database through [`svc_service::sandbox::SandboxDb`]; both views open with the
//! counts (attempts, webhooks, delivered, lost, pending). With `--wait-idle`, first waits
//! until it has nothing left to send, so that a test knows when to assert.

mod by_webhook;

use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use svc_reconcile::time::{format_duration, format_ts};
use svc_service::sandbox::{
    AppliedFault, Backlog, SandboxDb, Webhook, WebhookAttempt, WebhookFate, attempts_in_order,
};

use crate::commands::Ctx;
use crate::exit::CliError;
use crate::output::{self, count};

/// One attempt as printed (also by `sandbox resend`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Attempt {
    pub(super) webhook_id: String,
    pub(super) call_id: String,
    attempt: u32,
    attempted_at: String,
    url: Option<String>,
    status: Option<u16>,
    latency_ms: i64,
    error: Option<String>,
    faults: Vec<&'static str>,
    /// A resend asked for with `sandbox resend`, outside the retry policy.
    resend: bool,
}

impl Attempt {
    /// Its number, marked when it was a resend.
    pub(super) fn attempt_label(&self) -> String {
        if self.resend {
            format!("{} (resend)", self.attempt)
        } else {
            self.attempt.to_string()
        }
    }

    /// The answer or the error.
    pub(super) fn answer(&self) -> String {
        answer_cell(self.status, self.error.as_deref(), &self.faults)
    }

    /// The faults injected, or `-`.
    pub(super) fn faults_label(&self) -> String {
        faults_cell(&self.faults)
    }
}

impl From<WebhookAttempt> for Attempt {
    fn from(attempt: WebhookAttempt) -> Self {
        Self {
            webhook_id: attempt.webhook_id,
            call_id: attempt.call_id,
            attempt: attempt.attempt,
            attempted_at: format_ts(attempt.attempted_at),
            url: attempt.url,
            status: attempt.status,
            latency_ms: attempt.latency_ms,
            error: attempt.error,
            faults: attempt.faults.iter().map(|f| f.as_str()).collect(),
            resend: attempt.resend,
        }
    }
}

/// What is left to send, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Left {
    first_attempts: u64,
    retries: u64,
    /// Resends asked for (`sandbox resend`) and not made yet.
    resends: u64,
    scoring: u64,
    next_attempt_at: Option<String>,
}

impl From<Backlog> for Left {
    fn from(backlog: Backlog) -> Self {
        Self {
            first_attempts: backlog.first_attempts,
            retries: backlog.retries,
            resends: backlog.resends,
            scoring: backlog.scoring,
            next_attempt_at: backlog
                .next_attempt_at
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(format_ts),
        }
    }
}

impl Left {
    fn describe(&self) -> String {
        let mut text = format!(
            "{} and {} pending, {} being scored",
            count(self.first_attempts, "first attempt", "first attempts"),
            count(self.retries, "retry", "retries"),
            count(self.scoring, "call", "calls"),
        );
        // Said only when there are some: a resend is asked for by hand, and rarely left over
        // (`sandbox resend` waits for its own).
        if self.resends > 0 {
            text.push_str(&format!(
                ", {} asked for and not made",
                count(self.resends, "resend", "resends")
            ));
        }
        if let Some(next) = &self.next_attempt_at {
            text.push_str(&format!(" (next attempt due {next})"));
        }
        text
    }
}

/// The counts both views open with (`--json`'s `summary`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    attempts: usize,
    webhooks: usize,
    delivered: usize,
    lost: usize,
    pending: usize,
}

impl Summary {
    fn of(webhooks: &[Webhook]) -> Self {
        let with =
            |fate: fn(&WebhookFate) -> bool| webhooks.iter().filter(|w| fate(&w.fate)).count();
        Self {
            attempts: webhooks.iter().map(|w| w.attempts.len()).sum(),
            webhooks: webhooks.len(),
            delivered: with(|f| matches!(f, WebhookFate::Delivered { .. })),
            lost: with(|f| *f == WebhookFate::Lost),
            pending: with(|f| *f == WebhookFate::Pending),
        }
    }

    /// "17 attempts of 12 webhooks: 7 delivered, 5 lost, 0 pending; nothing left to send".
    fn line(&self, idle: bool, left: &Left) -> String {
        format!(
            "{} of {}: {} delivered, {} lost, {} pending; {}",
            count(self.attempts as u64, "attempt", "attempts"),
            count(self.webhooks as u64, "webhook", "webhooks"),
            self.delivered,
            self.lost,
            self.pending,
            if idle {
                "nothing left to send".to_owned()
            } else {
                left.describe()
            }
        )
    }
}

/// The attempt view (`--json`'s object).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listing {
    attempts: Vec<Attempt>,
    summary: Summary,
    /// Whether nothing is left to send.
    idle: bool,
    left: Left,
}

/// Lists what the sandbox at `db` sent `tenant`, per attempt or with `by_webhook` per webhook;
/// with `wait_idle`, after waiting at most that long until nothing is left to send.
///
/// # Errors
/// A database failure; still something left to send when the wait ran out (exit 75, after
/// the listing).
pub(super) async fn exec(
    db: &Path,
    tenant: &str,
    wait_idle: Option<Duration>,
    by_webhook: bool,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    let sandbox = SandboxDb::open(db).await?;
    let backlog = match wait_idle {
        Some(within) => sandbox.wait_until_idle(tenant, within).await?,
        None => sandbox.backlog(tenant).await?,
    };
    let webhooks = sandbox.webhooks(tenant).await?;
    let summary = Summary::of(&webhooks);
    let idle = backlog.is_idle();
    let left = Left::from(backlog);
    ctx.out.note(&summary.line(idle, &left));
    let described = (!idle).then(|| left.describe());
    if by_webhook {
        by_webhook::print(webhooks, summary, idle, left, ctx)?;
    } else {
        let attempts = attempts_in_order(webhooks);
        print(
            &Listing {
                attempts: attempts.into_iter().map(Attempt::from).collect(),
                summary,
                idle,
                left,
            },
            ctx,
        )?;
    }
    match (wait_idle, described) {
        (Some(within), Some(left)) => Err(CliError::Temporary(format!(
            "the sandbox still had something to send after {}: {left} (is it running? a \
             retry waits the sandbox's --retry-delay)",
            format_duration(within),
        ))
        .into()),
        _ => Ok(()),
    }
}

/// `-` for no faults, else their names.
fn faults_cell(faults: &[&str]) -> String {
    if faults.is_empty() {
        "-".to_owned()
    } else {
        faults.join(", ")
    }
}

/// `11-29 04:06:26` from `2026-11-29T04:06:26.179Z`: a table's time, to the second (`--json`
/// has it to the millisecond, with its year).
fn short_time(iso: &str) -> String {
    match (iso.get(5..10), iso.get(11..19)) {
        (Some(day), Some(time)) => format!("{day} {time}"),
        _ => iso.to_owned(),
    }
}

/// The longest error a table shows whole (`--json` has every error whole).
const ERROR_CELL: usize = 48;

/// An attempt's answer as shown: `HTTP 200`, or the start of its error (`nothing sent` for a
/// dropped one: the faults column says why).
fn answer_cell(status: Option<u16>, error: Option<&str>, faults: &[&str]) -> String {
    match (error, status) {
        (Some(_), _) if faults.contains(&AppliedFault::Dropped.as_str()) => {
            "nothing sent".to_owned()
        }
        (Some(error), _) => format!("error: {}", output::clip(error, ERROR_CELL)),
        (None, Some(status)) => format!("HTTP {status}"),
        (None, None) => "-".to_owned(),
    }
}

fn print(listing: &Listing, ctx: &Ctx) -> anyhow::Result<()> {
    if ctx.out.json {
        return ctx.out.json_data(listing);
    }
    if listing.attempts.is_empty() {
        return Ok(());
    }
    // The call id names the webhook (one per call); its wh_ id is in --json, which keeps the
    // table within a terminal's width.
    let mut table = output::table([
        "call id",
        "attempt",
        "attempted at (UTC)",
        "answer",
        "faults",
    ]);
    output::keep_whole(&mut table, &[0]);
    for attempt in &listing.attempts {
        table.add_row(vec![
            attempt.call_id.clone(),
            attempt.attempt_label(),
            short_time(&attempt.attempted_at),
            attempt.answer(),
            attempt.faults_label(),
        ]);
    }
    ctx.out.table(&table)
}
