//! Storage: a cheap-to-clone [`Db`] handle over SQLite with typed methods. All SQL of the
//! service lives under this module.
//!
//! SQLite runs in WAL mode with a busy timeout. Writes go through one connection behind a
//! mutex (so a check-then-insert is atomic and concurrent creates resolve to one row) and
//! run as `BEGIN IMMEDIATE` transactions (so another process, e.g. the operator CLI, is
//! serialised too) on tokio's blocking pool via `spawn_blocking`. Reads use a small pool of
//! connections (see `Db::read` for where they run).

mod agencies;
mod agents;
mod call_reads;
mod calls;
mod migrations;
mod ops;
mod outbox;
mod practice;
mod real_calls;
mod resends;
mod tenants;
mod triggers;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior};

pub use agencies::{AgencyRecord, UpsertAgency};
pub use agents::{
    AgencyRef, AgentFilter, AgentLookup, AgentPage, AgentRecord, Handle, NewAgent, RegisterAgent,
};
pub use call_reads::{CallDetailRecord, CallFilter, CallRow, ListedCall, ScoredCall};
pub use calls::{GoLive, LiveCall, NewMint, Spend, ToScore};
pub use ops::TenantGauges;
pub use outbox::{AttemptLog, Backlog, Claimed, DeliveryRow, Next};
pub use practice::{AgentRef, Endpoint, MintResult, OutcomeRecord, SessionAgent};
pub use real_calls::{Candidate, NewRealCall, RealCallAgency, RealCallRecord, Rubric, Stored};
pub use resends::{ClaimedResend, ResendRefused, ResendRow};
pub use triggers::{NewTriggeredCall, TriggerAgent};
pub use tenants::{ApiKeyStatus, AuthRecord, NewTenant, TenantChange, TenantRecord};

/// How long a connection waits for a lock held by another connection or process.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How many idle read connections are kept.
const MAX_IDLE_READERS: usize = 16;

/// A storage failure (never a client mistake; those are decided before reaching here).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// SQLite reported an error.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A blocking task panicked or was cancelled.
    #[error("database task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// The database was written by a newer version of the service.
    #[error("database schema version {0} is newer than this build understands")]
    SchemaTooNew(i64),
    /// A unique constraint rejected a write (see `unique_violation`).
    #[error("unique constraint on {0:?}")]
    Unique(UniqueKey),
    /// A stored value could not be decoded.
    #[error("corrupt stored value: {0}")]
    Corrupt(String),
    /// The database file could not be created or its permissions set.
    #[error("database file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The unique keys of the schema, as reported by `unique_violation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UniqueKey {
    /// `agencies(tenant_id, platform_agency_id)`.
    AgencyPlatformId,
    /// `agents(tenant_id, platform_agent_id)`.
    AgentPlatformId,
    /// `agents(tenant_id, npn)`.
    AgentNpn,
    /// `agents(tenant_id, email_lower)`.
    AgentEmail,
    /// Any other unique key (ids, key hashes): a random collision, retried by callers.
    Other,
}

/// The single place that recognises a unique-constraint violation and names its key.
pub(crate) fn unique_violation(error: &rusqlite::Error) -> Option<UniqueKey> {
    let rusqlite::Error::SqliteFailure(failure, message) = error else {
        return None;
    };
    if failure.extended_code != rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
        && failure.extended_code != rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    {
        return None;
    }
    let message = message.as_deref().unwrap_or_default();
    let key = if message.contains("agencies.platform_agency_id") {
        UniqueKey::AgencyPlatformId
    } else if message.contains("agents.platform_agent_id") {
        UniqueKey::AgentPlatformId
    } else if message.contains("agents.npn") {
        UniqueKey::AgentNpn
    } else if message.contains("agents.email_lower") {
        UniqueKey::AgentEmail
    } else {
        UniqueKey::Other
    };
    Some(key)
}

/// Cheap-to-clone handle to the service database.
#[derive(Clone)]
pub struct Db {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

impl Inner {
    fn with_reader<T>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let pooled = self
            .readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => connect(&self.path)?,
        };
        let result = work(&conn);
        let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        if readers.len() < MAX_IDLE_READERS {
            readers.push(conn);
        }
        result
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    ///
    /// # Errors
    /// The file cannot be opened or migrated.
    pub async fn open(path: impl AsRef<Path>) -> Result<Db, DbError> {
        let path = path.as_ref().to_path_buf();
        tokio::task::spawn_blocking(move || Db::open_blocking(path)).await?
    }

    fn open_blocking(path: PathBuf) -> Result<Db, DbError> {
        restrict_to_owner(&path)?;
        let mut writer = connect(&path)?;
        enable_wal(&writer)?;
        migrations::migrate(&mut writer)?;
        // SQLite gives the -wal and -shm files the database file's mode; make sure of it for
        // files an older version created.
        for suffix in ["-wal", "-shm"] {
            let mut side = path.clone().into_os_string();
            side.push(suffix);
            if std::path::Path::new(&side).exists() {
                restrict_to_owner(std::path::Path::new(&side))?;
            }
        }
        Ok(Db {
            inner: Arc::new(Inner {
                path,
                writer: Mutex::new(writer),
                readers: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `work` on a pooled read connection. On a multi-threaded runtime the read runs
    /// in place under `block_in_place` (an indexed read takes microseconds, and skipping the
    /// hand-off to the blocking pool keeps tail latency down); elsewhere it goes through
    /// `spawn_blocking`.
    pub(crate) async fn read<T, F>(&self, work: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, DbError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let multi_thread = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
            handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        });
        if multi_thread {
            tokio::task::block_in_place(move || inner.with_reader(work))
        } else {
            tokio::task::spawn_blocking(move || inner.with_reader(work)).await?
        }
    }

    /// Runs `work` inside one `BEGIN IMMEDIATE` transaction on the single writer
    /// connection, committing when it returns `Ok`.
    pub(crate) async fn write<T, F>(&self, work: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, DbError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let mut conn = inner.writer.lock().unwrap_or_else(PoisonError::into_inner);
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = work(&tx)?;
            tx.commit()?;
            Ok(value)
        })
        .await?
    }

    /// `PRAGMA data_version` of the writer connection: a number that changes when another
    /// process (or another [`Db`] on the same file) commits, and never for this handle's own
    /// writes, which all go through that connection. The outbox watches it to take up at once
    /// what another process queued (`svc-cli sandbox trigger` and `resend`, the operator's
    /// `calls ingest-real`).
    ///
    /// # Errors
    /// Storage failure.
    pub(crate) async fn outside_commits(&self) -> Result<i64, DbError> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let conn = inner.writer.lock().unwrap_or_else(PoisonError::into_inner);
            Ok(conn.query_row("PRAGMA data_version", [], |row| row.get(0))?)
        })
        .await?
    }

    /// The HMAC key for pagination cursors, created on first use and kept in the database
    /// so cursors survive restarts.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn cursor_key(&self) -> Result<Vec<u8>, DbError> {
        self.write(|tx| {
            let existing: Option<Vec<u8>> = tx
                .query_row(
                    "SELECT value FROM service_secrets WHERE name = 'cursor_hmac'",
                    [],
                    |row| row.get(0),
                )
                .optional()?;
            if let Some(key) = existing {
                return Ok(key);
            }
            let key: [u8; 32] = rand::random();
            tx.execute(
                "INSERT INTO service_secrets (name, value) VALUES ('cursor_hmac', ?1)",
                [key.as_slice()],
            )?;
            Ok(key.to_vec())
        })
        .await
    }
}

/// Creates the database file readable and writable by its owner only (it holds every signing
/// secret in clear), or narrows an existing file to that.
fn restrict_to_owner(path: &Path) -> Result<(), DbError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let io = |source| DbError::File {
            path: path.to_path_buf(),
            source,
        };
        // Never open (and close) an existing database file here: closing any descriptor of
        // the file drops the POSIX locks this process's SQLite connections hold on it.
        if !path.exists() {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
            {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(io(e)),
                _ => {}
            }
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Switches to WAL. Changing the journal mode does not wait on the busy handler, so a
/// second process opening the same file at the same moment retries here for a while.
fn enable_wal(conn: &Connection) -> Result<(), DbError> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(failure, _))
                if failure.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return Ok(other?),
        }
    }
}

fn connect(path: &Path) -> Result<Connection, DbError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // The query planner stability guarantee: plans never depend on the values bound. Without
    // it the bundled SQLite (built with STAT4) marks statements such as the API-key lookup
    // for recompiling whenever a parameter is bound anew, so a cached statement was parsed
    // and planned again on every request (a tenth of the service's CPU time under load). Every
    // query here finds its index from literal terms, not from bound values.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::Db;

    #[tokio::test]
    async fn the_database_and_its_wal_files_are_readable_by_their_owner_only() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("secrets.db");
        let db = Db::open(&path).await.expect("open");
        db.cursor_key().await.expect("a write, so the WAL exists");
        for name in ["secrets.db", "secrets.db-wal", "secrets.db-shm"] {
            let mode = std::fs::metadata(dir.path().join(name))
                .expect(name)
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}");
        }
    }
}
