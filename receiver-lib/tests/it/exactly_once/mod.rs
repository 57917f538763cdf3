//! Exactly once: the tenant records each delivery in its own transaction, beside its writes
//! (`svc_receiver::exactly_once`), on SQLite, PostgreSQL (tokio-postgres) and sqlx, in both
//! modes.
//!
//! - `sqlite`: `SqliteRecorder` itself, both modes in process (failures rolled back and retried,
//!   a failure reported after the commit, dead letters, replays), and a property test of random
//!   interleavings of deliveries, retries, failures, crashes and restarts.
//! - `postgres`: `PgRecorder` (and `record_sqlx`) under concurrency: one `Fresh` per id across
//!   connections, the tenant's savepoints and rollbacks, a read-modify-write total, the
//!   database's isolation level, replicas starting at once, a planted overload, the server's
//!   words in errors.
//! - `crash`: real receiver processes killed with SIGKILL before and after the tenant's commit,
//!   per driver and mode, and 8 deliveries of one id across 3 processes.
//!
//! The PostgreSQL tests skip loudly without `SVC_TEST_POSTGRES_URL`.

mod crash;
mod edges;
mod postgres;
mod sqlite;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};
use svc_contract::sign;
use svc_receiver::Received;
use svc_receiver::inbox::InboxPolicy;
use svc_receiver::sqlite::SqliteRecorder;

use crate::helpers::{SECRET, event_body};

/// A policy that retries quickly and hands an abandoned entry out again after 2 s.
fn quick_policy() -> InboxPolicy {
    InboxPolicy {
        first_backoff: Duration::from_secs(1),
        lease: Duration::from_secs(2),
        max_attempts: 1000,
        ..InboxPolicy::default()
    }
}

/// A signed delivery of `id` at `now`: (signature header, body).
fn delivery(id: &str, now: i64) -> (String, Vec<u8>) {
    let body = event_body(&format!("call_{id}"));
    (sign(SECRET, now, &body), body)
}

/// A delivery of `id` at `now` as an inbox stores it: (its verified signature, body).
fn verified(id: &str, now: i64) -> ([u8; 32], Vec<u8>) {
    let (header, body) = delivery(id, now);
    let signature = svc_contract::signature::SignatureHeader::parse(header.as_bytes())
        .expect("header")
        .signatures()[0];
    (signature, body)
}

/// A delivery as a handler gets it.
fn received(id: &str, now: i64) -> Received {
    let body = event_body(&format!("call_{id}"));
    let event = serde_json::from_slice(&body).expect("event");
    Received::new(crate::helpers::webhook_id(id), event, body, now)
}

/// The tenant's effect table: no unique key, so that a second run of an effect shows.
const EFFECTS_SQLITE: &str = "CREATE TABLE IF NOT EXISTS effects (
    n INTEGER PRIMARY KEY, webhook_id TEXT NOT NULL, call_id TEXT NOT NULL)";

/// A tenant's SQLite database with its effect table and the recorded ids, and the handler
/// the tests give either mode: one transaction per delivery (record, write one effect row,
/// commit), failing before its commit while `fail` is set, and reporting a failure after its
/// commit while `fail_after_commit` is set.
#[derive(Clone)]
struct SqliteTenant {
    path: std::path::PathBuf,
    conn: Arc<Mutex<Connection>>,
    recorder: SqliteRecorder,
    fail: Arc<AtomicBool>,
    fail_after_commit: Arc<AtomicBool>,
}

impl SqliteTenant {
    fn open(path: &std::path::Path) -> Self {
        let conn = Connection::open(path).expect("open");
        conn.busy_timeout(Duration::from_secs(5)).expect("busy");
        conn.execute_batch(EFFECTS_SQLITE).expect("effects table");
        let recorder = SqliteRecorder::install(&conn).expect("recorder");
        Self {
            path: path.to_owned(),
            conn: Arc::new(Mutex::new(conn)),
            recorder,
            fail: Arc::default(),
            fail_after_commit: Arc::default(),
        }
    }

    /// The tenant's transaction for one delivery.
    fn write(&self, received: &Received) -> Result<(), String> {
        self.write_pausing(received, || {})
    }

    /// [`SqliteTenant::write`], calling `before_commit` after the write and before the commit
    /// (where a crash test stops the process).
    fn write_pausing(
        &self,
        received: &Received,
        before_commit: impl FnOnce(),
    ) -> Result<(), String> {
        let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| e.to_string())?;
        if self
            .recorder
            .record(&tx, received)
            .map_err(|e| e.to_string())?
            .is_fresh()
        {
            tx.execute(
                "INSERT INTO effects (webhook_id, call_id) VALUES (?1, ?2)",
                [
                    received.webhook_id.as_str(),
                    received.event.call_id.as_str(),
                ],
            )
            .map_err(|e| e.to_string())?;
        }
        before_commit();
        if self.fail.load(Ordering::SeqCst) {
            // Dropped: rolled back with the record.
            return Err("planned failure before the commit".into());
        }
        tx.commit().map_err(|e| e.to_string())?;
        if self.fail_after_commit.load(Ordering::SeqCst) {
            return Err("planned failure after the commit".into());
        }
        Ok(())
    }

    /// The handler both modes run.
    fn handler(
        &self,
    ) -> impl Fn(Received) -> std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send>>
    + Send
    + Sync
    + Clone
    + 'static {
        let tenant = self.clone();
        move |received: Received| {
            let tenant = tenant.clone();
            Box::pin(async move {
                tokio::task::spawn_blocking(move || tenant.write(&received))
                    .await
                    .map_err(|e| e.to_string())?
            })
        }
    }

    /// How many effect rows `id` has.
    fn effects(&self, id: &str) -> i64 {
        sqlite_effects(&self.path, id)
    }
}

/// How many effect rows `id` has in the SQLite file at `path`.
fn sqlite_effects(path: &std::path::Path, id: &str) -> i64 {
    let conn = Connection::open(path).expect("open");
    conn.query_row(
        "SELECT COUNT(*) FROM effects WHERE webhook_id = ?1",
        [id],
        |row| row.get(0),
    )
    .expect("count")
}
