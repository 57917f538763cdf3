//! [`OperatorTarget`]: the database an operator step acts on, and how it prints its result.

use std::path::PathBuf;

/// What an [`OperatorStep`](super::step::OperatorStep) acts on, and how it prints its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorTarget {
    /// The service's database file.
    pub db: PathBuf,
    /// The archive of recordings (`None`: `<db>-audio` beside the database).
    pub audio_dir: Option<PathBuf>,
    /// Print JSON on stdout rather than text.
    pub json: bool,
}

impl OperatorTarget {
    /// The database at `db`, its archive beside it, printing text.
    pub fn new(db: impl Into<PathBuf>) -> Self {
        Self {
            db: db.into(),
            audio_dir: None,
            json: false,
        }
    }
}
