//! Reconciling into a tenant's own tables: a `Sink` over one `scored_calls` table (with a
//! `rep_scores` count and a small table of watermarks) in the tenant's SQLite database, with
//! rusqlite. It needs `svc-client` and `svc-reconcile` alone (no server, no command line);
//! `own_table_webhooks.rs` feeds the same tables from the webhooks.
//!
//! ```sh
//! svc-cli sandbox &                      # prints SVC_BASE_URL and SVC_API_KEY to export
//! cargo run -p svc-reconcile --example own_table -- tenant.db
//! # once own_table_webhooks.rs feeds the tables, say since when: lost webhooks then exit 3
//! cargo run -p svc-reconcile --example own_table -- tenant.db 2026-03-01T00:00:00Z
//! ```
//!
//! Each scored call lands in `scored_calls` once, whichever path brings it first, and its rep's
//! `rep_scores.calls` goes up once, in the transaction that stores the call: both paths store
//! through [`store_call`], which looks the call up by id inside that transaction. A run lists
//! the calls scored since the last one (with an overlap) and reads the detail of each call the
//! table does not hold yet (or whose `scoredAt` moved); a score that changed with no webhook is
//! counted as a silent change. The run lock is `()`: one process on cron, whose runs never
//! overlap.
//!
//! The tables keep no ledger of webhooks: given since when webhooks feed them
//! (`Options::webhooks_since`), the run counts a call it had to store itself as recovered, from
//! what [`store_call`] answers, and the example exits 3 on it, as `svc-cli reconcile` does.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};
use svc_client::{ApiKey, CallId, CallSource, Client, RawCallDetail};
use svc_reconcile::{
    Arrival, Batch, Delivered, KnownCall, LockError, Options, Outcome, Reconciler, RunId,
    RunReport, Sink, Stored, Version, WindowEnd,
};

/// The tenant's tables.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS scored_calls (
        call_id       TEXT PRIMARY KEY,
        source        TEXT NOT NULL,
        agent_id      TEXT,
        overall_score REAL NOT NULL,
        scored_at     TEXT,
        updated_at    TEXT,
        detail        TEXT NOT NULL,
        arrived_by    TEXT NOT NULL  -- 'webhook' or 'reconcile': whichever came first
    );
    CREATE TABLE IF NOT EXISTS rep_scores (
        agent_id TEXT PRIMARY KEY,
        calls    INTEGER NOT NULL  -- scored calls of the rep, each counted once
    );
    CREATE TABLE IF NOT EXISTS reconcile_watermarks (
        source    TEXT PRIMARY KEY,
        watermark TEXT NOT NULL
    );";

/// The tenant's database, as a reconcile sink.
#[derive(Debug, Clone)]
pub struct TenantTables {
    conn: Arc<Mutex<Connection>>,
}

/// What can go wrong in the tenant's tables.
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    /// SQLite failed.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The blocking task failed.
    #[error("database task: {0}")]
    Task(String),
}

impl TenantTables {
    /// Opens (and creates) the tables in the database at `path`.
    pub fn open(path: &std::path::Path) -> Result<Self, TablesError> {
        let conn = Connection::open(path)?;
        conn.execute_batch(SCHEMA)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `work` on the connection on a blocking thread.
    async fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, TablesError> + Send + 'static,
    ) -> Result<T, TablesError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            work(&mut conn)
        })
        .await
        .map_err(|e| TablesError::Task(e.to_string()))?
    }
}

impl Sink for TenantTables {
    type Error = TablesError;
    type Lock = ();

    async fn lock(&self, _wait: Duration) -> Result<(), LockError<TablesError>> {
        Ok(())
    }

    async fn watermark(&self, source: &CallSource) -> Result<Option<DateTime<Utc>>, TablesError> {
        let source = source.as_str().to_owned();
        let text: Option<String> = self
            .with(move |conn| {
                Ok(conn
                    .query_row(
                        "SELECT watermark FROM reconcile_watermarks WHERE source = ?1",
                        [&source],
                        |row| row.get(0),
                    )
                    .optional()?)
            })
            .await?;
        Ok(text.and_then(|t| DateTime::parse_from_rfc3339(&t).ok().map(|at| at.to_utc())))
    }

    async fn known_calls(&self, ids: &[CallId]) -> Result<HashMap<CallId, KnownCall>, TablesError> {
        let ids = ids.to_vec();
        self.with(move |conn| {
            let mut known = HashMap::new();
            let mut query =
                conn.prepare("SELECT scored_at FROM scored_calls WHERE call_id = ?1")?;
            for id in ids {
                let scored_at: Option<Option<String>> = query
                    .query_row([id.as_str()], |row| row.get(0))
                    .optional()?;
                if let Some(scored_at) = scored_at {
                    known.insert(
                        id,
                        KnownCall {
                            scored_at,
                            has_row: true,
                        },
                    );
                }
            }
            Ok(known)
        })
        .await
    }

    async fn store_batch(&self, batch: Batch) -> Result<Vec<Stored>, TablesError> {
        self.with(move |conn| {
            let tx = conn.transaction()?;
            let stored = batch
                .calls
                .iter()
                .map(|call| store_call(&tx, &call.detail, "reconcile"))
                .collect::<Result<Vec<_>, _>>()?;
            tx.commit()?;
            Ok(stored)
        })
        .await
    }

    async fn store_delivered(&self, delivered: Delivered) -> Result<Stored, TablesError> {
        self.with(move |conn| {
            let tx = conn.transaction()?;
            let stored = store_call(&tx, &delivered.detail, "webhook")?;
            tx.commit()?;
            Ok(stored)
        })
        .await
    }

    async fn record_window(
        &self,
        source: &CallSource,
        _run_id: Option<RunId>,
        _at: DateTime<Utc>,
        end: WindowEnd<'_>,
    ) -> Result<(), TablesError> {
        let WindowEnd::Complete(Some(watermark)) = end else {
            return Ok(());
        };
        let (source, watermark) = (source.as_str().to_owned(), watermark.to_rfc3339());
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO reconcile_watermarks (source, watermark) VALUES (?1, ?2)
                 ON CONFLICT (source) DO UPDATE SET watermark = ?2",
                [&source, &watermark],
            )?;
            Ok(())
        })
        .await
    }
}

/// Stores one call's detail inside `tx`, for both paths: inserted (and its rep credited once)
/// when the table does not hold it, updated when the service's version is newer, left alone
/// when it is older or the same.
pub fn store_call(
    tx: &rusqlite::Transaction<'_>,
    detail: &RawCallDetail,
    arrived_by: &str,
) -> Result<Stored, TablesError> {
    let row = &detail.detail.row;
    let id = row.id.as_str();
    let held: Option<String> = tx
        .query_row(
            "SELECT detail FROM scored_calls WHERE call_id = ?1",
            [id],
            |row| row.get(0),
        )
        .optional()?;
    let outcome = match held {
        // New only when neither path held it; with no ledger, the run decides the delivery.
        None => Stored::New(Arrival::Backfill),
        Some(held) => match svc_client::RawCallDetail::parse(held.as_bytes()) {
            Ok(held) if Version::of(detail).is_older_than(&Version::of(&held)) => {
                return Ok(Stored::Unchanged);
            }
            Ok(held) if Version::of(&held) == Version::of(detail) => return Ok(Stored::Unchanged),
            _ => Stored::Changed,
        },
    };
    let agent_id = row.agent_id.as_ref().map(|a| a.as_str());
    tx.execute(
        "INSERT INTO scored_calls
            (call_id, source, agent_id, overall_score, scored_at, updated_at, detail, arrived_by)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (call_id) DO UPDATE SET overall_score = ?4, scored_at = ?5,
            updated_at = ?6, detail = ?7",
        params![
            id,
            row.source.as_str(),
            agent_id,
            detail.detail.score.overall_score,
            row.scored_at,
            detail.detail.updated_at,
            detail.json,
            arrived_by,
        ],
    )?;
    if let (Stored::New(_), Some(agent_id)) = (outcome, agent_id) {
        tx.execute(
            "INSERT INTO rep_scores (agent_id, calls) VALUES (?1, 1)
             ON CONFLICT (agent_id) DO UPDATE SET calls = calls + 1",
            [agent_id],
        )?;
    }
    Ok(outcome)
}

/// One reconcile of the service behind `client` into the tenant's tables.
pub async fn reconcile_into(
    tables: TenantTables,
    client: Client,
    options: Options,
) -> Result<RunReport, Box<dyn std::error::Error + Send + Sync>> {
    let reconciler = Reconciler::new(client, Arc::new(tables), options);
    let guard = reconciler.lock(Duration::ZERO).await?;
    Ok(reconciler.run(&guard, &()).await?)
}

#[tokio::main]
async fn main() -> Result<ExitCode, Box<dyn std::error::Error + Send + Sync>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "tenant.db".to_owned());
    let webhooks_since = match args.next() {
        Some(since) => Some(DateTime::parse_from_rfc3339(&since)?.to_utc()),
        None => None,
    };
    let tables = TenantTables::open(std::path::Path::new(&path))?;
    let options = Options {
        webhooks_since,
        ..Options::default()
    };
    let report = reconcile_into(tables, client_from_env()?, options).await?;
    println!(
        "{} calls listed, {} new, {} recovered (webhook lost), {} awaiting their webhook, {} \
         changed with no webhook",
        report.totals.listed,
        report.totals.new,
        report.totals.recovered,
        report.totals.awaiting,
        report.totals.changed_silently
    );
    // Alert on lost webhooks and silent changes, as `svc-cli reconcile` does.
    Ok(match report.outcome {
        Outcome::Found => ExitCode::from(3),
        Outcome::CallsFailed => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

/// The client of the service `SVC_BASE_URL` names, with the key `SVC_API_KEY` holds.
pub fn client_from_env() -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
    Ok(Client::builder(std::env::var("SVC_BASE_URL")?)
        .api_key(ApiKey::new(std::env::var("SVC_API_KEY")?))
        .user_agent_suffix("own-table-example")
        .build()?)
}
