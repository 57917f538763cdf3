//! The operator's `deliveries list` command: every queued `call.scored` delivery with its state
//! and each attempt (time, URL, HTTP status, latency, error, injected faults, whether it was a
//! resend the operator asked for), newest first. Reads the same
//! database a running server writes. Data goes to stdout (`--json` for machines).

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::operator::print_line;

use crate::config::DEFAULT_DB;
use crate::db::{Db, DeliveryRow};
use crate::time::format_millis;

/// `svc-service deliveries …`.
#[derive(Debug, Args)]
pub struct DeliveriesArgs {
    /// SQLite database file of the service.
    #[arg(long, env = "SVC_DB", default_value = DEFAULT_DB, global = true)]
    pub db: PathBuf,
    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// The command.
    #[command(subcommand)]
    pub command: DeliveriesCommand,
}

/// The delivery commands.
#[derive(Debug, Subcommand)]
pub enum DeliveriesCommand {
    /// List webhook deliveries and their attempts, newest first.
    List {
        /// Only this tenant's deliveries.
        #[arg(long)]
        tenant: Option<String>,
        /// At most this many deliveries.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
}

impl DeliveriesArgs {
    /// Runs the command against the database.
    ///
    /// # Errors
    /// A database failure.
    pub async fn exec(self) -> anyhow::Result<()> {
        let db = Db::open(&self.db)
            .await
            .with_context(|| format!("opening database {}", self.db.display()))?;
        match self.command {
            DeliveriesCommand::List { tenant, limit } => {
                let rows = db
                    .list_deliveries(tenant, limit)
                    .await
                    .context("listing deliveries")?;
                if self.json {
                    print_line(&Value::Array(rows.iter().map(to_json).collect()).to_string())?;
                } else if rows.is_empty() {
                    print_line("no deliveries")?;
                } else {
                    for row in &rows {
                        print_line(&to_lines(row))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// One delivery as JSON.
pub fn to_json(row: &DeliveryRow) -> Value {
    json!({
        "webhookId": row.id,
        "tenantId": row.tenant_id,
        "callId": row.call_id,
        "state": row.state,
        "createdAt": format_millis(row.created_at),
        "nextAttemptAt": row.next_attempt_at.map(format_millis),
        "attempts": row.attempts.iter().map(|a| json!({
            "attemptedAt": format_millis(a.attempted_at),
            "url": a.url,
            "status": a.status,
            "latencyMs": a.latency_ms,
            "error": a.error,
            "faults": a.faults.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
            "resend": a.resend,
        })).collect::<Vec<_>>(),
    })
}

fn to_lines(row: &DeliveryRow) -> String {
    let mut text = format!(
        "{}  {}  call {}  tenant {}  queued {}",
        row.id,
        row.state,
        row.call_id,
        row.tenant_id,
        format_millis(row.created_at)
    );
    if let Some(next) = row.next_attempt_at {
        text.push_str(&format!("  next attempt {}", format_millis(next)));
    }
    for (n, a) in row.attempts.iter().enumerate() {
        let status = a.status.map_or_else(|| "-".to_string(), |s| s.to_string());
        let faults = a.faults.iter().map(|f| f.as_str()).collect::<Vec<_>>();
        text.push_str(&format!(
            "\n  attempt {}{}  {}  status {}  {} ms{}{}",
            n + 1,
            if a.resend { " (resend)" } else { "" },
            format_millis(a.attempted_at),
            status,
            a.latency_ms,
            a.error
                .as_deref()
                .map(|e| format!("  error: {e}"))
                .unwrap_or_default(),
            if faults.is_empty() {
                String::new()
            } else {
                format!("  faults: {}", faults.join(", "))
            }
        ));
    }
    text
}
