//! [`PgDatabase`]: a pool of connections to one PostgreSQL database, opened from a URL, with
//! the crate's tables migrated when it opens.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, Object, Pool, Runtime};
use tokio_postgres::NoTls;
use tokio_postgres::config::SslMode;

use super::{describe_error, migrate, redact_url};
use crate::dedup::StoreError;

/// Connections a [`PgDatabase`] opens at most by default. Claims, completions and accepts are
/// batched (each store's batches hold at most two at once, a batch one round trip), so a few
/// serve many concurrent requests; inbox workers and other calls take one each, and wait when
/// none is free.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// How long a request waits for a free connection before failing (the route answers 503).
const WAIT_FOR_CONNECTION: Duration = Duration::from_secs(5);

/// How long opening one connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

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
}

impl std::fmt::Debug for PgDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDatabase")
            .field("url", &self.url)
            .field("schema", &self.schema)
            .field("max_connections", &self.pool.status().max_size)
            .finish()
    }
}

impl PgDatabase {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`; a
    /// host that starts with `/`, percent-encoded, is a Unix socket directory) with at most
    /// [`DEFAULT_MAX_CONNECTIONS`], and brings the crate's tables up to date.
    ///
    /// # Errors
    /// [`StoreError::Config`] for a URL that does not parse or asks for TLS;
    /// [`StoreError::Database`] when the database cannot be reached or migrated, or was
    /// migrated by a newer `svc-receiver`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// Like [`PgDatabase::connect`], with at most `max_connections` connections (at least 1).
    ///
    /// # Errors
    /// As [`PgDatabase::connect`].
    pub async fn connect_with(url: &str, max_connections: usize) -> Result<Self, StoreError> {
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
    /// [`StoreError::Config`] for a schema name outside that form, and as
    /// [`PgDatabase::connect`].
    pub async fn connect_in_schema(
        url: &str,
        schema: &str,
        max_connections: usize,
    ) -> Result<Self, StoreError> {
        let valid = !schema.is_empty()
            && schema.len() <= 63
            && !schema.starts_with(|c: char| c.is_ascii_digit())
            && schema
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(StoreError::Config(format!(
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
    ) -> Result<Self, StoreError> {
        let user_config = connect_config(url)?;
        let redacted: Arc<str> = redact_url(url).into();
        let build = |config: tokio_postgres::Config| {
            Pool::builder(Manager::new(config, NoTls))
                .max_size(max_connections.max(1))
                .runtime(Runtime::Tokio1)
                .wait_timeout(Some(WAIT_FOR_CONNECTION))
                .create_timeout(Some(CONNECT_TIMEOUT))
                .build()
                .map_err(|err| StoreError::Config(format!("{redacted}: {err}")))
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
        };
        let mut client = database.client().await?;
        migrate::run(&mut client, schema)
            .await
            .map_err(|err| StoreError::Database(format!("migrating {}: {err}", database.url)))?;
        Ok(database)
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
    pub(crate) async fn user_client(&self) -> Result<Object, StoreError> {
        self.user_pool
            .get()
            .await
            .map_err(|err| self.pool_error(err))
    }

    /// The URL, with its password hidden.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A connection from the pool.
    pub(crate) async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|err| self.pool_error(err))
    }

    fn pool_error(&self, err: deadpool_postgres::PoolError) -> StoreError {
        match err {
            deadpool_postgres::PoolError::Backend(err) => {
                StoreError::Database(format!("{}: {}", self.url, describe_error(&err)))
            }
            other => StoreError::Database(format!("{}: {other}", self.url)),
        }
    }
}

/// Parses a connection URL (or key=value string) for `tokio-postgres`, refusing what this
/// build cannot honour: TLS (`sslmode=require`). Errors name the URL without its password.
///
/// # Errors
/// [`StoreError::Config`] when the URL does not parse or asks for TLS.
pub fn connect_config(url: &str) -> Result<tokio_postgres::Config, StoreError> {
    let config: tokio_postgres::Config = url.parse().map_err(|err: tokio_postgres::Error| {
        StoreError::Config(format!(
            "{} is not a PostgreSQL URL: {err}",
            redact_url(url)
        ))
    })?;
    match config.get_ssl_mode() {
        SslMode::Disable | SslMode::Prefer => Ok(config),
        _ => Err(StoreError::Config(format!(
            "{}: TLS to PostgreSQL is not supported yet (sslmode=require); connect over a Unix \
             socket, the loopback or a TLS tunnel, with sslmode=disable or prefer",
            redact_url(url)
        ))),
    }
}
