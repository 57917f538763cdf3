//! `svc-cli sandbox deliveries`: what the sandbox sent its tenant's webhook endpoint, one row
//! per attempt (webhook id, call id, attempt, when, the answer or the error, the faults
//! injected, whether it was a resend), read from its database through [`svc_service::sandbox::SandboxDb`]; with
//! `--wait-idle`, first waits until it has nothing left to send, so that a test knows when to
//! assert.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use svc_reconcile::time::{format_duration, format_ts};
use svc_service::sandbox::{Backlog, SandboxDb, WebhookAttempt};

use crate::commands::Ctx;
use crate::exit::CliError;
use crate::output;

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
        match (&self.error, self.status) {
            (Some(error), _) => format!("error: {error}"),
            (None, Some(status)) => format!("HTTP {status}"),
            (None, None) => "-".to_owned(),
        }
    }

    /// The faults injected, or `-`.
    pub(super) fn faults_label(&self) -> String {
        if self.faults.is_empty() {
            "-".to_owned()
        } else {
            self.faults.join(", ")
        }
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
    scoring: u64,
    next_attempt_at: Option<String>,
}

impl From<Backlog> for Left {
    fn from(backlog: Backlog) -> Self {
        Self {
            first_attempts: backlog.first_attempts,
            retries: backlog.retries,
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
            "{} first attempt(s) and {} retry(ies) pending, {} call(s) being scored",
            self.first_attempts, self.retries, self.scoring
        );
        if let Some(next) = &self.next_attempt_at {
            text.push_str(&format!(" (next attempt due {next})"));
        }
        text
    }
}

/// The listing (`--json`'s object).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listing {
    attempts: Vec<Attempt>,
    /// Whether nothing is left to send.
    idle: bool,
    left: Left,
}

/// Lists the attempts of the sandbox at `db` for `tenant`; with `wait_idle`, after waiting at
/// most that long until nothing is left to send.
///
/// # Errors
/// A database failure; still something left to send when the wait ran out (exit 75, after
/// the listing).
pub(super) async fn exec(
    db: &Path,
    tenant: &str,
    wait_idle: Option<Duration>,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    let sandbox = SandboxDb::open(db).await?;
    let backlog = match wait_idle {
        Some(within) => sandbox.wait_until_idle(tenant, within).await?,
        None => sandbox.backlog(tenant).await?,
    };
    let attempts = sandbox.webhook_attempts(tenant).await?;
    let listing = Listing {
        attempts: attempts.into_iter().map(Attempt::from).collect(),
        idle: backlog.is_idle(),
        left: Left::from(backlog),
    };
    print(&listing, ctx)?;
    match wait_idle {
        Some(within) if !listing.idle => Err(CliError::Temporary(format!(
            "the sandbox still had something to send after {}: {} (is it running? a retry \
             waits the sandbox's --retry-delay)",
            format_duration(within),
            listing.left.describe()
        ))
        .into()),
        _ => Ok(()),
    }
}

fn print(listing: &Listing, ctx: &Ctx) -> anyhow::Result<()> {
    if ctx.out.json {
        return ctx.out.json_data(listing);
    }
    let webhooks: std::collections::BTreeSet<&str> = listing
        .attempts
        .iter()
        .map(|a| a.webhook_id.as_str())
        .collect();
    ctx.out.note(&format!(
        "{} attempt(s) of {} webhook(s); {}",
        listing.attempts.len(),
        webhooks.len(),
        if listing.idle {
            "nothing left to send".to_owned()
        } else {
            listing.left.describe()
        }
    ));
    if listing.attempts.is_empty() {
        return Ok(());
    }
    let mut table = output::table([
        "webhook id",
        "call id",
        "attempt",
        "attempted at",
        "answer",
        "faults",
    ]);
    for attempt in &listing.attempts {
        table.add_row(vec![
            attempt.webhook_id.clone(),
            attempt.call_id.clone(),
            attempt.attempt_label(),
            attempt.attempted_at.clone(),
            attempt.answer(),
            attempt.faults_label(),
        ]);
    }
    ctx.out.table(&table)
}
