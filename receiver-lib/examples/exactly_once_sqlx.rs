//! Exactly-once effects on PostgreSQL with your own `sqlx` pool: each `call.scored` event adds
//! one row to the tenant's `call_scores`, in the same transaction that marks the event done.
//!
//! ```text
//! SVC_SIGNING_SECRET=whsec_… DATABASE_URL=postgres://app:…@db.internal/app \
//!     cargo run -p svc-receiver --features sqlx-postgres --example exactly_once_sqlx [direct]
//! ```
//!
//! The inbox itself stays on the crate's `tokio-postgres` pool of the same database (schema
//! `svc_receiver`); only the transaction with your writes comes from your sqlx pool.

use axum::Router;
use svc_receiver::axum::{
    ExactlyOnceReceiver, InboxReceiver, Server, exactly_once_route, inbox_route, shutdown_signal,
};
use svc_receiver::inbox::InboxPolicy;
use svc_receiver::postgres::{PgDatabase, PgInbox, SqlxPgEffect, SqlxPgExactlyOnce};
use svc_receiver::{Keyring, Received, SigningSecret, Verifier};

/// The tenant's effect: writes only, on the transaction's connection; never commits.
struct RecordScore;

impl SqlxPgEffect for RecordScore {
    type Error = sqlx::Error;

    async fn apply(
        &self,
        received: &Received,
        conn: &mut sqlx::PgConnection,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO call_scores (call_id, success, webhook_id) VALUES ($1, $2, $3)")
            .bind(&received.event.call_id)
            .bind(received.event.success)
            .bind(received.webhook_id.as_str())
            .execute(&mut *conn)
            .await?;
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

    // Your pool and your tables.
    let pool = sqlx::PgPool::connect(&url).await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS call_scores (
             call_id TEXT NOT NULL, success BOOLEAN NOT NULL, webhook_id TEXT NOT NULL)",
    )
    .execute(&pool)
    .await?;

    let database = PgDatabase::connect_in_schema(&url, "svc_receiver", 16).await?;
    let inbox = PgInbox::new(database, InboxPolicy::default());
    let exactly_once = SqlxPgExactlyOnce::new(inbox.clone(), pool, RecordScore);

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
