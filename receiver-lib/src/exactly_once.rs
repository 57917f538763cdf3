//! Exactly-once effects: your code's writes and the record that the event is done commit in
//! one transaction of your own database, so that a crash anywhere leaves the event either not
//! done (run again later, from scratch) or done (never run again).
//!
//! The drivers: `PgExactlyOnce` (feature `postgres`, your code gets a `PgTx`, the
//! connection's `tokio_postgres::Client` inside the transaction) and `SqliteExactlyOnce`
//! (feature `sqlite`, your code gets the `rusqlite::Connection` of the inbox's file inside a
//! transaction), and
//! `SqlxPgExactlyOnce` (feature `sqlx-postgres`, your code gets the `sqlx::PgConnection` of a
//! transaction of your own `sqlx` pool). Each
//! runs in both modes:
//! - inbox mode: pass it as the handler of the inbox workers of the inbox it was built on
//!   (`Server::with_inbox_workers`, [`crate::inbox::run_inbox_workers`]); a failure rolls your
//!   writes back and the inbox retries the event with its backoff, then sets it aside as a dead
//!   letter, as for any handler;
//! - direct mode: `svc_receiver::axum::exactly_once_route`, which records the delivery
//!   in the same transaction as your writes and answers 200 only after the commit.
//!
//! What is guaranteed, and what is not, is in the README's "Exactly once".

use std::future::Future;

use thiserror::Error;

use crate::dedup::StorageError;
use crate::handler::Received;

/// What a delivery in direct mode came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Applied {
    /// Your code ran and its writes committed with the record of the delivery.
    Done,
    /// The delivery was already recorded (done, or stored in the inbox to be done): nothing ran.
    Duplicate,
    /// Its signature is recorded under another id: a replay; nothing ran.
    Replayed,
}

/// Why a transaction with your code's writes did not commit (every write of it is rolled
/// back).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EffectError {
    /// The database failed (the transaction could not be opened, a statement of the crate's
    /// failed, or the commit did).
    #[error(transparent)]
    Store(#[from] StorageError),
    /// Your code returned an error or panicked (its text, as logged).
    #[error("webhook effect failed: {0}")]
    Effect(String),
}

impl EffectError {
    /// The text stored as an inbox entry's last error.
    pub(crate) fn into_text(self) -> String {
        match self {
            Self::Store(err) => err.to_string(),
            Self::Effect(text) => text,
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A driver of exactly-once effects (implemented by this crate's drivers only): what the
/// direct-mode route needs from it.
pub trait Transactional: sealed::Sealed + Clone + Send + Sync + 'static {
    /// Records a verified delivery and runs your code on it in one transaction: the delivery's
    /// id and signature are checked (a duplicate or a replay runs nothing), your writes and
    /// the record commit together.
    ///
    /// # Errors
    /// [`EffectError`] when nothing was committed.
    fn apply_direct(
        &self,
        received: Received,
        signature: [u8; 32],
    ) -> impl Future<Output = Result<Applied, EffectError>> + Send;
}

#[cfg(feature = "postgres")]
impl<E: crate::postgres::PgEffect> sealed::Sealed for crate::postgres::PgExactlyOnce<E> {}
#[cfg(feature = "sqlx-postgres")]
impl<E: crate::postgres::SqlxPgEffect> sealed::Sealed for crate::postgres::SqlxPgExactlyOnce<E> {}
#[cfg(feature = "sqlite")]
impl<E: crate::sqlite::SqliteEffect> sealed::Sealed for crate::sqlite::SqliteExactlyOnce<E> {}

/// Catches a panic of user code, as [`crate::handler`] does for handlers: its text.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    format!("effect panicked: {message}")
}
