//! The store in PostgreSQL (`--store postgres://…`), for receivers and reconcile runs on
//! several machines: a pool of connections (the workspace's one PostgreSQL layer,
//! `svc_postgres::PgPool`, shared with the inbox of `webhook serve`) that the
//! store's (synchronous) methods use through [`Sql`]; the schema as PostgreSQL migrations that mirror
//! `schema`'s, version for version; and the advisory locks that take the place of SQLite's
//! file locks.
//!
//! Locks are advisory locks of the database, keyed by a class and the store's schema (what
//! `search_path` names first), so stores in several schemas of one database are independent:
//! - every write transaction takes the store's write lock first, so writers follow each other
//!   as they do on a SQLite file (reads are not blocked);
//! - migrations run under a lock of their own, so replicas that start at once apply each once;
//! - the reconcile run lock is a session lock held by a connection of its own (see `lock`):
//!   the server lets it go when that connection ends, a killed process's included.
//!
//! Every statement waits for the server's answer at most the location's answer timeout
//! ([`super::StoreLocation::with_answer_timeout`]): on a network that stalls, or a server that
//! hangs, the statement fails as unavailable and its connection is closed (its I/O task is
//! aborted, which closes the socket even with answers outstanding) with the pool's idle ones,
//! so the next transaction opens a fresh one instead of waiting on a dead one forever with
//! the connection's lock held.
//!
//! TLS to the database is not supported yet: `sslmode=require` is refused.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake};
use std::time::Duration;

use futures_util::StreamExt;
use svc_postgres::{AnswerWatch, PgConn, PgPool, PgPoolError};
use tokio_postgres::Transaction;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use super::location::PostgresUrl;
use super::schema::FORMAT;
use super::sql::{Row, Sql, Value};
use super::{SCHEMA_VERSION, StoreError, StoreLocation};

/// Advisory lock classes (the first key; the second is the store's schema).
pub(crate) const WRITE_LOCK: i32 = 0x7376_6301;
const MIGRATE_LOCK: i32 = 0x7376_6302;
pub(crate) const RUN_LOCK: i32 = 0x7376_6303;

/// The second key of the store's advisory locks: its schema.
pub(crate) const STORE_KEY: &str = "hashtext(current_schema())";

/// How long a write waits for another writer's transaction (as SQLite's busy timeout), at
/// most: half the answer timeout when that is shorter (see [`lock_timeout`]).
const LOCK_TIMEOUT: Duration = super::BUSY_TIMEOUT;

/// The server-side wait for the write lock under `answer_timeout`: [`LOCK_TIMEOUT`], or half
/// the answer timeout when that is shorter (at least a second), so that the server ends a
/// wait for the lock (as busy) before the client gives up on the connection.
fn lock_timeout(answer_timeout: Duration) -> Duration {
    LOCK_TIMEOUT
        .min(answer_timeout / 2)
        .max(Duration::from_secs(1))
}

/// Every migration, in order, as `schema::MIGRATIONS` for SQLite: same tables and columns.
const MIGRATIONS: &[&str] = &[
    // 1: calls, the webhook ledger, the change log, sync state and runs.
    "
    CREATE TABLE calls (
        id                 TEXT PRIMARY KEY,
        source             TEXT NOT NULL,
        agent_id           TEXT,
        agency_id          TEXT,
        platform_agent_id  TEXT,
        platform_agency_id TEXT,
        started_at         TEXT,
        ended_at           TEXT,
        scored_at          TEXT,
        updated_at         TEXT,
        scored_ms          BIGINT,
        listed_ms          BIGINT,
        overall_score      DOUBLE PRECISION,
        score_json         TEXT NOT NULL,
        row_json           TEXT,
        detail_json        TEXT NOT NULL,
        delivery           TEXT NOT NULL
                           CHECK (delivery IN ('webhook', 'awaiting', 'recovered', 'backfill')),
        recovered_run      BIGINT,
        recovered_at       TEXT,
        first_seen_at      TEXT NOT NULL,
        first_seen_by      TEXT NOT NULL,
        first_seen_run     BIGINT,
        refreshed_at       TEXT NOT NULL
    );
    CREATE INDEX calls_by_listing ON calls (source, listed_ms);
    CREATE INDEX calls_by_agent ON calls (agent_id);
    CREATE INDEX calls_by_agency ON calls (agency_id);
    CREATE INDEX calls_awaiting ON calls (scored_ms) WHERE delivery = 'awaiting';

    CREATE TABLE deliveries (
        webhook_id     TEXT PRIMARY KEY,
        call_id        TEXT NOT NULL,
        source         TEXT NOT NULL,
        success        INTEGER NOT NULL,
        reason         TEXT,
        reason_message TEXT,
        occurred_at    TEXT,
        verified_at    TEXT NOT NULL,
        body           TEXT NOT NULL
    );
    CREATE INDEX deliveries_by_call ON deliveries (call_id);

    CREATE TABLE score_changes (
        id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        call_id     TEXT NOT NULL,
        run_id      BIGINT,
        found_at    TEXT NOT NULL,
        before_json TEXT NOT NULL,
        after_json  TEXT NOT NULL
    );
    CREATE INDEX score_changes_by_call ON score_changes (call_id);

    CREATE TABLE sync_state (
        source          TEXT PRIMARY KEY,
        watermark       TEXT,
        last_run_id     BIGINT,
        last_run_at     TEXT,
        last_outcome    TEXT,
        last_success_at TEXT
    );

    CREATE TABLE runs (
        id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        started_at  TEXT NOT NULL,
        finished_at TEXT,
        pid         BIGINT NOT NULL,
        options     TEXT NOT NULL,
        outcome     TEXT NOT NULL CHECK (outcome IN ('running', 'ok', 'failed', 'interrupted')),
        exit_code   INTEGER,
        report      TEXT
    );
    ",
    // 2: listed calls whose detail could not be stored, retried by later runs.
    "
    CREATE TABLE call_failures (
        call_id         TEXT PRIMARY KEY,
        source          TEXT NOT NULL,
        row_json        TEXT NOT NULL,
        error           TEXT NOT NULL,
        http_status     INTEGER,
        attempts        INTEGER NOT NULL,
        first_failed_at TEXT NOT NULL,
        last_failed_at  TEXT NOT NULL,
        last_run_id     BIGINT
    );
    ",
];

/// The store's database: the workspace's one PostgreSQL connection layer
/// (`svc_postgres::PgPool`), used from the store's synchronous methods. A connection
/// the server closed (a restart, `pg_terminate_backend`, a network cut) is replaced at the
/// next transaction, so a long-running `webhook serve` keeps recording once the database is
/// back; several transactions (reads beside a write) run at once on connections of their own.
#[derive(Clone)]
pub(crate) struct PgBackend {
    pool: PgPool,
}

impl std::fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgBackend")
            .field("pool", &self.pool)
            .finish()
    }
}

/// Connections the store's pool opens at most (opened as needed: a reconcile run uses one or
/// two); when `webhook serve` shares the pool with its inbox, the inbox's requests too.
const MAX_CONNECTIONS: usize = 16;

/// A driver error as a store error: busy when a lock was waited for too long, unavailable
/// when the database cannot be reached for now.
pub(crate) fn pg_error(err: &tokio_postgres::Error) -> StoreError {
    if err
        .code()
        .is_some_and(|code| *code == tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
    {
        return StoreError::Busy;
    }
    let message = svc_postgres::describe_error(err);
    if svc_postgres::is_unavailable(err) {
        StoreError::Unavailable(message)
    } else {
        StoreError::Postgres(message)
    }
}

/// A pool error as a store error: a connection that cannot be opened is classed by its cause,
/// one that could not be had in time or went unanswered is unavailable for now.
fn pool_error(err: PgPoolError) -> StoreError {
    match err {
        PgPoolError::Connect { url, source } => match pg_error(&source) {
            StoreError::Unavailable(message) => {
                StoreError::Unavailable(format!("cannot connect to {url}: {message}"))
            }
            StoreError::Postgres(message) => {
                StoreError::Postgres(format!("cannot connect to {url}: {message}"))
            }
            other => other,
        },
        PgPoolError::Timeout { .. } | PgPoolError::Unanswered { .. } => {
            StoreError::Unavailable(err.to_string())
        }
        // The pool closed or failing itself (and any later kind).
        _ => StoreError::Postgres(err.to_string()),
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(err: tokio_postgres::Error) -> Self {
        pg_error(&err)
    }
}

/// The runtime that drives the I/O of every store connection of the process (two threads,
/// started with the first PostgreSQL store; the store's pool opens its connections on it, the
/// inbox's too when `webhook serve` shares the pool). The store's methods are synchronous:
/// they wait for their statements by parking their own thread ([`block_on`]), while this
/// runtime's threads do the I/O and run the timers. So no connection's I/O waits for the
/// parked thread, whichever thread calls (a Tokio worker of the caller's own runtime included,
/// where the SQLite store blocks in the same way), and the connections outlive any runtime of
/// the caller's.
fn driver() -> Result<&'static tokio::runtime::Runtime, StoreError> {
    static DRIVER: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("svc-store-postgres")
                .enable_all()
                .build()
                .map_err(|err| err.to_string())
        })
        .as_ref()
        .map_err(|err| StoreError::Postgres(format!("cannot start the store's I/O thread: {err}")))
}

/// Runs a future to completion on this thread, inside the [`driver`]'s context (so that the
/// pool's timers and new connections belong to it). Every wait in the store is bounded by
/// the pool (a checkout's wait, a connection's timeout, the answer timeout), so this ends.
fn block_on<F: Future>(future: F) -> Result<F::Output, StoreError> {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let _context = driver()?.enter();
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    // Outside Tokio's cooperative budget: on a thread whose task spent it, a budgeted future
    // (a semaphore, a timer) would hand its wake-up to a scheduler this parked thread stops.
    let mut future = std::pin::pin!(tokio::task::unconstrained(future));
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return Ok(output);
        }
        std::thread::park();
    }
}

impl PgBackend {
    /// A pool of connections to `url`, each named `application_name` (seen in
    /// `pg_stat_activity`). It connects at its first transaction (every caller runs one at
    /// once: a database that cannot be reached is said there).
    pub(crate) fn connect(url: &PostgresUrl, application_name: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, application_name, MAX_CONNECTIONS)
    }

    pub(crate) fn connect_with(
        url: &PostgresUrl,
        application_name: &str,
        max_connections: usize,
    ) -> Result<Self, StoreError> {
        let mut config = svc_postgres::connect_config(url.expose()).map_err(config_error)?;
        config.application_name(application_name);
        // Every statement waits for another transaction's lock at most `lock_timeout` (as
        // SQLite's busy timeout), reads as writes (and the inbox's, when `webhook serve` shares
        // the pool: an accept held that long fails, answered 503, and the sender retries).
        svc_postgres::append_options(
            &mut config,
            &format!(
                "-c lock_timeout={}",
                lock_timeout(url.answer_timeout()).as_millis()
            ),
        );
        let pool = PgPool::with_config(config, url.expose(), max_connections)
            .map_err(config_error)?
            .with_answer_timeout(url.answer_timeout())
            .on_runtime(driver()?.handle().clone());
        Ok(Self { pool })
    }

    /// The pool, to share with the inbox beside the store.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn checkout(&self) -> Result<PgConn, StoreError> {
        block_on(self.pool.get())?.map_err(pool_error)
    }

    /// Runs `work` in one transaction, committed when it succeeds; a write transaction takes
    /// the store's write lock first.
    pub(crate) fn transaction<T, F>(&self, write: bool, work: F) -> Result<T, StoreError>
    where
        F: FnOnce(&mut dyn Sql) -> Result<T, StoreError>,
    {
        let mut conn = self.checkout()?;
        // A connection that died since its last use is only seen closed once used: `BEGIN`
        // fails then, before any work, and the transaction is tried once more on a new
        // connection (the idle ones likely died with it: the server restarted).
        match attempt(&mut conn, write, work)? {
            Ok(done) => done,
            Err(work) => {
                drop(conn);
                self.pool.close_idle();
                let mut conn = self.checkout()?;
                attempt(&mut conn, write, work)?.unwrap_or_else(|_| {
                    Err(StoreError::Unavailable(format!(
                        "the connection to {} closed again at once",
                        self.pool.url()
                    )))
                })
            }
        }
    }

    /// A connection of its own, out of the pool for as long as it is held (closed when
    /// dropped): for a session lock, which ends with it.
    pub(crate) fn session(&self) -> Result<PgSession, StoreError> {
        let mut conn = self.checkout()?;
        conn.close_on_drop();
        Ok(PgSession { conn })
    }

    /// Whether the database (its current schema) holds a store; refuses a `store_meta` table
    /// of another program.
    pub(crate) fn has_store(&self, location: &StoreLocation) -> Result<bool, StoreError> {
        self.transaction(false, |db| read_version(db, location).map(|v| v.is_some()))
    }

    /// Brings the store up to `target` migrations in one transaction, under the migration
    /// lock: replicas opening at once wait for each other and find nothing left to do.
    pub(crate) fn migrate(&self, location: &StoreLocation, target: u32) -> Result<(), StoreError> {
        self.transaction(true, |db| {
            db.execute(
                &format!("SELECT pg_advisory_xact_lock($1, {STORE_KEY})"),
                &[Value::Int(i64::from(MIGRATE_LOCK))],
            )?;
            let version = match read_version(db, location)? {
                Some(version) => version,
                None => {
                    db.execute(
                        "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                        &[],
                    )?;
                    db.execute(
                        "INSERT INTO store_meta (key, value) VALUES ('format', $1)",
                        &[Value::from(FORMAT)],
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
            for migration in MIGRATIONS
                .iter()
                .take(target as usize)
                .skip(version as usize)
            {
                db.batch(migration)?;
            }
            if target > version {
                db.execute(
                    "INSERT INTO store_meta (key, value) VALUES ('schema_version', $1)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    &[Value::from(target.to_string())],
                )?;
            }
            Ok(())
        })
    }
}

/// One connection held out of the pool ([`PgBackend::session`]); closed when dropped, which
/// ends its session and lets its session locks go.
#[derive(Debug)]
pub(crate) struct PgSession {
    conn: PgConn,
}

impl PgSession {
    /// Runs `work` in one read transaction on this session's connection.
    pub(crate) fn transaction<T, F>(&mut self, work: F) -> Result<T, StoreError>
    where
        F: FnOnce(&mut dyn Sql) -> Result<T, StoreError>,
    {
        attempt(&mut self.conn, false, work)?.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "the connection holding the run lock closed".into(),
            ))
        })
    }
}

/// A statement (or `BEGIN`, `COMMIT`) that got no answer within the answer timeout: the
/// connection is given up (closed when dropped).
fn unanswered(err: PgPoolError) -> StoreError {
    StoreError::Unavailable(err.to_string())
}

/// Waits for one exchange with the server at most the answer timeout.
fn wait<T>(
    watch: &AnswerWatch,
    future: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, StoreError> {
    block_on(watch.answer_raw(future))?
        .map_err(unanswered)?
        .map_err(Into::into)
}

/// Runs `work` in one transaction on `conn`, committed when it succeeds; a write transaction
/// takes the store's write lock first, waiting at most [`lock_timeout`] for it (the session's
/// setting). `Ok(Err(work))`, untouched, when the connection turned out closed at `BEGIN`.
fn attempt<T, F>(
    conn: &mut PgConn,
    write: bool,
    work: F,
) -> Result<Result<Result<T, StoreError>, F>, StoreError>
where
    F: FnOnce(&mut dyn Sql) -> Result<T, StoreError>,
{
    let watch = conn.watch();
    let tx = match block_on(watch.answer_raw(conn.transaction()))? {
        Ok(Ok(tx)) => tx,
        Ok(Err(err)) if err.is_closed() => return Ok(Err(work)),
        Ok(Err(err)) => return Ok(Ok(Err(err.into()))),
        Err(err) => return Ok(Ok(Err(unanswered(err)))),
    };
    let run = || {
        if write {
            wait(
                &watch,
                tx.batch_execute(&format!(
                    "SELECT pg_advisory_xact_lock({WRITE_LOCK}, {STORE_KEY})"
                )),
            )?;
        }
        work(&mut PgSql {
            tx: &tx,
            watch: &watch,
        })
    };
    Ok(Ok(match run() {
        Ok(value) => wait(&watch, tx.commit()).map(|()| value),
        Err(err) => {
            // Not on a connection given up: the answer would never come either.
            if !watch.is_unanswered() {
                let _ = wait(&watch, tx.rollback());
            }
            Err(err)
        }
    }))
}

/// The store's schema version, `None` when the schema has no store.
fn read_version(db: &mut dyn Sql, location: &StoreLocation) -> Result<Option<u32>, StoreError> {
    let exists = db
        .query_one("SELECT to_regclass('store_meta') IS NOT NULL", &[])?
        .bool(0)?;
    if !exists {
        return Ok(None);
    }
    let format = db.query_opt("SELECT value FROM store_meta WHERE key = 'format'", &[])?;
    if format.map(|row| row.text(0)).transpose()?.as_deref() != Some(FORMAT) {
        return Err(StoreError::NotAStore {
            path: location.clone(),
            reason: "its store_meta table belongs to another program".into(),
        });
    }
    let version = db.query_opt(
        "SELECT value FROM store_meta WHERE key = 'schema_version'",
        &[],
    )?;
    match version {
        None => Ok(Some(0)),
        Some(row) => {
            let text = row.text(0)?;
            text.parse()
                .map(Some)
                .map_err(|_| StoreError::Corrupt(format!("schema version {text:?}")))
        }
    }
}

/// The PostgreSQL backend: a transaction the store opened, and how its statements wait.
struct PgSql<'t, 'c> {
    tx: &'t Transaction<'c>,
    watch: &'t AnswerWatch,
}

fn to_sql_params(params: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

impl Sql for PgSql<'_, '_> {
    fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        wait(self.watch, self.tx.batch_execute(sql))
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, StoreError> {
        wait(self.watch, self.tx.execute(sql, &to_sql_params(params)))
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, StoreError> {
        wait(self.watch, self.tx.query(sql, &to_sql_params(params)))?
            .iter()
            .map(row_values)
            .collect()
    }

    fn for_each(
        &mut self,
        sql: &str,
        params: &[Value],
        each: &mut dyn FnMut(Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let rows = wait(self.watch, self.tx.query_raw(sql, to_sql_params(params)))?;
        let mut rows = std::pin::pin!(rows);
        while let Some(row) = wait(self.watch, async {
            Ok::<_, tokio_postgres::Error>(rows.next().await)
        })? {
            each(row_values(&row?)?)?;
        }
        Ok(())
    }
}

/// A row's values, by column type.
fn row_values(row: &tokio_postgres::Row) -> Result<Row, StoreError> {
    (0..row.len())
        .map(|i| {
            let value = match *row.columns()[i].type_() {
                Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(Value::Int),
                Type::INT4 => row
                    .try_get::<_, Option<i32>>(i)?
                    .map(|n| Value::Int(n.into())),
                Type::INT2 => row
                    .try_get::<_, Option<i16>>(i)?
                    .map(|n| Value::Int(n.into())),
                Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?.map(Value::Real),
                Type::FLOAT4 => row
                    .try_get::<_, Option<f32>>(i)?
                    .map(|n| Value::Real(n.into())),
                Type::BOOL => row.try_get::<_, Option<bool>>(i)?.map(Value::Bool),
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                    row.try_get::<_, Option<String>>(i)?.map(Value::Text)
                }
                ref other => {
                    return Err(StoreError::Corrupt(format!(
                        "a column of type {other} in a result"
                    )));
                }
            };
            Ok(value.unwrap_or(Value::Null))
        })
        .collect::<Result<_, _>>()
        .map(Row)
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
        match (self, ty) {
            (Self::Null, _) => Ok(IsNull::Yes),
            (Self::Int(n), &Type::INT8) => n.to_sql(ty, out),
            (Self::Int(n), &Type::INT4) => i32::try_from(*n)?.to_sql(ty, out),
            (Self::Int(n), &Type::INT2) => i16::try_from(*n)?.to_sql(ty, out),
            (Self::Int(n), &Type::BOOL) => (*n != 0).to_sql(ty, out),
            (Self::Bool(b), &Type::BOOL) => b.to_sql(ty, out),
            (Self::Bool(b), &Type::INT8) => i64::from(*b).to_sql(ty, out),
            (Self::Bool(b), &Type::INT4) => i32::from(*b).to_sql(ty, out),
            (Self::Bool(b), &Type::INT2) => i16::from(*b).to_sql(ty, out),
            (Self::Real(n), &Type::FLOAT8) => n.to_sql(ty, out),
            (Self::Text(text), _) => text.as_str().to_sql(ty, out),
            (value, ty) => Err(format!("cannot send {value:?} as a {ty} parameter").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// The store's own label for a URL the pool refuses (its text, the redacted URL and why).
fn config_error(error: svc_postgres::PgConfigError) -> StoreError {
    StoreError::Config(format!("store configuration: {error}"))
}
