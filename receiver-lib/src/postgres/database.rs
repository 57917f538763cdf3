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
#[derive(Clone)]
pub struct PgDatabase {
    pool: Pool,
    /// The URL with its password hidden, for messages.
    url: Arc<str>,
}

impl std::fmt::Debug for PgDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDatabase")
            .field("url", &self.url)
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
        let config = connect_config(url)?;
        let redacted: Arc<str> = redact_url(url).into();
        let pool = Pool::builder(Manager::new(config, NoTls))
            .max_size(max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(WAIT_FOR_CONNECTION))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|err| StoreError::Config(format!("{redacted}: {err}")))?;
        let database = Self {
            pool,
            url: redacted,
        };
        let mut client = database.client().await?;
        migrate::run(&mut client)
            .await
            .map_err(|err| StoreError::Database(format!("migrating {}: {err}", database.url)))?;
        Ok(database)
    }

    /// The URL, with its password hidden.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A connection from the pool.
    pub(crate) async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|err| match err {
            deadpool_postgres::PoolError::Backend(err) => {
                StoreError::Database(format!("{}: {}", self.url, describe_error(&err)))
            }
            other => StoreError::Database(format!("{}: {other}", self.url)),
        })
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
