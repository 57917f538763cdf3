//! [`StoreError`]: why a durable store of the crate (the dedup store, the inbox, the database
//! they live in) could not answer. Integrations answer 503, so the sender retries.

use std::sync::Arc;

use thiserror::Error;

/// A store failure. Integrations answer 503 so the sender retries.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database reported an error: what it said (on PostgreSQL with the server's SQLSTATE
    /// and message), and the driver's error when there is one.
    #[error("webhook store database error: {message}")]
    Database {
        /// What failed, without any password: the driver's error in full, so it is not also
        /// a `source` (a log of the chain would say it twice).
        message: String,
        /// The driver's error (`rusqlite::Error`, `tokio_postgres::Error`), to tell causes
        /// apart by their codes rather than by their words ([`StoreError::driver_error`]).
        driver: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The store cannot be opened as configured (a database URL that does not parse, or asks
    /// for what this build does not support, such as TLS to PostgreSQL).
    #[error("webhook store configuration: {0}")]
    Config(String),
    /// The store's writer has stopped (the store was shut down or its thread died).
    #[error("webhook store is unavailable")]
    Unavailable,
    /// A store of your own failed (a [`crate::dedup::DedupStore`] over another database, say); the cause is
    /// kept as the error's source.
    #[error("webhook store failed")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    /// The driver's error behind a [`StoreError::Database`], when there is one: downcast it
    /// (to `rusqlite::Error`, `tokio_postgres::Error`, `svc_postgres::PgPoolError`) to tell
    /// causes apart by their codes.
    pub fn driver_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self {
            Self::Database { driver, .. } => driver.as_deref(),
            _ => None,
        }
    }

    /// A database error with no driver error behind it.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn database(message: impl Into<String>) -> Self {
        Self::Database {
            message: message.into(),
            driver: None,
        }
    }

    /// A database error raised by the driver.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn driver(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Database {
            message: message.into(),
            driver: Some(Arc::new(source)),
        }
    }

    /// The same error again, for each caller of a batch that failed whole (its message once,
    /// not wrapped in a second "webhook store database error").
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn again(&self) -> Self {
        match self {
            Self::Database { message, driver } => Self::Database {
                message: message.clone(),
                driver: driver.clone(),
            },
            Self::Unavailable => Self::Unavailable,
            Self::Config(message) => Self::Config(message.clone()),
            other => Self::database(other.to_string()),
        }
    }
}

#[cfg(feature = "postgres")]
impl From<svc_postgres::PgConfigError> for StoreError {
    fn from(err: svc_postgres::PgConfigError) -> Self {
        Self::Config(err.to_string())
    }
}

#[cfg(feature = "postgres")]
impl From<svc_postgres::PgPoolError> for StoreError {
    fn from(err: svc_postgres::PgPoolError) -> Self {
        Self::driver(err.to_string(), err)
    }
}
