//! `svc-store`: the store of `svc-cli`, in one SQLite file (WAL) or, with the feature
//! `postgres`, one PostgreSQL database for receivers and runs on several machines, where
//! `reconcile` and `webhook serve` keep every scored call of the tenant, the webhook
//! deliveries received, the changes found and the runs made, so that no scored call is missing
//! whatever happened to the webhooks.
//!
//! [`Store`] is a ready [`svc_reconcile::Sink`] (it passes the conformance suite,
//! `svc_reconcile::testing`), and its [`inbox`] is `svc-receiver`'s inbox beside it. It is
//! `svc-cli`'s own, not a library for tenants: a tenant's sink is its own tables
//! (`svc-reconcile`'s README), and this crate is not published.
//!
//! # Layout
//! - `location`: what `--store` names ([`StoreLocation`]), a file or a `postgres://` URL
//!   (shown without its password).
//! - `sql`: the backend abstraction: statements in the SQL both databases accept, run with
//!   typed values; `postgres`: the PostgreSQL connection, migrations and advisory locks.
//! - `schema`: the versioned migrations ([`SCHEMA_VERSION`]).
//! - [`calls`]: scored calls (list row and detail as the service sent them), what a listing
//!   finds already stored, the change log, the listed calls whose detail failed.
//! - [`deliveries`]: the ledger of verified webhook deliveries.
//! - [`runs`]: reconcile runs and the per-source sync state (watermarks).
//! - `lock`: the lock that keeps two reconcile runs from writing at once ([`RunLock`]).
//! - `sink`: the store as a [`svc_reconcile::Sink`], each call on a blocking thread.
//! - [`inbox`]: `webhook serve`'s inbox, in the store's file or database.
//! - [`stats`] and [`export`]: what `store stats` and `store export` read; [`report_rows`]: what
//!   `store report` reads.
//!
//! # Guarantees
//! Every write is one transaction: a call is stored with its detail or not at all, and a
//! killed process leaves no half-written call. The journal is a WAL with
//! `synchronous=NORMAL`: a commit survives the process being killed (it is in the operating
//! system's hands); a power cut may lose the last commits, which the next reconcile run
//! stores again (the watermark is committed after the calls it covers, so it never gets ahead
//! of them). Several processes (a receiver and a reconcile run) may use one store at once:
//! writers wait for each other up to [`BUSY_TIMEOUT`]. In PostgreSQL the same holds across
//! machines: writers take the store's advisory write lock, and a commit is durable when the
//! server says so (`synchronous_commit`, on by default).
//!
//! A new store file is created readable and writable by its owner only (0600): it holds
//! transcripts and scores.

#![warn(missing_docs)]

pub mod calls;
pub mod deliveries;
pub mod export;
pub mod inbox;
mod location;
mod lock;
pub mod report_rows;
pub mod runs;
mod sink;
pub mod stats;

#[cfg(feature = "postgres")]
mod postgres;
mod schema;
pub(crate) mod sql;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

pub use location::{PostgresUrl, StoreLocation};
pub use lock::{RunLock, RunLockError};
pub use schema::SCHEMA_VERSION;
use sql::{Sql, SqliteSql, params};

/// How long a write waits for another process's write to finish.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the store cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store's directory does not exist.
    #[error("cannot create the store {path}: the directory {dir} does not exist")]
    MissingDirectory {
        /// The store path given.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// There is no store at the path (commands that only read never create one).
    #[error(
        "no store at {0} (`svc-cli reconcile --store` or `svc-cli webhook serve --store` creates one)"
    )]
    NotFound(StoreLocation),
    /// The file (or database) exists but is not a store.
    #[error("{path} is not a svc-cli store: {reason}")]
    NotAStore {
        /// The path given.
        path: StoreLocation,
        /// What was found instead.
        reason: String,
    },
    /// The store was written by a newer `svc-cli`.
    #[error(
        "the store {path} has schema version {found}, newer than this svc-cli knows ({known}): \
         upgrade svc-cli to use it"
    )]
    TooNew {
        /// The path given.
        path: StoreLocation,
        /// The store's schema version.
        found: u32,
        /// The newest this build knows.
        known: u32,
    },
    /// Another process held the database locked for longer than [`BUSY_TIMEOUT`].
    #[error("the store is busy: another process kept it locked for {BUSY_TIMEOUT:?}")]
    Busy,
    /// A database error.
    #[error("store: {0}")]
    Database(#[source] rusqlite::Error),
    /// A PostgreSQL error (the server's message; never the URL's password).
    #[error("store: {0}")]
    Postgres(String),
    /// The store's database cannot be reached for now: it refuses connections, does not
    /// answer, is shutting down or restarting, refused the credentials, dropped the
    /// connection, or (PostgreSQL's `disk_full`) has no space left. Trying again later can
    /// succeed (the command line exits 75).
    #[error("store: {0}")]
    Unavailable(String),
    /// A PostgreSQL URL that cannot be used (it does not parse, or asks for TLS).
    #[error("{0}")]
    Config(String),
    /// A stored value that does not read back (the file was edited by hand).
    #[error("store: {0}")]
    Corrupt(String),
    /// The run lock cannot be used (its file cannot be opened or locked).
    #[error("{0}")]
    Lock(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        match error.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                Self::Busy
            }
            _ => Self::Database(error),
        }
    }
}

impl StoreError {
    /// Whether trying again later can succeed: another process kept the store locked, its
    /// database cannot be reached for now, or its disk is full (SQLite's `SQLITE_FULL`: the
    /// write was rolled back whole, and the same write succeeds once space is freed).
    pub fn is_temporary(&self) -> bool {
        match self {
            Self::Busy | Self::Unavailable(_) => true,
            Self::Database(error) => {
                error.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
            }
            _ => false,
        }
    }

    /// Whether the problem is with what the user named (a usage error) rather than the data.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::MissingDirectory { .. }
                | Self::NotFound(_)
                | Self::NotAStore { .. }
                | Self::TooNew { .. }
                | Self::Config(_)
        )
    }
}

/// A handle on one store; cheap to clone. Methods block on the database: async code calls
/// them through [`Store::blocking`].
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    location: StoreLocation,
    backend: Backend,
}

/// The database a store is in.
enum Backend {
    Sqlite(Mutex<Connection>),
    #[cfg(feature = "postgres")]
    Postgres(postgres::PgBackend),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.inner.location)
            .finish_non_exhaustive()
    }
}

/// The first bytes of every SQLite database file.
const SQLITE_HEADER: &[u8] = b"SQLite format 3\0";

impl Store {
    /// Opens the store at `location`, creating it when there is none (a file's directory
    /// must exist), and migrating an older store in place.
    ///
    /// # Errors
    /// A missing directory, a file that is not a store, a store from a newer `svc-cli`, a
    /// database that cannot be reached, or a database error.
    pub fn open_or_create(location: impl Into<StoreLocation>) -> Result<Self, StoreError> {
        match location.into() {
            StoreLocation::File(path) => {
                check_directory(&path)?;
                Self::open_with(&path, true)
            }
            #[cfg(feature = "postgres")]
            location @ StoreLocation::Postgres(_) => Self::open_postgres(location, true),
            #[cfg(not(feature = "postgres"))]
            location @ StoreLocation::Postgres(_) => Err(no_postgres(&location)),
        }
    }

    /// Opens an existing store (migrating an older one in place); never creates one.
    ///
    /// # Errors
    /// No store at `location`, a file that is not a store, a store from a newer `svc-cli`,
    /// or a database error.
    pub fn open(location: impl Into<StoreLocation>) -> Result<Self, StoreError> {
        match location.into() {
            StoreLocation::File(path) => {
                if !path.is_file() {
                    return Err(StoreError::NotFound(StoreLocation::File(path)));
                }
                Self::open_with(&path, false)
            }
            #[cfg(feature = "postgres")]
            location @ StoreLocation::Postgres(_) => Self::open_postgres(location, false),
            #[cfg(not(feature = "postgres"))]
            location @ StoreLocation::Postgres(_) => Err(no_postgres(&location)),
        }
    }

    /// Opens the store at `location` when there is one, else an empty store in memory that is
    /// never written anywhere (what a dry run reads).
    ///
    /// # Errors
    /// As [`Store::open`], but for a missing store.
    pub fn open_or_empty(location: impl Into<StoreLocation>) -> Result<Self, StoreError> {
        let location = location.into();
        match &location {
            StoreLocation::File(path) if path.exists() => return Self::open(path.clone()),
            StoreLocation::File(path) => check_directory(path)?,
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(url) => {
                let backend = postgres::PgBackend::connect(url, "svc-cli")?;
                if backend.has_store(&location)? {
                    backend.migrate(&location, SCHEMA_VERSION)?;
                    return Ok(Self::with(location, Backend::Postgres(backend)));
                }
            }
            #[cfg(not(feature = "postgres"))]
            StoreLocation::Postgres(_) => return Err(no_postgres(&location)),
        }
        let mut conn = Connection::open_in_memory()?;
        migrate(&mut conn, &location, SCHEMA_VERSION)?;
        Ok(Self::with(location, Backend::Sqlite(Mutex::new(conn))))
    }

    fn with(location: StoreLocation, backend: Backend) -> Self {
        Self {
            inner: Arc::new(Inner { location, backend }),
        }
    }

    #[cfg(feature = "postgres")]
    fn open_postgres(location: StoreLocation, create: bool) -> Result<Self, StoreError> {
        let StoreLocation::Postgres(url) = &location else {
            return Err(StoreError::Corrupt("not a PostgreSQL store".into()));
        };
        let backend = postgres::PgBackend::connect(url, "svc-cli")?;
        if !create && !backend.has_store(&location)? {
            return Err(StoreError::NotFound(location));
        }
        backend.migrate(&location, SCHEMA_VERSION)?;
        Ok(Self::with(location, Backend::Postgres(backend)))
    }

    fn open_with(path: &Path, create: bool) -> Result<Self, StoreError> {
        let location = StoreLocation::File(path.to_path_buf());
        if create {
            create_private(path, &location)?;
        }
        check_header(path)?;
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let not_a_store = |e: rusqlite::Error| StoreError::NotAStore {
            path: location.clone(),
            reason: e.to_string(),
        };
        let mut conn = Connection::open_with_flags(path, flags).map_err(not_a_store)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Recognise the file before changing anything in it (switching to WAL rewrites the
        // header of another program's database).
        refuse_foreign(&conn, &location)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(not_a_store)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        migrate(&mut conn, &location, SCHEMA_VERSION)?;
        Ok(Self::with(location, Backend::Sqlite(Mutex::new(conn))))
    }

    /// Creates a store at `location` with only the first `version` migrations applied, as an
    /// older `svc-cli` wrote it (to test migrating in place).
    ///
    /// # Errors
    /// As [`Store::open_or_create`].
    #[doc(hidden)]
    pub fn create_at_version(
        location: impl Into<StoreLocation>,
        version: u32,
    ) -> Result<(), StoreError> {
        let location = location.into();
        match &location {
            StoreLocation::File(path) => {
                let mut conn = Connection::open(path)?;
                migrate(&mut conn, &location, version)
            }
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(url) => {
                postgres::PgBackend::connect(url, "svc-cli")?.migrate(&location, version)
            }
            #[cfg(not(feature = "postgres"))]
            StoreLocation::Postgres(_) => Err(no_postgres(&location)),
        }
    }

    /// Where the store is.
    pub fn location(&self) -> &StoreLocation {
        &self.inner.location
    }

    /// The pool of connections of a PostgreSQL store.
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres_pool(&self) -> Option<&svc_postgres::PgPool> {
        match &self.inner.backend {
            Backend::Postgres(backend) => Some(backend.pool()),
            Backend::Sqlite(_) => None,
        }
    }

    /// Runs `work` on the database, in a transaction on PostgreSQL (a consistent view);
    /// statement by statement on SQLite.
    pub(crate) fn read<T>(
        &self,
        work: impl FnOnce(&mut dyn Sql) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.inner.backend {
            Backend::Sqlite(conn) => work(&mut SqliteSql(&lock(conn))),
            #[cfg(feature = "postgres")]
            Backend::Postgres(backend) => backend.transaction(false, work),
        }
    }

    /// Runs `work` in one write transaction, committed when it succeeds: on SQLite an
    /// `IMMEDIATE` one (the file's write lock), on PostgreSQL one that takes the store's
    /// advisory write lock first. Writers follow each other either way.
    pub(crate) fn write<T>(
        &self,
        work: impl FnOnce(&mut dyn Sql) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.inner.backend {
            Backend::Sqlite(conn) => {
                let mut conn = lock(conn);
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let value = work(&mut SqliteSql(&tx))?;
                tx.commit()?;
                Ok(value)
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(backend) => backend.transaction(true, work),
        }
    }

    /// Runs `work` with the store on a blocking thread.
    ///
    /// # Errors
    /// `work`'s error.
    pub async fn blocking<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || work(&store))
            .await
            .map_err(|e| StoreError::Corrupt(format!("store task failed: {e}")))?
    }

    /// Whether the store takes a write now: a transaction that changes one row
    /// (`store_meta.ready_probe`, set to the time of the probe), which waits for the store's
    /// write lock as every write does (and, on PostgreSQL, reconnects when the server closed
    /// the connection). A real change, not an empty transaction nor a row set to what it
    /// holds: SQLite commits those without writing a page, so they succeed on a full disk
    /// where every delivery fails. What `webhook serve`'s `/readyz` probes beside the inbox.
    ///
    /// # Errors
    /// Why not: busy, the database unavailable, its disk full, or a database error.
    pub fn check_writable(&self) -> Result<(), StoreError> {
        static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        // Never the value already there, even for two probes within one clock tick.
        let probe = format!(
            "{} #{}",
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
            PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        self.write(|db| {
            db.execute(
                "INSERT INTO store_meta (key, value) VALUES ('ready_probe', $1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![probe],
            )
            .map(drop)
        })
    }

    /// The schema version of the store (after opening, always [`SCHEMA_VERSION`]).
    ///
    /// # Errors
    /// A database error.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.read(|db| {
            let row = db.query_opt(
                "SELECT value FROM store_meta WHERE key = 'schema_version'",
                &[],
            )?;
            let text = row
                .ok_or_else(|| StoreError::Corrupt("no schema version".into()))?
                .text(0)?;
            text.parse()
                .map_err(|_| StoreError::Corrupt(format!("schema version {text:?}")))
        })
    }
}

/// The error for a PostgreSQL store in a build without the feature `postgres`.
#[cfg(not(feature = "postgres"))]
fn no_postgres(location: &StoreLocation) -> StoreError {
    StoreError::Config(format!(
        "{location} is a PostgreSQL store, and this build has no PostgreSQL support \
         (svc-store's feature `postgres`)"
    ))
}

/// The SQLite connection, for one operation at a time.
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the lock leaves the connection usable: every write is a
    // transaction, rolled back when its guard dropped.
    conn.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Refuses a store path whose directory does not exist.
fn check_directory(path: &Path) -> Result<(), StoreError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if dir.is_dir() {
        Ok(())
    } else {
        Err(StoreError::MissingDirectory {
            path: path.to_path_buf(),
            dir,
        })
    }
}

/// Refuses, by reading only, an SQLite database that another program wrote: tables but no
/// `store_meta`, or a `store_meta` of another format.
fn refuse_foreign(conn: &Connection, location: &StoreLocation) -> Result<(), StoreError> {
    let foreign = |reason: String| StoreError::NotAStore {
        path: location.clone(),
        reason,
    };
    if read_version(conn)?.is_some() {
        let format: Option<String> = conn
            .query_row(
                "SELECT value FROM store_meta WHERE key = 'format'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        return match format.as_deref() {
            Some(schema::FORMAT) => Ok(()),
            _ => Err(foreign(
                "its store_meta table belongs to another program".into(),
            )),
        };
    }
    let first: Option<String> = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()?;
    match first {
        Some(table) => Err(foreign(format!(
            "it is an SQLite database of another program (it has a table {table:?})"
        ))),
        None => Ok(()),
    }
}

/// Creates the store file, when there is none, readable and writable by its owner only (0600):
/// it holds transcripts and scores. SQLite gives its `-wal` and `-shm` files the same mode.
/// An existing file keeps its mode.
fn create_private(path: &Path, location: &StoreLocation) -> Result<(), StoreError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::NotAStore {
            path: location.clone(),
            reason: format!("it cannot be created: {e}"),
        }),
    }
}

/// Refuses a non-empty file that is not an SQLite database before SQLite touches it.
fn check_header(path: &Path) -> Result<(), StoreError> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(()); // missing: created (or refused) by the open itself
    };
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(StoreError::NotAStore {
            path: path.into(),
            reason: "it is a directory".into(),
        });
    }
    let mut header = [0u8; 16];
    let read = file.read(&mut header).unwrap_or(0);
    if read == 0 || header[..read] == SQLITE_HEADER[..read] && read == SQLITE_HEADER.len() {
        return Ok(());
    }
    Err(StoreError::NotAStore {
        path: path.into(),
        reason: "it is not an SQLite database".into(),
    })
}

fn read_version(conn: &Connection) -> Result<Option<u32>, StoreError> {
    let has_meta: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store_meta')",
        [],
        |r| r.get(0),
    )?;
    if !has_meta {
        return Ok(None);
    }
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM store_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    version
        .map(|v| {
            v.parse()
                .map_err(|_| StoreError::Corrupt(format!("schema version {v:?}")))
        })
        .transpose()
}

/// Brings the store up to `target` migrations in one transaction; a second process opening at
/// the same time waits, then finds nothing left to do.
fn migrate(conn: &mut Connection, location: &StoreLocation, target: u32) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Checked again inside the transaction: another process may have created the file since.
    refuse_foreign(&tx, location)?;
    let version = match read_version(&tx)? {
        Some(version) => version,
        None => {
            tx.execute_batch(schema::META)?;
            tx.execute(
                "INSERT INTO store_meta (key, value) VALUES ('format', ?1)",
                [schema::FORMAT],
            )?;
            0
        }
    };
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: location.clone(),
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    for migration in schema::MIGRATIONS
        .iter()
        .take(target as usize)
        .skip(version as usize)
    {
        tx.execute_batch(migration)?;
    }
    if target > version {
        tx.execute(
            "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('schema_version', ?1)",
            [target.to_string()],
        )?;
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests;
