//! Durable PostgreSQL storage (feature `postgres`): the dedup store and the inbox of receivers
//! that run as several replicas on one database. Claims and accepts are atomic across
//! processes (row locks and unique keys, not a process-local index), inbox workers of every
//! replica share one queue (`FOR UPDATE SKIP LOCKED`), and an entry whose lease runs out (its
//! replica killed mid-entry) is handed to another.
//!
//! - [`PgDatabase`]: the crate's tables over a `svc_postgres::PgPool` (the connection layer
//!   shared with `svc-cli`'s PostgreSQL store), brought up to date on open (versioned
//!   migrations under an advisory lock, so replicas may start at once).
//! - [`PgDedupStore`] and [`PgInbox`]: the stores, over a [`PgDatabase`].
//! - [`PgRecorder`]: records a verified delivery in a transaction of yours, so that your
//!   writes for it commit exactly once (see [`crate::exactly_once`]).
//!
//! The driver is `tokio-postgres` with a `deadpool-postgres` pool: async, pure Rust, and no
//! database is needed to build. Claims, completions and accepts are group-committed on the
//! client (the `batch` module): those that arrive together are one round trip (a function the
//! migration installs), one transaction and one commit, made durable by the server's own
//! settings (`synchronous_commit=on` by default), before any of their callers is answered.
//!
//! TLS to the database is not supported yet: a URL with `sslmode=require` is refused (connect
//! over a Unix socket, the loopback, or a tunnel). The password of a URL never appears in an
//! error, a log or a `Debug` output (`svc_postgres::redact_url`).

mod batch;
mod database;
mod dedup;
mod inbox;
mod migrate;
mod record;

pub use database::{DEFAULT_MAX_CONNECTIONS, PgDatabase, START_WAIT};
pub use dedup::PgDedupStore;
pub use inbox::PgInbox;
pub use migrate::SCHEMA_VERSION;
pub(crate) use record::RecordProbe;
pub use record::{PgRecorder, PgTransaction};

use svc_postgres::describe_error;

use crate::StoreError;

/// A driver error as a [`StoreError`], with the server's SQLSTATE and message when there is
/// one (the driver's own `Display` says only "db error").
pub(crate) fn db_error(err: tokio_postgres::Error) -> StoreError {
    StoreError::driver(describe_error(&err), err)
}

/// Whether a `sqlx` error is a serialization failure (40001) or a deadlock (40P01): the
/// transaction was rolled back whole and can be run again as it was (feature
/// `sqlx-postgres`). `svc_postgres::PgError::is_serialization_failure` for `tokio-postgres`.
#[cfg(feature = "sqlx-postgres")]
pub fn is_serialization_failure_sqlx(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .and_then(sqlx::error::DatabaseError::code)
        .is_some_and(|code| matches!(&*code, "40001" | "40P01"))
}
