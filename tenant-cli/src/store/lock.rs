//! The run lock: one reconcile run writes to a store at a time. It is an operating-system
//! lock (`flock`) on `<store>.lock` beside the store, so the kernel releases it when the
//! holder exits in any way, `SIGKILL` included: a killed run never leaves a stale lock for
//! cron to trip over. The file holds the holder's process id, for the message a second run
//! prints.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often a waiting run tries the lock again.
const POLL: Duration = Duration::from_millis(100);

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another run holds it (after waiting, when asked to wait).
    #[error("another reconcile run{holder} holds the store's lock {path}")]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// " (process N)" when the holder wrote its id.
        holder: String,
    },
    /// The lock file cannot be opened or locked.
    #[error("cannot use the lock file {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A held run lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    path: PathBuf,
}

impl RunLock {
    /// The lock file of the store at `store`.
    pub fn path_for(store: &Path) -> PathBuf {
        let mut name = store.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Takes the lock of the store at `store`, waiting up to `wait` for another run to end.
    ///
    /// # Errors
    /// [`LockError::Busy`] when another run still holds it; [`LockError::Io`] when the lock
    /// file cannot be used.
    pub async fn acquire(store: &Path, wait: Duration) -> Result<Self, LockError> {
        let path = Self::path_for(store);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    tokio::time::sleep(POLL).await;
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(LockError::Busy {
                        holder: holder(&mut file),
                        path,
                    });
                }
                Err(TryLockError::Error(source)) => return Err(io(source)),
            }
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(Self { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.rewind().and_then(|()| file.read_to_string(&mut text));
    match text.trim().parse::<u32>() {
        Ok(pid) => format!(" (process {pid})"),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = dir.path().join("calls.db");
        let first = RunLock::acquire(&store, Duration::ZERO)
            .await
            .expect("first");
        let second = RunLock::acquire(&store, Duration::from_millis(250)).await;
        match second {
            Err(LockError::Busy { holder, .. }) => {
                assert_eq!(holder, format!(" (process {})", std::process::id()));
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        drop(first);
        RunLock::acquire(&store, Duration::ZERO)
            .await
            .expect("free again once dropped");
    }
}
