//! Where a store is: a SQLite file (the embedded default) or a PostgreSQL database
//! (`postgres://…`), as `--store` names it. Shown everywhere with a URL's password hidden.

use std::path::{Path, PathBuf};
use std::time::Duration;

use svc_postgres::{DEFAULT_ANSWER_TIMEOUT, is_postgres_url, redact_url};

/// A store's location, parsed from `--store` (or `SVC_STORE`).
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL database, shared by receivers and reconcile runs on several machines.
    Postgres(PostgresUrl),
}

/// A PostgreSQL URL, and how long a statement may wait for the server's answer; its `Debug`
/// and `Display` hide the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl {
    url: String,
    answer_timeout: Duration,
}

impl PostgresUrl {
    /// The URL itself, password included: only for connecting.
    pub fn expose(&self) -> &str {
        &self.url
    }

    /// How long one statement may wait for the server's answer before its connection is
    /// given up ([`StoreLocation::with_answer_timeout`]).
    pub fn answer_timeout(&self) -> Duration {
        self.answer_timeout
    }
}

impl std::fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact_url(&self.url))
    }
}

impl std::fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PostgresUrl({self})")
    }
}

impl StoreLocation {
    /// Reads `--store`: a `postgres://` or `postgresql://` URL, else a file path. Never fails
    /// (a URL is checked when the store is opened), so it serves as a clap value parser.
    ///
    /// # Errors
    /// None; the `Result` is what clap's value parsers return.
    pub fn parse(text: &str) -> Result<Self, std::convert::Infallible> {
        Ok(if is_postgres_url(text) {
            Self::Postgres(PostgresUrl {
                url: text.to_owned(),
                answer_timeout: DEFAULT_ANSWER_TIMEOUT,
            })
        } else {
            Self::File(PathBuf::from(text))
        })
    }

    /// The same location, whose database (PostgreSQL) may leave one statement unanswered for
    /// at most `timeout` (default [`svc_postgres::DEFAULT_ANSWER_TIMEOUT`]): past it, on a network that
    /// stalls or a server that hangs, the statement fails as unavailable and its connection
    /// is closed, never used again, so the next one is made on a fresh connection. A file
    /// store has no such wait (its locks have their own timeout), and is returned unchanged.
    ///
    /// Writers of a PostgreSQL store wait for each other's write lock up to
    /// [`super::BUSY_TIMEOUT`], or half of `timeout` when that is shorter, so that the server
    /// ends a wait for the lock before the client gives up on the connection.
    #[must_use]
    pub fn with_answer_timeout(self, timeout: Duration) -> Self {
        match self {
            Self::Postgres(url) => Self::Postgres(PostgresUrl {
                answer_timeout: timeout,
                ..url
            }),
            file => file,
        }
    }

    /// The file, for a SQLite store.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Self::File(path) => Some(path),
            Self::Postgres(_) => None,
        }
    }
}

impl std::fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) => write!(f, "{url}"),
        }
    }
}

impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Postgres(url) => f.debug_tuple("Postgres").field(url).finish(),
        }
    }
}

impl From<PathBuf> for StoreLocation {
    fn from(path: PathBuf) -> Self {
        Self::File(path)
    }
}

impl From<&PathBuf> for StoreLocation {
    fn from(path: &PathBuf) -> Self {
        Self::File(path.clone())
    }
}

impl From<&Path> for StoreLocation {
    fn from(path: &Path) -> Self {
        Self::File(path.to_path_buf())
    }
}
