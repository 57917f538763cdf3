//! [`SqliteRecorder`]: records a verified delivery in a transaction of yours on a `rusqlite`
//! connection, for exactly-once effects (see [`crate::exactly_once`]).

use std::time::Duration;

use std::path::Path;

use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, ffi};

use svc_contract::Clock;

use crate::exactly_once::{Recorded, Retention};
use crate::handler::Received;
use crate::record_check::Probe;

/// The table recorded ids are kept in, in your database file.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS main.webhook_recorded (
    id          TEXT PRIMARY KEY,
    recorded_at INTEGER NOT NULL,
    signature   BLOB
);
CREATE INDEX IF NOT EXISTS main.webhook_recorded_at ON webhook_recorded (recorded_at);
";

/// Records deliveries in your transactions, in a table of your SQLite database
/// (`webhook_recorded`, created by [`SqliteRecorder::install`]). Cheap to clone.
///
/// ```rust,ignore
/// let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
/// if recorder.record(&tx, &received)?.is_fresh() {
///     tx.execute("INSERT INTO scores (call_id) VALUES (?1)", [&received.event.call_id])?;
/// }
/// recorder.commit(tx, &received)?;                  // not tx.commit(): see below
/// ```
///
/// Commit through [`SqliteRecorder::commit`]: it checks that the transaction is still open
/// and holds the record, then commits. SQLite rolls a transaction back by itself on some
/// errors (a full disk, say), and later statements then run outside it, each committed on its
/// own; an error dropped on the way would otherwise lose the record. A handler that committed
/// itself is caught later: the integrations look the record up in the database file before
/// they acknowledge the delivery.
///
/// Begin the transaction `IMMEDIATE` (or record before reading): SQLite has one writer at a
/// time, and a deferred transaction that read first fails with `SQLITE_BUSY` when another
/// connection wrote meanwhile, where an immediate one waits for its turn (the connection's
/// busy timeout). Keep your tables in a file of their own, not the file of a
/// [`super::SqliteInbox`] or [`super::SqliteDedupStore`]: those keep an index in memory and
/// reread their file whenever another connection wrote to it.
///
/// Recorded ids are forgotten after the retention ([`DEFAULT_RECORD_RETENTION`], a day, by
/// default): at most once a minute, `record` deletes the older ones in the same transaction,
/// but never one whose delivery the inbox given to [`SqliteRecorder::with_inbox`] still holds.
///
/// [`DEFAULT_RECORD_RETENTION`]: crate::exactly_once::DEFAULT_RECORD_RETENTION
#[derive(Clone)]
pub struct SqliteRecorder {
    retention: Retention,
    /// The inbox file whose pending entries and dead letters keep their records.
    inbox: Option<std::sync::Arc<Path>>,
    /// Reads the records handlers committed themselves, before their deliveries are
    /// acknowledged.
    probe: RecordProbe,
}

impl std::fmt::Debug for SqliteRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteRecorder")
            .field("retention", &self.retention.period())
            .finish_non_exhaustive()
    }
}

impl SqliteRecorder {
    /// Creates the table recorded ids are kept in, in `conn`'s database, when it is missing.
    ///
    /// # Errors
    /// The driver's error when the table cannot be created.
    pub fn install(conn: &Connection) -> rusqlite::Result<Self> {
        conn.execute_batch(SCHEMA)?;
        // A table made before signatures were kept gets their column; then their unique index
        // (a replay of a recorded signature under another id is a duplicate).
        let has_signature: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('webhook_recorded', 'main')
                            WHERE name = 'signature')",
            [],
            |row| row.get(0),
        )?;
        if !has_signature {
            conn.execute_batch("ALTER TABLE main.webhook_recorded ADD COLUMN signature BLOB")?;
        }
        conn.execute_batch(
            "CREATE UNIQUE INDEX IF NOT EXISTS main.webhook_recorded_signature
             ON webhook_recorded (signature)",
        )?;
        Ok(Self {
            retention: Retention::default(),
            inbox: None,
            probe: RecordProbe::default(),
        })
    }

    /// The same recorder, reading "now" (when a delivery is recorded, and the retention's
    /// cutoff) from `clock` instead of the system clock.
    #[must_use]
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.retention = self.retention.with_clock(clock);
        self
    }

    /// The same recorder, never forgetting the record of a delivery `inbox` still holds
    /// (pending, or a dead letter that may be requeued), whatever its age: in inbox mode, give
    /// it the inbox the workers hand out, so that a dead letter requeued after the retention
    /// finds its record and is not written twice.
    #[must_use]
    pub fn with_inbox(mut self, inbox: &super::SqliteInbox) -> Self {
        self.inbox = Some(inbox.path().into());
        self
    }

    /// The same recorder, keeping recorded ids for `retention` instead of a day. Keep it past
    /// every way a delivery can come back: the sender's retry (about 5 minutes), the inbox's
    /// retries and leases, and dead letters you requeue.
    #[must_use]
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = self.retention.with_period(retention);
        self
    }

    /// Records `received` in the transaction open on `tx` (a `rusqlite::Transaction` or
    /// `Savepoint` derefs to its connection): [`Recorded::Fresh`] when no committed transaction
    /// recorded it (write its effect, then commit), [`Recorded::Duplicate`] when one did (write
    /// nothing).
    ///
    /// # Errors
    /// The driver's error; `SQLITE_MISUSE` when no transaction is open on `tx` (a record
    /// committed on its own, apart from the effect, would guard nothing).
    pub fn record(&self, tx: &Connection, received: &Received) -> rusqlite::Result<Recorded> {
        if tx.is_autocommit() {
            return Err(misuse(
                "SqliteRecorder::record needs an open transaction: the record must commit \
                 with the effect it guards",
            ));
        }
        let now = self.retention.now();
        if let Some(cutoff) = self.retention.prune_cutoff(now) {
            let held = match &self.inbox {
                Some(inbox) => held_ids(inbox)?,
                None => "[]".to_owned(),
            };
            tx.prepare_cached(
                "DELETE FROM main.webhook_recorded WHERE recorded_at < ?1
                 AND id NOT IN (SELECT value FROM json_each(?2))",
            )?
            .execute((cutoff, held))?;
        }
        let inserted = tx
            .prepare_cached(
                "INSERT INTO main.webhook_recorded (id, recorded_at, signature) VALUES (?1, ?2, ?3)
                 ON CONFLICT DO NOTHING",
            )?
            .execute((
                received.webhook_id.as_str(),
                now,
                received.signature.as_ref().map(<[u8; 32]>::as_slice),
            ))?;
        Ok(if inserted == 1 {
            // An in-memory database has no file another connection could read.
            if let Some(path) = tx.path().filter(|path| !path.is_empty()) {
                received
                    .check
                    .recorded(Probe::Sqlite(self.probe.clone(), Path::new(path).into()));
            }
            Recorded::Fresh
        } else {
            Recorded::Duplicate
        })
    }

    /// Commits `tx` after checking that it is still open (SQLite did not roll it back by
    /// itself) and holds the record of `received` (made by [`SqliteRecorder::record`] in it,
    /// or committed before when `record` answered `Duplicate`).
    ///
    /// # Errors
    /// `SQLITE_MISUSE` when the transaction is no longer open or does not hold the record (it
    /// was never made, or was rolled back to a savepoint): `tx` is rolled back; the driver's
    /// error when the commit fails.
    pub fn commit(&self, tx: Transaction<'_>, received: &Received) -> rusqlite::Result<()> {
        if tx.is_autocommit() {
            return Err(misuse(
                "the transaction is no longer open: SQLite rolled it back after an error (a full \
                 disk, say), and what ran after it was committed on its own; the record is lost",
            ));
        }
        // The record of this id, or of this signature (a replay recorded a duplicate).
        let holds: bool = tx
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM main.webhook_recorded WHERE id = ?1)
                 OR EXISTS (SELECT 1 FROM main.webhook_recorded WHERE signature = ?2)",
            )?
            .query_row(
                (
                    received.webhook_id.as_str(),
                    received.signature.as_ref().map(<[u8; 32]>::as_slice),
                ),
                |row| row.get(0),
            )?;
        if !holds {
            return Err(misuse(&format!(
                "the transaction does not hold the record of {}: record the delivery in it \
                 (SqliteRecorder::record) outside any savepoint rolled back on its own; rolled back",
                received.webhook_id
            )));
        }
        tx.commit()?;
        received.check.committed();
        Ok(())
    }
}

/// An `SQLITE_MISUSE` error with `text`.
fn misuse(text: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        ffi::Error {
            code: ErrorCode::ApiMisuse,
            extended_code: ffi::SQLITE_MISUSE,
        },
        Some(text.to_owned()),
    )
}

/// The ids the inbox at `path` still holds (pending or dead), as a JSON array, read on a
/// connection of its own.
fn held_ids(path: &Path) -> rusqlite::Result<String> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.query_row(
        "SELECT json_group_array(id) FROM main.webhook_inbox WHERE state <> 'done'",
        [],
        |row| row.get(0),
    )
}

/// Reads recorded ids on a connection of its own (opened on first use, read-only, kept), outside
/// the transactions that recorded them: the integrations' check of a record a handler
/// committed itself. Clones share the connection.
#[derive(Clone, Default)]
pub(crate) struct RecordProbe(
    std::sync::Arc<std::sync::Mutex<Option<(std::path::PathBuf, Connection)>>>,
);

impl RecordProbe {
    /// Whether a committed transaction recorded `id` in the database file at `path`.
    pub(crate) fn is_recorded(&self, path: &Path, id: &str) -> rusqlite::Result<bool> {
        let mut cached = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cached.as_ref().is_none_or(|(open, _)| open != path) {
            let conn = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            conn.busy_timeout(std::time::Duration::from_secs(5))?;
            *cached = Some((path.to_owned(), conn));
        }
        let Some((_, conn)) = cached.as_ref() else {
            return Ok(false);
        };
        conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM main.webhook_recorded WHERE id = ?1)")?
            .query_row([id], |row| row.get(0))
    }
}
