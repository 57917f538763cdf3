//! [`PgDatabase`]: a pool of connections to one PostgreSQL database, opened from a URL, with
//! the crate's tables migrated when it opens.
//!
//! The crate's statements wait for the server's answer at most the database's answer timeout
//! ([`PgDatabase::with_answer_timeout`], [`DEFAULT_ANSWER_TIMEOUT`] by default). A connection
//! whose answer does not come in time (a network that stalls, a server that hangs) is closed,
//! never handed out again, and the idle connections of the pool are closed with it (they
//! likely went through the same broken path): the next caller opens a fresh connection rather
//! than waiting on a dead one. Without this a stalled connection would hold its caller, and
//! its place in the pool, forever: TCP does not notice a peer that is silent but alive, and
//! the pool only drops connections the driver has seen closed.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, Object, Pool, Runtime};
use tokio_postgres::NoTls;
use tokio_postgres::config::SslMode;

use super::{describe_error, migrate, redact_url};
use crate::dedup::StorageError;

/// Connections a [`PgDatabase`] opens at most by default. Claims, completions and accepts are
/// batched (each store's batches hold at most two at once, a batch one round trip), so a few
/// serve many concurrent requests; inbox workers and other calls take one each, and wait when
/// none is free.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// How long a request waits for a free connection before failing (the route answers 503).
const WAIT_FOR_CONNECTION: Duration = Duration::from_secs(5);

/// How long opening one connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one of the crate's statements waits for the server's answer by default (see the
/// module docs).
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// A pool of connections to one database; cheap to clone (every clone shares the pool).
/// [`super::PgDedupStore`] and [`super::PgInbox`] are built on one.
///
/// The crate's tables and functions live in the connection's `search_path` (the database's
/// default schema, usually `public`), or in a schema of their own
/// ([`PgDatabase::connect_in_schema`]): then the crate's connections search only that schema,
/// and the transactions it opens for your code ([`super::PgExactlyOnce`]) come from a second
/// pool with the URL's own `search_path`, the crate's statements in them naming the schema.
#[derive(Clone)]
pub struct PgDatabase {
    pool: Pool,
    /// Connections for transactions handed to user code: `pool` itself, unless the crate's
    /// tables are in a schema of their own (then a pool with the URL's own `search_path`).
    user_pool: Pool,
    /// The schema of the crate's tables, when it is not the `search_path`'s.
    schema: Option<Arc<str>>,
    /// The URL with its password hidden, for messages.
    url: Arc<str>,
    /// How long a statement waits for its answer.
    answer_timeout: Duration,
}

impl std::fmt::Debug for PgDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDatabase")
            .field("url", &self.url)
            .field("schema", &self.schema)
            .field("max_connections", &self.pool.status().max_size)
            .field("answer_timeout", &self.answer_timeout)
            .finish()
    }
}

impl PgDatabase {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`; a
    /// host that starts with `/`, percent-encoded, is a Unix socket directory) with at most
    /// [`DEFAULT_MAX_CONNECTIONS`], and brings the crate's tables up to date.
    ///
    /// # Errors
    /// [`StorageError::Config`] for a URL that does not parse or asks for TLS;
    /// [`StorageError::Database`] when the database cannot be reached or migrated, or was
    /// migrated by a newer `svc-receiver`.
    pub async fn connect(url: &str) -> Result<Self, StorageError> {
        Self::connect_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// Like [`PgDatabase::connect`], with at most `max_connections` connections (at least 1).
    ///
    /// # Errors
    /// As [`PgDatabase::connect`].
    pub async fn connect_with(url: &str, max_connections: usize) -> Result<Self, StorageError> {
        Self::open(url, None, max_connections).await
    }

    /// Like [`PgDatabase::connect_with`], with the crate's tables and functions in `schema`
    /// (created if missing), so that they sit apart from your own tables in your database.
    /// `schema` is a plain lowercase identifier: ASCII letters, digits and `_`, not starting
    /// with a digit, at most 63 bytes.
    ///
    /// The crate's own connections run with `search_path` set to that schema alone; the
    /// transactions handed to your code ([`super::PgExactlyOnce`]) come from a second pool
    /// (as large) with the URL's own `search_path`, so your statements see your tables as
    /// usual, and the crate's statements in them name the schema.
    ///
    /// # Errors
    /// [`StorageError::Config`] for a schema name outside that form, and as
    /// [`PgDatabase::connect`].
    pub async fn connect_in_schema(
        url: &str,
        schema: &str,
        max_connections: usize,
    ) -> Result<Self, StorageError> {
        let valid = !schema.is_empty()
            && schema.len() <= 63
            && !schema.starts_with(|c: char| c.is_ascii_digit())
            && schema
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(StorageError::Config(format!(
                "{schema:?} is not a schema name this crate accepts: lowercase ASCII letters, \
                 digits and _, not starting with a digit, at most 63 bytes"
            )));
        }
        Self::open(url, Some(schema), max_connections).await
    }

    async fn open(
        url: &str,
        schema: Option<&str>,
        max_connections: usize,
    ) -> Result<Self, StorageError> {
        let user_config = connect_config(url)?;
        let redacted: Arc<str> = redact_url(url).into();
        let build = |config: tokio_postgres::Config| {
            Pool::builder(Manager::new(config, NoTls))
                .max_size(max_connections.max(1))
                .runtime(Runtime::Tokio1)
                .wait_timeout(Some(WAIT_FOR_CONNECTION))
                .create_timeout(Some(CONNECT_TIMEOUT))
                .build()
                .map_err(|err| StorageError::Config(format!("{redacted}: {err}")))
        };
        let (pool, user_pool) = match schema {
            None => {
                let pool = build(user_config)?;
                (pool.clone(), pool)
            }
            Some(schema) => {
                let mut config = user_config.clone();
                let options = match config.get_options() {
                    Some(options) => format!("{options} -c search_path={schema}"),
                    None => format!("-c search_path={schema}"),
                };
                config.options(options);
                (build(config)?, build(user_config)?)
            }
        };
        let database = Self {
            pool,
            user_pool,
            schema: schema.map(Arc::from),
            url: redacted,
            answer_timeout: DEFAULT_ANSWER_TIMEOUT,
        };
        let mut client = database.client().await?;
        migrate::run(&mut client, schema)
            .await
            .map_err(|err| StorageError::Database(format!("migrating {}: {err}", database.url)))?;
        Ok(database)
    }

    /// The same database, whose statements wait for the server's answer at most `timeout`
    /// (default [`DEFAULT_ANSWER_TIMEOUT`]; see the module docs). Set it before building
    /// stores on it: they keep the database they were given.
    #[must_use]
    pub fn with_answer_timeout(mut self, timeout: Duration) -> Self {
        self.answer_timeout = timeout;
        self
    }

    /// How long a statement waits for the server's answer.
    pub fn answer_timeout(&self) -> Duration {
        self.answer_timeout
    }

    /// The schema of the crate's tables when it was given ([`PgDatabase::connect_in_schema`]).
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// `name` (one of the crate's tables or functions) as statements on a connection of the
    /// user pool must write it: qualified with the crate's schema when it has one.
    pub(crate) fn qualified(&self, name: &str) -> String {
        match &self.schema {
            Some(schema) => format!("{schema}.{name}"),
            None => name.to_owned(),
        }
    }

    /// A connection for a transaction handed to user code (see [`PgDatabase::qualified`]).
    pub(crate) async fn user_client(&self) -> Result<Object, StorageError> {
        self.user_pool
            .get()
            .await
            .map_err(|err| self.pool_error(err))
    }

    /// The URL, with its password hidden.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A connection from the pool, whose statements are awaited through [`Conn::answer`].
    pub(crate) async fn client(&self) -> Result<Conn, StorageError> {
        let object = self.pool.get().await.map_err(|err| self.pool_error(err))?;
        Ok(Conn {
            object: Some(object),
            pool: self.pool.clone(),
            timeout: self.answer_timeout,
            url: Arc::clone(&self.url),
            unanswered: AtomicBool::new(false),
        })
    }

    fn pool_error(&self, err: deadpool_postgres::PoolError) -> StorageError {
        match err {
            deadpool_postgres::PoolError::Backend(err) => {
                StorageError::Database(format!("{}: {}", self.url, describe_error(&err)))
            }
            other => StorageError::Database(format!("{}: {other}", self.url)),
        }
    }
}

/// A connection of the pool, handed out by [`PgDatabase::client`]. Statements on it are
/// awaited through [`Conn::answer`]: one left unanswered past the answer timeout marks it, and
/// a marked connection is closed when dropped (with the pool's idle ones), never returned.
pub(crate) struct Conn {
    /// `Some` until dropped.
    object: Option<Object>,
    pool: Pool,
    timeout: Duration,
    url: Arc<str>,
    unanswered: AtomicBool,
}

impl std::ops::Deref for Conn {
    type Target = Object;

    fn deref(&self) -> &Object {
        match &self.object {
            Some(object) => object,
            None => unreachable!("a connection is only taken when dropped"),
        }
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Object {
        match &mut self.object {
            Some(object) => object,
            None => unreachable!("a connection is only taken when dropped"),
        }
    }
}

impl Conn {
    /// Waits for `work` (statements on this connection) at most the answer timeout, with the
    /// driver's error kept as it is (for a caller that tells transient errors apart).
    ///
    /// # Errors
    /// [`StorageError::Database`] when no answer came in time: the connection is then closed
    /// when dropped.
    pub(crate) async fn answer_raw<T>(
        &self,
        work: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<Result<T, tokio_postgres::Error>, StorageError> {
        if self.unanswered.load(Ordering::Relaxed) {
            return Err(self.unanswered_error());
        }
        match tokio::time::timeout(self.timeout, work).await {
            Ok(result) => Ok(result),
            Err(_) => {
                self.unanswered.store(true, Ordering::Relaxed);
                tracing::warn!(database = %self.url, timeout = ?self.timeout,
                    "the database did not answer in time; closing the connection");
                Err(self.unanswered_error())
            }
        }
    }

    /// Like [`Conn::answer_raw`], with a driver error as a [`StorageError`] too.
    ///
    /// # Errors
    /// [`StorageError::Database`]: the driver's error, or no answer in time.
    pub(crate) async fn answer<T>(
        &self,
        work: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, StorageError> {
        self.answer_raw(work)
            .await?
            .map_err(|err| super::db_error(&err))
    }

    fn unanswered_error(&self) -> StorageError {
        StorageError::Database(format!(
            "{}: no answer within {:?}; the connection was closed",
            self.url, self.timeout
        ))
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if !self.unanswered.load(Ordering::Relaxed) {
            return;
        }
        if let Some(object) = self.object.take() {
            // Out of the pool and dropped: its driver task is aborted, its socket closed.
            drop(Object::take(object));
        }
        // The idle ones went through the same path: let the next caller open a fresh one.
        let _ = self.pool.retain(|_, _| false);
    }
}

/// Parses a connection URL (or key=value string) for `tokio-postgres`, refusing what this
/// build cannot honour: TLS (`sslmode=require`). Errors name the URL without its password.
///
/// # Errors
/// [`StorageError::Config`] when the URL does not parse or asks for TLS.
pub fn connect_config(url: &str) -> Result<tokio_postgres::Config, StorageError> {
    let config: tokio_postgres::Config = url.parse().map_err(|err: tokio_postgres::Error| {
        StorageError::Config(format!(
            "{} is not a PostgreSQL URL: {err}",
            redact_url(url)
        ))
    })?;
    match config.get_ssl_mode() {
        SslMode::Disable | SslMode::Prefer => Ok(config),
        _ => Err(StorageError::Config(format!(
            "{}: TLS to PostgreSQL is not supported yet (sslmode=require); connect over a Unix \
             socket, the loopback or a TLS tunnel, with sslmode=disable or prefer",
            redact_url(url)
        ))),
    }
}
