//! Exactly-once effects on SQLite: the tenant's tables and the inbox share one file; each
//! `call.scored` event adds one row to `call_scores` and one to its rep's count, in the same
//! transaction that marks the event done.
//!
//! ```text
//! SVC_SIGNING_SECRET=whsec_… cargo run -p svc-receiver --example exactly_once_sqlite [direct]
//! ```
//!
//! Inbox mode by default; `direct` runs the effect inside the request instead and answers 200
//! after its commit.

use axum::Router;
use rusqlite::Connection;
use svc_receiver::axum::{
    ExactlyOnceReceiver, InboxReceiver, Server, exactly_once_route, inbox_route, shutdown_signal,
};
use svc_receiver::sqlite::{InboxPolicy, SqliteExactlyOnce, SqliteInbox};
use svc_receiver::{Keyring, Received, SigningSecret, Verifier};

/// The tenant's effect: writes only, on the connection it is given (inside a transaction);
/// never begins, commits or rolls back. It runs on the inbox's writer thread: keep it quick.
fn record_score(received: &Received, conn: &Connection) -> rusqlite::Result<()> {
    let event = &received.event;
    conn.execute(
        "INSERT INTO call_scores (call_id, success, webhook_id) VALUES (?1, ?2, ?3)",
        (&event.call_id, event.success, received.webhook_id.as_str()),
    )?;
    conn.execute(
        "INSERT INTO rep_counts (agent_id, scored) VALUES (?1, 1)
         ON CONFLICT (agent_id) DO UPDATE SET scored = scored + 1",
        [&event.agent_id],
    )?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .init();
    let secret = SigningSecret::new(&std::env::var("SVC_SIGNING_SECRET")?)?;
    let verifier = Verifier::new(Keyring::single(secret));

    // The tenant's own tables, in the file the inbox opens next.
    Connection::open("app.db")?.execute_batch(
        "CREATE TABLE IF NOT EXISTS call_scores (
             call_id TEXT NOT NULL, success INTEGER NOT NULL, webhook_id TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS rep_counts (agent_id TEXT PRIMARY KEY, scored INTEGER NOT NULL);",
    )?;
    let inbox = SqliteInbox::open("app.db", InboxPolicy::default())?;
    let exactly_once = SqliteExactlyOnce::new(inbox.clone(), record_score);

    let listener = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
    if std::env::args().nth(1).as_deref() == Some("direct") {
        let route = exactly_once_route(ExactlyOnceReceiver::new(verifier, exactly_once));
        let app = Router::new().route("/webhooks/svc", route);
        Server::new(app).run(listener, shutdown_signal()).await?;
    } else {
        let route = inbox_route(InboxReceiver::new(verifier, inbox.clone()));
        let app = Router::new().route("/webhooks/svc", route);
        Server::new(app)
            .with_inbox_workers(inbox, exactly_once, 4)
            .run(listener, shutdown_signal())
            .await?;
    }
    Ok(())
}
