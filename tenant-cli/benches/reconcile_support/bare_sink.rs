//! The least a SQLite sink can be: a [`Sink`] that keeps each call's detail text under its id in
//! one bare table, a transaction per page, and nothing else (no list row, score, index, ledger,
//! runs, failures or watermark). Reconcile into it is the ceiling of any SQLite store that keeps
//! the details, as `MemorySink` is of any store at all.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, params_from_iter};
use svc_client::{CallId, CallSource};
use svc_reconcile::{Arrival, Batch, KnownCall, LockError, RunId, Sink, Stored, WindowEnd};

/// When the bare table's WAL is copied into the database file.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checkpoints {
    /// SQLite's automatic checkpoint (every 1 000 WAL pages), as svc-store.
    Automatic,
    /// Never during the run (`wal_autocheckpoint = 0`): the WAL grows to the whole sync. Not a
    /// store anyone should ship; the least any WAL-mode store could spend on the sync's path,
    /// whatever thread or moment its checkpoints were moved to.
    Never,
}

/// A bare table of details in a SQLite file (WAL, `synchronous = NORMAL`, as svc-store).
#[derive(Clone)]
pub(crate) struct BareSink {
    conn: Arc<Mutex<Connection>>,
}

#[derive(Debug, thiserror::Error)]
#[error("bare sink: {0}")]
pub(crate) struct BareError(String);

impl From<rusqlite::Error> for BareError {
    fn from(e: rusqlite::Error) -> Self {
        Self(e.to_string())
    }
}

impl BareSink {
    /// Creates the table in a new file at `path`.
    pub(crate) fn create(path: &Path, checkpoints: Checkpoints) -> Result<Self, BareError> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        if checkpoints == Checkpoints::Never {
            conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        }
        conn.execute_batch("CREATE TABLE calls (id TEXT PRIMARY KEY, detail TEXT NOT NULL)")?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// How many calls the table holds.
    pub(crate) fn held(&self) -> u64 {
        self.conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get::<_, i64>(0))
            .map_or(0, |n| u64::try_from(n).unwrap_or(0))
    }

    /// Runs `work` on the connection on a blocking thread.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, BareError> + Send + 'static,
    ) -> Result<T, BareError> {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            work(&mut conn.lock().unwrap_or_else(PoisonError::into_inner))
        })
        .await
        .map_err(|e| BareError(e.to_string()))?
    }
}

impl Sink for BareSink {
    type Error = BareError;
    type Lock = ();

    async fn lock(&self, _wait: Duration) -> Result<(), LockError<BareError>> {
        Ok(())
    }

    async fn watermark(&self, _: &CallSource) -> Result<Option<DateTime<Utc>>, BareError> {
        Ok(None)
    }

    async fn known_calls(&self, ids: &[CallId]) -> Result<HashMap<CallId, KnownCall>, BareError> {
        let ids: Vec<String> = ids.iter().map(|id| id.as_str().to_owned()).collect();
        self.blocking(move |conn| {
            let marks = vec!["?"; ids.len()].join(",");
            let mut stmt = conn.prepare(&format!("SELECT id FROM calls WHERE id IN ({marks})"))?;
            let found = stmt
                .query_map(params_from_iter(ids.iter()), |r| r.get::<_, String>(0))?
                .map(|id| {
                    let known = KnownCall {
                        scored_at: None,
                        has_row: true,
                    };
                    Ok((CallId::from_service(id?), known))
                })
                .collect::<Result<_, rusqlite::Error>>()?;
            Ok(found)
        })
        .await
    }

    async fn store_batch(&self, batch: Batch) -> Result<Vec<Stored>, BareError> {
        self.blocking(move |conn| {
            let tx = conn.transaction()?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO calls (id, detail) VALUES (?1, ?2)
                     ON CONFLICT (id) DO UPDATE SET detail = excluded.detail",
                )?;
                for call in &batch.calls {
                    insert.execute((call.detail.detail.row.id.as_str(), &call.detail.json))?;
                }
            }
            tx.commit()?;
            Ok(vec![Stored::New(Arrival::Backfill); batch.calls.len()])
        })
        .await
    }

    async fn record_window(
        &self,
        _: &CallSource,
        _: Option<RunId>,
        _: DateTime<Utc>,
        _: WindowEnd<'_>,
    ) -> Result<(), BareError> {
        Ok(())
    }
}
