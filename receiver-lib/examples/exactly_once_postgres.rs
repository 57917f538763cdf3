//! Exactly once on PostgreSQL with `tokio-postgres`, through a `deadpool-postgres` pool of
//! yours: each `call.scored` event adds one row to `call_scores` and one to its rep's count,
//! in a transaction of yours that also records the delivery.
//!
//! ```text
//! SVC_SIGNING_SECRET=whsec_… DATABASE_URL=postgres://app:…@db.internal/app \
//!     cargo run -p svc-receiver --features postgres --example exactly_once_postgres [direct]
//! ```
//!
//! Inbox mode by default (the delivery is stored before the 200, then handed to your handler
//! with retries); `direct` runs your handler inside the request and answers 200 after your
//! commit. The crate's tables go to the schema `svc_receiver` of the same database.

use axum::Router;
use deadpool_postgres::{Manager, Pool};
use svc_contract::{Keyring, SigningSecret, SystemClock, Verifier};
use svc_postgres::PgError;
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, WebhookReceiver, inbox_route, webhook_route};
use svc_receiver::dedup::{DedupPolicy, MemoryDedupStore};
use svc_receiver::inbox::{InboxPolicy, run_inbox_workers_until_drained};
use svc_receiver::postgres::{PgDatabase, PgInbox, PgRecorder};
use svc_server::{Server, shutdown_signal};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Your handler: one transaction of yours per delivery, on your pool.
async fn handle(pool: &Pool, recorder: &PgRecorder, received: &Received) -> Result<(), Error> {
    let mut client = pool.get().await?;
    write_score(&mut client, recorder, received).await?;
    Ok(())
}

/// The delivery recorded and its effect written in one transaction, committed together.
/// Return every error: if a statement failed, PostgreSQL turns the COMMIT into a rollback
/// without an error, and the route (or the inbox worker) then finds the record missing and does
/// not acknowledge the delivery, which comes back. `recorder.commit(tx, received)` would say so
/// here, at the cost of one more statement in the transaction.
/// (`PgError` says the server's SQLSTATE and message where the driver's error says "db error".)
async fn write_score(
    client: &mut deadpool_postgres::Client,
    recorder: &PgRecorder,
    received: &Received,
) -> Result<(), PgError> {
    let tx = client.transaction().await?;
    if recorder.record(&tx, received).await?.is_fresh() {
        let event = &received.event;
        // Prepared once per pooled connection (deadpool's statement cache).
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
    }
    tx.commit().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .init();
    let secret = SigningSecret::new(&std::env::var("SVC_SIGNING_SECRET")?)?;
    let verifier = Verifier::new(Keyring::single(secret));
    let url = std::env::var("DATABASE_URL")?;

    // Your pool and your tables.
    let config: tokio_postgres::Config = url.parse()?;
    let pool = Pool::builder(Manager::new(config, tokio_postgres::NoTls))
        .max_size(16)
        .build()?;
    pool.get()
        .await?
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS call_scores (
                 call_id TEXT NOT NULL, success BOOLEAN NOT NULL, webhook_id TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS rep_counts (agent_id TEXT PRIMARY KEY, scored BIGINT NOT NULL);",
        )
        .await?;

    // The crate's tables in the same database, in a schema of their own.
    let database = PgDatabase::connect_in_schema(&url, "svc_receiver", 8).await?;
    let recorder = database.recorder();
    let handler = move |received: Received| {
        let (pool, recorder) = (pool.clone(), recorder.clone());
        async move { handle(&pool, &recorder, &received).await }
    };

    let listener = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
    if std::env::args().nth(1).as_deref() == Some("direct") {
        // `record` is what makes the effect exactly once, on every replica; the in-memory
        // dedup store answers this replica's duplicates and replays without a database write.
        let store = MemoryDedupStore::new(DedupPolicy::default(), 100_000);
        let route = webhook_route(WebhookReceiver::new(verifier, store, handler));
        let app = Router::new().route("/webhooks/svc", route);
        Server::new(app).run(listener, shutdown_signal()?).await?;
    } else {
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
