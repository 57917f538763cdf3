//! [`StoreError`]: why a durable store of the crate (the dedup store, the inbox, the database
//! they live in) could not answer. Integrations answer 503, so the sender retries.

use thiserror::Error;

/// A store failure. Integrations answer 503 so the sender retries.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database reported an error.
    #[error("webhook store database error: {0}")]
    Database(String),
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

#[cfg(feature = "postgres")]
impl From<svc_postgres::PgConfigError> for StoreError {
    fn from(err: svc_postgres::PgConfigError) -> Self {
        Self::Config(err.to_string())
    }
}

#[cfg(feature = "postgres")]
impl From<svc_postgres::PgPoolError> for StoreError {
    fn from(err: svc_postgres::PgPoolError) -> Self {
        Self::Database(err.to_string())
    }
}
