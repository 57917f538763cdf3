//! Exactly-once effects on PostgreSQL: each `call.scored` event adds one row to the tenant's
//! `call_scores` and one to its rep's count, in the same transaction that marks the event done.
//!
//! ```text
//! SVC_SIGNING_SECRET=whsec_… DATABASE_URL=postgres://app:…@db.internal/app \
//!     cargo run -p svc-receiver --features postgres --example exactly_once_postgres [direct]
//! ```
//!
//! Inbox mode by default (the delivery is stored before the 200, then handed to the effect
//! with retries); `direct` runs the effect inside the request instead and answers 200 after
//! its commit. The crate's tables go to the schema `svc_receiver` of the same database.

use axum::Router;
use svc_receiver::axum::{
    ExactlyOnceReceiver, InboxReceiver, Server, exactly_once_route, inbox_route, shutdown_signal,
};
use svc_receiver::inbox::InboxPolicy;
use svc_receiver::postgres::{PgDatabase, PgEffect, PgExactlyOnce, PgInbox, PgTx};
use svc_receiver::{Keyring, Received, SigningSecret, Verifier};

/// The tenant's effect: writes only, in the transaction it is given; never commits.
struct RecordScore;

impl PgEffect for RecordScore {
    type Error = tokio_postgres::Error;

    async fn apply(&self, received: &Received, tx: &PgTx<'_>) -> Result<(), Self::Error> {
        let event = &received.event;
        // Prepared once per pooled connection, then one round trip each.
        let insert_score = tx
            .prepare_cached(
                "INSERT INTO call_scores (call_id, success, webhook_id) VALUES ($1, $2, $3)",
            )
            .await?;
        tx.execute(
            &insert_score,
            &[
                &event.call_id,
                &event.success,
                &received.webhook_id.as_str(),
            ],
        )
        .await?;
        let count_rep = tx
            .prepare_cached(
                "INSERT INTO rep_counts (agent_id, scored) VALUES ($1, 1)
                 ON CONFLICT (agent_id) DO UPDATE SET scored = rep_counts.scored + 1",
            )
            .await?;
        tx.execute(&count_rep, &[&event.agent_id]).await?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .init();
    let secret = SigningSecret::new(&std::env::var("SVC_SIGNING_SECRET")?)?;
    let verifier = Verifier::new(Keyring::single(secret));
    let url = std::env::var("DATABASE_URL")?;

    // The tenant's own tables (its migrations would do this).
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS call_scores (
                 call_id TEXT NOT NULL, success BOOLEAN NOT NULL, webhook_id TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS rep_counts (
                 agent_id TEXT PRIMARY KEY, scored BIGINT NOT NULL);",
        )
        .await?;
    drop(client);

    // The crate's inbox in the same database, in a schema of its own.
    let database = PgDatabase::connect_in_schema(&url, "svc_receiver", 16).await?;
    let inbox = PgInbox::new(database, InboxPolicy::default());
    let exactly_once = PgExactlyOnce::new(inbox.clone(), RecordScore);

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
