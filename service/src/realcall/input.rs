//! The ingest file as the operator hands it to `calls ingest-real`: read whole before any
//! record is looked at, so that a file that cannot be read stores nothing.
//!
//! - Only a regular file (symlinks followed) is read: a FIFO, a device (`/dev/zero`, which
//!   never ends), a socket or a directory is refused before anything is read from it, since a
//!   FIFO with no writer blocks forever and a device may never end. A pipe is read as stdin
//!   (`--file -`).
//! - At most [`MAX_FILE_BYTES`] (128 MiB, about 10 000 records with long transcripts) are
//!   read, from a file or from stdin: a larger input is refused, nothing stored. Split larger
//!   exports (JSON lines split at any line, e.g. `split -l 10000`).
//! - The text must be UTF-8 (a byte-order mark at its start is skipped by
//!   [`super::ingest::read_records`]).

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The largest ingest file (or stdin) read: 128 MiB.
pub const MAX_FILE_BYTES: u64 = 128 * 1024 * 1024;

/// Why the ingest input could not be read (nothing was ingested).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file cannot be opened or read.
    #[error("cannot read {what}: {source}")]
    Io {
        /// The file, or stdin.
        what: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The path is not a regular file.
    #[error(
        "{path} is not a regular file (it is {kind}): give a file, or `--file -` to read a pipe from stdin"
    )]
    NotRegular {
        /// The path given.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The input is larger than [`MAX_FILE_BYTES`].
    #[error(
        "{what} is larger than {} MiB, the most one ingestion reads: split it (JSON lines split at any line) and ingest each part; nothing was ingested",
        MAX_FILE_BYTES / (1024 * 1024)
    )]
    TooLarge {
        /// The file, or stdin.
        what: String,
    },
    /// The input is not UTF-8 text.
    #[error("{what} is not UTF-8 text: {source}")]
    NotUtf8 {
        /// The file, or stdin.
        what: String,
        /// Where it stops being UTF-8.
        #[source]
        source: std::string::FromUtf8Error,
    },
}

/// Reads the ingest file at `path`: a regular file of at most [`MAX_FILE_BYTES`] of UTF-8.
///
/// # Errors
/// [`InputError::NotRegular`] before anything is opened when the path is not a regular file,
/// [`InputError::TooLarge`] when it holds more than [`MAX_FILE_BYTES`] (by its size, before
/// reading, or as read when it grew), [`InputError::Io`] or [`InputError::NotUtf8`].
pub fn read_file(path: &Path) -> Result<String, InputError> {
    let what = path.display().to_string();
    let io = |source| InputError::Io {
        what: what.clone(),
        source,
    };
    // By its metadata first: opening a FIFO without a writer would block.
    let metadata = std::fs::metadata(path).map_err(io)?;
    regular(path, &metadata)?;
    if metadata.len() > MAX_FILE_BYTES {
        return Err(InputError::TooLarge { what });
    }
    // (A FIFO swapped in for the file right now would still block this open: only someone
    // who can write the operator's directory could do it.)
    let file = File::open(path).map_err(io)?;
    // What was opened, in case the path changed in between.
    regular(path, &file.metadata().map_err(io)?)?;
    read_capped(file, what)
}

/// Reads stdin (`--file -`), at most [`MAX_FILE_BYTES`] of UTF-8.
///
/// # Errors
/// [`InputError::TooLarge`], [`InputError::Io`] or [`InputError::NotUtf8`].
pub fn read_stdin() -> Result<String, InputError> {
    read_capped(io::stdin().lock(), "stdin".to_owned())
}

/// Reads `input` to its end, refusing it past [`MAX_FILE_BYTES`] (one byte more is read to
/// know).
fn read_capped(input: impl Read, what: String) -> Result<String, InputError> {
    let mut bytes = Vec::new();
    input
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| InputError::Io {
            what: what.clone(),
            source,
        })?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(InputError::TooLarge { what });
    }
    String::from_utf8(bytes).map_err(|source| InputError::NotUtf8 { what, source })
}

/// Refuses anything but a regular file, naming what it is.
fn regular(path: &Path, metadata: &std::fs::Metadata) -> Result<(), InputError> {
    if metadata.is_file() {
        return Ok(());
    }
    let kind = file_kind(metadata);
    Err(InputError::NotRegular {
        path: path.to_path_buf(),
        kind,
    })
}

#[cfg(unix)]
fn file_kind(metadata: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let kind = metadata.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

#[cfg(not(unix))]
fn file_kind(metadata: &std::fs::Metadata) -> &'static str {
    if metadata.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_cap_is_refused_by_its_size_before_it_is_read() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("huge.jsonl");
        // Sparse: no disk used, and nothing would be read.
        File::create(&path)
            .and_then(|f| f.set_len(MAX_FILE_BYTES + 1))
            .expect("sparse file");
        let error = read_file(&path).expect_err("over the cap");
        assert!(matches!(error, InputError::TooLarge { .. }), "{error}");
        assert!(error.to_string().contains("128 MiB"), "{error}");
    }

    #[test]
    fn input_over_the_cap_is_refused_as_it_is_read() {
        let error = read_capped(io::repeat(b' '), "stdin".into()).expect_err("endless");
        assert!(matches!(error, InputError::TooLarge { .. }), "{error}");
        let exact = read_capped(io::repeat(b' ').take(MAX_FILE_BYTES), "stdin".into());
        assert_eq!(exact.expect("at the cap").len() as u64, MAX_FILE_BYTES);
    }

    #[test]
    fn a_directory_or_a_device_is_not_a_regular_file() {
        let dir = tempfile::tempdir().expect("dir");
        let error = read_file(dir.path()).expect_err("a directory");
        assert!(error.to_string().contains("a directory"), "{error}");
        if Path::new("/dev/zero").exists() {
            let error = read_file(Path::new("/dev/zero")).expect_err("a device");
            assert!(error.to_string().contains("a device"), "{error}");
        }
    }

    #[test]
    fn text_that_is_not_utf8_is_refused() {
        let error = read_capped(&b"{\"a\": \"\xff\"}"[..], "stdin".into()).expect_err("latin-1");
        assert!(matches!(error, InputError::NotUtf8 { .. }), "{error}");
    }
}
