//! `svc-cli inbox dead-letters|requeue|discard`: the dead letters of the inbox `webhook serve`
//! keeps in the store file (`svc-receiver`'s `SqliteInbox`): deliveries acknowledged to the
//! service whose recording in the ledger failed on every attempt. List them, hand them out
//! again once the cause is fixed, or give up on them.

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde::Serialize;
use svc_contract::WebhookId;
use svc_receiver::StoreError;
use svc_receiver::inbox::{DeadLetter, InboxAdmin, InboxPolicy};

use super::Ctx;
use crate::exit::CliError;
use crate::output;
use svc_reconcile::time::format_ts;
use svc_store::inbox::StoreInbox;
use svc_store::{Store, StoreLocation};

/// Inbox commands.
#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// List the dead letters: deliveries whose recording failed on every attempt
    DeadLetters(StoreArgs),
    /// Hand dead letters out again, with fresh attempts, to `webhook serve` (a running one
    /// takes them within a second; otherwise the next one started)
    Requeue(RequeueArgs),
    /// Give up on a dead letter: it counts as handled from now on (its id stays a duplicate
    /// for 24 h) and is never recorded in the ledger; reconcile still stores its call
    Discard(DiscardArgs),
}

/// The store flag every inbox command takes.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The local store `webhook serve` writes: a file or postgres://…
    #[arg(long, env = "SVC_STORE", hide_env_values = true, value_name = "PATH|URL", value_parser = StoreLocation::parse)]
    store: StoreLocation,
}

/// Flags of `inbox requeue`.
#[derive(Debug, Args)]
pub struct RequeueArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The X-Service-Webhook-Id of the dead letter
    #[arg(
        value_name = "WEBHOOK_ID",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    webhook_id: Option<String>,
    /// Every dead letter
    #[arg(long)]
    all: bool,
}

/// Flags of `inbox discard`.
#[derive(Debug, Args)]
pub struct DiscardArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The X-Service-Webhook-Id of the dead letter
    #[arg(value_name = "WEBHOOK_ID")]
    webhook_id: String,
}

/// A dead letter as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Letter {
    webhook_id: String,
    /// The call the event is about, when its body names one.
    call_id: Option<String>,
    attempts: u32,
    received_at: String,
    last_error: String,
}

impl From<DeadLetter> for Letter {
    fn from(letter: DeadLetter) -> Self {
        let call_id = serde_json::from_slice::<serde_json::Value>(&letter.body)
            .ok()
            .and_then(|body| body.get("callId")?.as_str().map(str::to_owned));
        Self {
            webhook_id: letter.webhook_id.to_string(),
            call_id,
            attempts: letter.attempts,
            received_at: DateTime::<Utc>::from_timestamp(letter.received_at, 0)
                .map_or_else(|| letter.received_at.to_string(), format_ts),
            last_error: letter.last_error,
        }
    }
}

impl InboxCommand {
    /// Runs the command.
    ///
    /// # Errors
    /// No store at the path or not a store (exit 2), a webhook id of the wrong form (exit 2),
    /// an id that is not a dead letter (exit 1), the store busy for too long (exit 75).
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        match self {
            Self::DeadLetters(args) => {
                let inbox = open(&args.store).await?;
                let letters: Vec<Letter> = inbox
                    .dead_letters()
                    .await
                    .map_err(inbox_error)?
                    .into_iter()
                    .map(Letter::from)
                    .collect();
                if ctx.out.json {
                    return ctx.out.json_data(&letters);
                }
                ctx.out.note(&format!("{} dead letter(s)", letters.len()));
                if letters.is_empty() {
                    return Ok(());
                }
                let mut table = output::table([
                    "webhook id",
                    "call id",
                    "attempts",
                    "received at",
                    "last error",
                ]);
                for letter in letters {
                    table.add_row(vec![
                        letter.webhook_id,
                        output::opt(letter.call_id.as_deref()),
                        letter.attempts.to_string(),
                        letter.received_at,
                        letter.last_error,
                    ]);
                }
                ctx.out.table(&table)
            }
            Self::Requeue(args) => {
                let inbox = open(&args.store.store).await?;
                let now = Utc::now().timestamp();
                let requeued = match &args.webhook_id {
                    Some(id) => {
                        let id = webhook_id(id)?;
                        if !inbox
                            .requeue_dead_letter(&id, now)
                            .await
                            .map_err(inbox_error)?
                        {
                            return Err(not_dead(&id));
                        }
                        1
                    }
                    None => inbox
                        .requeue_all_dead_letters(now)
                        .await
                        .map_err(inbox_error)?,
                };
                if ctx.out.json {
                    return ctx
                        .out
                        .json_data(&serde_json::json!({ "requeued": requeued }));
                }
                ctx.out.note(&format!(
                    "{requeued} dead letter(s) requeued; webhook serve hands them out again"
                ));
                Ok(())
            }
            Self::Discard(args) => {
                let inbox = open(&args.store.store).await?;
                let id = webhook_id(&args.webhook_id)?;
                if !inbox.discard_dead_letter(&id).await.map_err(inbox_error)? {
                    return Err(not_dead(&id));
                }
                if ctx.out.json {
                    return ctx
                        .out
                        .json_data(&serde_json::json!({ "discarded": id.as_str() }));
                }
                ctx.out.note(&format!("dead letter {id} discarded"));
                Ok(())
            }
        }
    }
}

/// The inbox in the store at `location`, which must be a store already.
async fn open(location: &StoreLocation) -> anyhow::Result<StoreInbox> {
    // Refuses a missing file or one that is not a store (exit 2) before the inbox, which would
    // create its tables in any SQLite file, opens it.
    let checked = location.clone();
    drop(tokio::task::spawn_blocking(move || Store::open(checked)).await??);
    StoreInbox::open(location, InboxPolicy::default())
        .await
        .map_err(inbox_error)
}

fn webhook_id(text: &str) -> anyhow::Result<WebhookId> {
    WebhookId::parse(text.as_bytes())
        .map_err(|e| CliError::Usage(format!("{text:?} is not a webhook id: {e}")).into())
}

fn not_dead(id: &WebhookId) -> anyhow::Error {
    CliError::Failed(format!(
        "no dead letter has webhook id {id} (see `svc-cli inbox dead-letters`)"
    ))
    .into()
}

/// A failure of the inbox: temporary when another writer held the file too long or the inbox
/// stopped, a failure otherwise.
fn inbox_error(err: StoreError) -> anyhow::Error {
    let text = format!("the store's inbox: {err}");
    match err {
        StoreError::Unavailable => CliError::Temporary(text),
        StoreError::Config(_) => CliError::Usage(text),
        StoreError::Database { .. } if is_busy(err.driver_error()) => CliError::Temporary(text),
        _ => CliError::Failed(text),
    }
    .into()
}

/// Whether the driver's error says another connection holds the database (SQLite's
/// `SQLITE_BUSY` or `SQLITE_LOCKED`): worth trying again shortly.
fn is_busy(source: Option<&(dyn std::error::Error + Send + Sync + 'static)>) -> bool {
    use svc_receiver::sqlite::rusqlite::{Error, ErrorCode};
    matches!(
        source.and_then(|err| err.downcast_ref::<Error>()),
        Some(Error::SqliteFailure(failure, _))
            if matches!(failure.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}
