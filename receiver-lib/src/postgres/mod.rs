//! Durable PostgreSQL storage (feature `postgres`): the dedup store and the inbox of receivers
//! that run as several replicas on one database. Claims and accepts are atomic across
//! processes (row locks and unique keys, not a process-local index), inbox workers of every
//! replica share one queue (`FOR UPDATE SKIP LOCKED`), and an entry whose lease runs out (its
//! replica killed mid-entry) is handed to another.
//!
//! - [`PgPool`]: a pool of connections to one database that replaces closed connections and
//!   closes one that does not answer in time (shared with `svc-reconcile`'s PostgreSQL store).
//! - [`PgDatabase`]: the crate's tables over a [`PgPool`], brought up to date on open (versioned migrations under an advisory lock,
//!   so replicas may start at once).
//! - [`PgDedupStore`] and [`PgInbox`]: the stores, over a [`PgDatabase`].
//! - [`PgExactlyOnce`]: your [`PgEffect`] run in a transaction of your database ([`PgTx`])
//!   that also marks the event done, so that its effect happens exactly once; `SqlxPgExactlyOnce`
//!   (feature `sqlx-postgres`) the same with the transaction from your `sqlx` pool.
//!
//! The driver is `tokio-postgres` with a `deadpool-postgres` pool: async, pure Rust, and no
//! database is needed to build. Claims, completions and accepts are group-committed on the
//! client (the `batch` module): those that arrive together are one round trip (a function the
//! migration installs), one transaction and one commit, made durable by the server's own
//! settings (`synchronous_commit=on` by default), before any of their callers is answered.
//!
//! TLS to the database is not supported yet: a URL with `sslmode=require` is refused (connect
//! over a Unix socket, the loopback, or a tunnel). The password of a URL never appears in an
//! error, a log or a `Debug` output ([`redact_url`]).

mod batch;
mod database;
mod dedup;
mod effect_batch;
mod effect_tx;
mod exactly_once;
mod inbox;
mod migrate;
mod pool;
#[cfg(feature = "sqlx-postgres")]
mod sqlx;

pub use crate::postgres_url::{is_postgres_url, redact_url};
pub use database::{DEFAULT_MAX_CONNECTIONS, PgDatabase};
pub use dedup::PgDedupStore;
pub use effect_tx::PgTx;
pub use exactly_once::{PgEffect, PgExactlyOnce};
pub use inbox::PgInbox;
pub use migrate::SCHEMA_VERSION;
pub use pool::{
    AnswerWatch, DEFAULT_ANSWER_TIMEOUT, PgConn, PgPool, PgPoolError, append_options,
    connect_config,
};
#[cfg(feature = "sqlx-postgres")]
pub use sqlx::{SqlxPgEffect, SqlxPgExactlyOnce};

use crate::dedup::StorageError;

/// A driver error as a [`StorageError`], with the server's message when there is one (the
/// driver's own `Display` says only "db error").
pub(crate) fn db_error(err: &tokio_postgres::Error) -> StorageError {
    StorageError::Database(describe_error(err))
}

/// The driver error's text, with the server's message and detail when the server sent one
/// (the driver's own `Display` says only "db error"). It never holds the password.
pub fn describe_error(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{}: {} ({detail})", db.severity(), db.message()),
            None => format!("{}: {}", db.severity(), db.message()),
        },
        None => match std::error::Error::source(err) {
            Some(source) => format!("{err}: {source}"),
            None => err.to_string(),
        },
    }
}
