//! Exactly once on SQLite with `rusqlite`: each `call.scored` event adds one row to
//! `call_scores` and one to its rep's count, in a transaction of yours that also records the
//! delivery.
//!
//! ```text
//! SVC_SIGNING_SECRET=whsec_… cargo run -p svc-receiver --example exactly_once_sqlite [direct]
//! ```
//!
//! Inbox mode by default (the delivery is stored before the 200, then handed to your handler
//! with retries); `direct` runs your handler inside the request and answers 200 after your
//! commit. Your tables are in `app.db`; the crate's inbox in `webhooks.db`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use rusqlite::{Connection, TransactionBehavior};
use svc_contract::{Keyring, SigningSecret, SystemClock, Verifier};
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, WebhookReceiver, inbox_route, webhook_route};
use svc_receiver::dedup::{DedupPolicy, MemoryDedupStore};
use svc_receiver::inbox::{InboxPolicy, run_inbox_workers_until_drained};
use svc_receiver::sqlite::{SqliteInbox, SqliteRecorder};
use svc_server::{Server, shutdown_signal};

/// The delivery recorded and its effect written in one transaction, committed together
/// through the recorder (which checks first that the transaction is open and holds the record).
fn write_score(
    conn: &mut Connection,
    recorder: &SqliteRecorder,
    received: &Received,
) -> rusqlite::Result<()> {
    // IMMEDIATE: wait for SQLite's one write lock up front (see `SqliteRecorder`).
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if recorder.record(&tx, received)?.is_fresh() {
        let event = &received.event;
        tx.execute(
            "INSERT INTO call_scores (call_id, success, webhook_id) VALUES (?1, ?2, ?3)",
            (&event.call_id, event.success, received.webhook_id.as_str()),
        )?;
        tx.execute(
            "INSERT INTO rep_counts (agent_id, scored) VALUES (?1, 1)
             ON CONFLICT (agent_id) DO UPDATE SET scored = scored + 1",
            [&event.agent_id],
        )?;
    }
    recorder.commit(tx, received)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .init();
    let secret = SigningSecret::new(&std::env::var("SVC_SIGNING_SECRET")?)?;
    let verifier = Verifier::new(Keyring::single(secret));

    // Your database and your tables.
    let conn = Connection::open("app.db")?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE IF NOT EXISTS call_scores (
             call_id TEXT NOT NULL, success INTEGER NOT NULL, webhook_id TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS rep_counts (agent_id TEXT PRIMARY KEY, scored INTEGER NOT NULL);",
    )?;
    let direct = std::env::args().nth(1).as_deref() == Some("direct");
    let inbox = if direct {
        None
    } else {
        Some(SqliteInbox::open("webhooks.db", InboxPolicy::default())?)
    };
    let mut recorder = SqliteRecorder::install(&conn)?;
    if let Some(inbox) = &inbox {
        // A dead letter keeps its record until it is requeued and handled, whatever its age.
        recorder = recorder.with_inbox(inbox);
    }
    let conn = Arc::new(Mutex::new(conn));
    // rusqlite is synchronous: each delivery's transaction runs on a blocking thread.
    let handler = move |received: Received| {
        let (conn, recorder) = (Arc::clone(&conn), recorder.clone());
        async move {
            tokio::task::spawn_blocking(move || {
                let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
                write_score(&mut conn, &recorder, &received)
            })
            .await
            .map_err(|err| err.to_string())?
            .map_err(|err| err.to_string())
        }
    };

    let listener = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
    match inbox {
        None => {
            // `record` makes the effect exactly once; the in-memory dedup store answers
            // duplicates and replays without a write.
            let store = MemoryDedupStore::new(DedupPolicy::default(), 100_000);
            let route = webhook_route(WebhookReceiver::new(verifier, store, handler));
            let app = Router::new().route("/webhooks/svc", route);
            Server::new(app).run(listener, shutdown_signal()?).await?;
        }
        Some(inbox) => {
            let route = inbox_route(InboxReceiver::new(verifier, inbox.clone()));
            let app = Router::new().route("/webhooks/svc", route);
            Server::new(app)
                .with_background(move |draining| {
                    run_inbox_workers_until_drained(inbox, handler, SystemClock, 4, draining)
                })
                .run(listener, shutdown_signal()?)
                .await?;
        }
    }
    Ok(())
}
