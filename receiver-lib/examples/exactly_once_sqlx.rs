//! Exactly once on PostgreSQL with your own `sqlx` pool: each `call.scored` event adds one row
//! to `call_scores`, in a transaction of your pool that also records the delivery.
//!
//! ```text
//! SVC_SIGNING_SECRET=whsec_… DATABASE_URL=postgres://app:…@db.internal/app \
//!     cargo run -p svc-receiver --features sqlx-postgres --example exactly_once_sqlx [direct]
//! ```
//!
//! The crate's tables are in the schema `svc_receiver` of the same database. In direct mode
//! your sqlx pool is the only one: the recorder creates its tables, prunes and checks through
//! it (`PgRecorder::on_sqlx`). Inbox mode adds the inbox's own `tokio-postgres` pool.

use axum::Router;
use svc_contract::{Keyring, SigningSecret, SystemClock, Verifier};
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, WebhookReceiver, inbox_route, webhook_route};
use svc_receiver::dedup::{DedupPolicy, MemoryDedupStore};
use svc_receiver::inbox::{InboxPolicy, run_inbox_workers_until_drained};
use svc_receiver::postgres::{PgDatabase, PgInbox, PgRecorder};
use svc_server::{Server, shutdown_signal};

/// Your handler: the delivery recorded and its effect written in one transaction of your pool.
/// Return every error.
async fn write_score(
    pool: &sqlx::PgPool,
    recorder: &PgRecorder,
    received: &Received,
) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    if recorder.record_sqlx(&mut tx, received).await?.is_fresh() {
        sqlx::query("INSERT INTO call_scores (call_id, success, webhook_id) VALUES ($1, $2, $3)")
            .bind(&received.event.call_id)
            .bind(received.event.success)
            .bind(received.webhook_id.as_str())
            .execute(&mut *tx)
            .await?;
    }
    // If a statement failed, PostgreSQL turns this COMMIT into a rollback without an error: the
    // route (or the inbox worker) then finds the record missing and does not acknowledge the
    // delivery. `recorder.commit_sqlx(tx, received)` would say so here, at one more statement.
    tx.commit().await
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

    // The crate's tables created (or checked) through your pool.
    let recorder = PgRecorder::on_sqlx(pool.clone(), "svc_receiver").await?;
    let handler = move |received: Received| {
        let (pool, recorder) = (pool.clone(), recorder.clone());
        async move { write_score(&pool, &recorder, &received).await }
    };

    let listener = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
    if std::env::args().nth(1).as_deref() == Some("direct") {
        // `record_sqlx` makes the effect exactly once on every replica; the in-memory dedup
        // store answers this replica's duplicates and replays without a database write.
        let store = MemoryDedupStore::new(DedupPolicy::default(), 100_000);
        let route = webhook_route(WebhookReceiver::new(verifier, store, handler));
        let app = Router::new().route("/webhooks/svc", route);
        Server::new(app).run(listener, shutdown_signal()?).await?;
    } else {
        let database = PgDatabase::connect_in_schema(&url, "svc_receiver", 8).await?;
        let inbox = PgInbox::new(database, InboxPolicy::default());
        let route = inbox_route(InboxReceiver::new(verifier, inbox.clone()));
        let app = Router::new().route("/webhooks/svc", route);
        Server::new(app)
            .with_background(move |draining| {
                run_inbox_workers_until_drained(inbox, handler, SystemClock, 4, draining)
            })
            .run(listener, shutdown_signal()?)
            .await?;
    }
    Ok(())
}
