//! `sandbox deliveries --by-webhook`: one row per webhook with its fate, what a tenant
//! rehearsing faults wants to know of each event: delivered (by which attempt), lost for good
//! (every attempt failed and no retry is left: only reconcile finds the call now), or pending
//! (an attempt still due).

use serde::Serialize;
use svc_reconcile::time::format_ts;
use svc_service::sandbox::{Webhook, WebhookFate};

use super::{Left, Summary, answer_cell, faults_cell, short_time};
use crate::commands::Ctx;
use crate::output;

/// One webhook as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WebhookRow {
    webhook_id: String,
    call_id: String,
    fate: &'static str,
    delivered_by: Option<u32>,
    attempts: usize,
    queued_at: String,
    last_attempt_at: Option<String>,
    next_attempt_at: Option<String>,
    last_status: Option<u16>,
    last_error: Option<String>,
    faults: Vec<&'static str>,
}

impl From<Webhook> for WebhookRow {
    fn from(webhook: Webhook) -> Self {
        let last = webhook.attempts.last();
        // Each fault once, in the order the attempts met them.
        let mut faults: Vec<&'static str> = Vec::new();
        for fault in webhook.attempts.iter().flat_map(|a| &a.faults) {
            if !faults.contains(&fault.as_str()) {
                faults.push(fault.as_str());
            }
        }
        Self {
            fate: webhook.fate.as_str(),
            delivered_by: match webhook.fate {
                WebhookFate::Delivered { attempt } => Some(attempt),
                _ => None,
            },
            attempts: webhook.attempts.len(),
            queued_at: format_ts(webhook.queued_at),
            last_attempt_at: last.map(|a| format_ts(a.attempted_at)),
            next_attempt_at: webhook.next_attempt_at.map(format_ts),
            last_status: last.and_then(|a| a.status),
            last_error: last.and_then(|a| a.error.clone()),
            faults,
            webhook_id: webhook.webhook_id,
            call_id: webhook.call_id,
        }
    }
}

impl WebhookRow {
    /// `delivered (attempt 2)`, `lost`, `pending (due …)`.
    fn fate_cell(&self) -> String {
        match (self.delivered_by, &self.next_attempt_at) {
            (Some(attempt), _) => format!("{} (attempt {attempt})", self.fate),
            (None, Some(due)) => format!("{} (due {} UTC)", self.fate, short_time(due)),
            (None, None) => self.fate.to_owned(),
        }
    }
}

/// The per-webhook view (`--json`'s object).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listing {
    webhooks: Vec<WebhookRow>,
    summary: Summary,
    idle: bool,
    left: Left,
}

/// Prints `webhooks` one row each (or `--json`'s object), oldest queued first.
///
/// # Errors
/// When stdout cannot be written.
pub(super) fn print(
    webhooks: Vec<Webhook>,
    summary: Summary,
    idle: bool,
    left: Left,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    let listing = Listing {
        webhooks: webhooks.into_iter().map(WebhookRow::from).collect(),
        summary,
        idle,
        left,
    };
    if ctx.out.json {
        return ctx.out.json_data(&listing);
    }
    if listing.webhooks.is_empty() {
        return Ok(());
    }
    // A call has one webhook, so its id names the row (the wh_ id is in --json), which keeps
    // the table within a terminal's width.
    let mut table = output::table(["call id", "fate", "attempts", "last answer", "faults"]);
    output::keep_whole(&mut table, &[0]);
    for row in &listing.webhooks {
        table.add_row(vec![
            row.call_id.clone(),
            row.fate_cell(),
            row.attempts.to_string(),
            if row.attempts == 0 {
                "-".to_owned()
            } else {
                answer_cell(row.last_status, row.last_error.as_deref(), &row.faults)
            },
            faults_cell(&row.faults),
        ]);
    }
    ctx.out.table(&table)
}
