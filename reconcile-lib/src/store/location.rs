//! Where a store is: a SQLite file (the embedded default) or a PostgreSQL database
//! (`postgres://…`), as `--store` names it. Shown everywhere with a URL's password hidden.

use std::path::{Path, PathBuf};

use svc_receiver::postgres_url::{is_postgres_url, redact_url};

/// A store's location, parsed from `--store` (or `SVC_STORE`).
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL database, shared by receivers and reconcile runs on several machines.
    Postgres(PostgresUrl),
}

/// A PostgreSQL URL; its `Debug` and `Display` hide the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl(String);

impl PostgresUrl {
    /// The URL itself, password included: only for connecting.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact_url(&self.0))
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
            Self::Postgres(PostgresUrl(text.to_owned()))
        } else {
            Self::File(PathBuf::from(text))
        })
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
