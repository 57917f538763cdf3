//! The PostgreSQL connection layer that `svc-receiver`'s stores and `svc-cli`'s store
//! (`svc-store`) share: a pool whose work waits for an answer at most a timeout, connection
//! URLs checked for what this build supports, and messages that never hold a password.
//!
//! - `PgPool` (feature `pool`, on by default): a `deadpool-postgres` pool of `tokio-postgres`
//!   connections that replaces connections the server closed and closes one whose answer does
//!   not come within the answer timeout (for work awaited through `PgConn::answer_raw` or
//!   `AnswerWatch::bound`); its sessions run at `READ COMMITTED` whatever the database's
//!   default. `tokio_postgres` and `deadpool_postgres` are re-exported, so that yours match.
//! - `connect_config` and `append_options` (feature `pool`): a URL parsed for the driver, TLS
//!   refused rather than ignored (not supported yet), and session settings added.
//! - `describe_error` (feature `pool`): a driver error's text with the server's SQLSTATE.
//! - [`is_postgres_url`] and [`redact_url`] (always): telling a database URL from a file path,
//!   and writing one with its password hidden, for every message that names the database;
//!   [`DEFAULT_ANSWER_TIMEOUT`] (always), the answer timeout a pool starts with.

#![warn(missing_docs)]

/// The crate's README, whose examples are compiled as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "pool"))]
pub struct ReadmeDoctests;

#[cfg(feature = "pool")]
mod pool;
mod url;

#[cfg(feature = "pool")]
pub use {deadpool_postgres, tokio_postgres};

#[cfg(feature = "pool")]
pub use pool::{AnswerWatch, PgConn, PgPool, PgPoolError, append_options, connect_config};
pub use url::{is_postgres_url, redact_url};

/// How long a statement waits for the server's answer by default before its connection is
/// given up (`PgPool::with_answer_timeout`; `svc-store`'s locations start from it too). Always
/// built, so that a crate can name the default without the driver.
pub const DEFAULT_ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A connection URL or pool configuration this build cannot use: one that does not parse, or
/// asks for TLS. The text names the database with its password hidden.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PgConfigError(String);

impl PgConfigError {
    #[cfg_attr(not(feature = "pool"), allow(dead_code))]
    fn new(text: String) -> Self {
        Self(text)
    }
}

/// The driver error's text: the server's severity, SQLSTATE, message and detail when the server
/// sent one (the driver's own `Display` says only "db error"), else the driver's words and
/// their cause. It never holds the password.
#[cfg(feature = "pool")]
pub fn describe_error(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => {
            let head = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
            match db.detail() {
                Some(detail) => format!("{head} ({detail})"),
                None => head,
            }
        }
        None => match std::error::Error::source(err) {
            Some(source) => format!("{err}: {source}"),
            None => err.to_string(),
        },
    }
}

/// A `tokio-postgres` error whose text says what the server said (severity, SQLSTATE, message,
/// detail: [`describe_error`]) where the driver's own says only "db error". What
/// `svc_receiver`'s `PgRecorder::record` and `commit` return; a handler may use it as its own
/// error type, so that `?` on any statement logs the server's words. The driver's error is its
/// source, when there is one.
#[cfg(feature = "pool")]
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub struct PgError {
    text: String,
    #[source]
    source: Option<tokio_postgres::Error>,
}

#[cfg(feature = "pool")]
impl From<tokio_postgres::Error> for PgError {
    fn from(source: tokio_postgres::Error) -> Self {
        Self {
            text: describe_error(&source),
            source: Some(source),
        }
    }
}

#[cfg(feature = "pool")]
impl PgError {
    /// An error the driver did not raise (a check of the caller's failed), with its text.
    pub fn other(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            source: None,
        }
    }

    /// The server's SQLSTATE, when the server answered with an error.
    pub fn code(&self) -> Option<&tokio_postgres::error::SqlState> {
        self.source.as_ref()?.code()
    }

    /// Whether it is a serialization failure (40001) or a deadlock (40P01): the transaction
    /// can be run again as it was.
    pub fn is_serialization_failure(&self) -> bool {
        self.source.as_ref().is_some_and(is_serialization_failure)
    }

    /// The driver's error, when the driver raised it.
    pub fn into_inner(self) -> Option<tokio_postgres::Error> {
        self.source
    }
}

/// Whether `err` says the database cannot take the work for now rather than that a statement
/// failed: the connection is closed or cannot be made (refused, timed out, reset), the server
/// is shutting down or starting (`57P01`, `57P02`, `57P03`), has no connection slot left
/// (`53300`), refused the credentials (class `28`: a password being rotated), or its disk is
/// full (`53100`: the transaction was rolled back whole, and the same work succeeds once space
/// is freed).
#[cfg(feature = "pool")]
pub fn is_unavailable(err: &tokio_postgres::Error) -> bool {
    if err.is_closed() {
        return true;
    }
    match err.code() {
        Some(code) => {
            let code = code.code();
            code.starts_with("08") // connection exception
                || code.starts_with("28") // invalid authorization (a refused password)
                || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "53100")
        }
        // No server error: an I/O failure (refused, reset, timed out) is one.
        None => {
            let mut source = std::error::Error::source(err);
            while let Some(cause) = source {
                if cause.is::<std::io::Error>() {
                    return true;
                }
                source = cause.source();
            }
            false
        }
    }
}

/// Whether `err` is a serialization failure (`40001`) or a deadlock (`40P01`): the
/// transaction was rolled back whole, and running it again as it was may succeed.
#[cfg(feature = "pool")]
pub fn is_serialization_failure(err: &tokio_postgres::Error) -> bool {
    matches!(
        err.code().map(tokio_postgres::error::SqlState::code),
        Some("40001" | "40P01")
    )
}
