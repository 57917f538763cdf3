//! The run lock: one reconcile run writes to a store at a time. For a store file it is an
//! operating-system lock (`flock`) on `<store>.lock` beside the store, so the kernel releases
//! it when the holder exits in any way, `SIGKILL` included: a killed run never leaves a stale
//! lock for cron to trip over. The file holds the holder's process id, for the message a
//! second run prints. For a PostgreSQL store it is a session advisory lock of the store's
//! database, held by a connection of its own, so runs on different machines exclude each
//! other too; the server releases it when that connection ends, a killed run's included. The
//! connection's `application_name` names the holder's host and process id.
//!
//! The lock file is never opened through a symbolic link (`O_NOFOLLOW`) nor when it has other
//! hard links: someone able to plant one beside the store could otherwise have the run
//! truncate and write the file it points at.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::StoreLocation;
#[cfg(feature = "postgres")]
use super::postgres::{PgBackend, PgSession, RUN_LOCK, STORE_KEY};
#[cfg(feature = "postgres")]
use super::sql::{Value, params};

/// How often a waiting run tries the lock again.
const POLL: Duration = Duration::from_millis(100);

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunLockError {
    /// Another run holds it (after waiting, when asked to wait).
    #[error("another reconcile run{holder} holds the store's lock {path}")]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// " (process N)" when the holder wrote its id.
        holder: String,
    },
    /// Another run holds the lock of a PostgreSQL store.
    #[error("another reconcile run{holder} holds the lock of the store {location}")]
    BusyElsewhere {
        /// The store.
        location: StoreLocation,
        /// " (svc-cli reconcile on host H, process N)" when the holder is seen.
        holder: String,
    },
    /// The lock of a PostgreSQL store cannot be taken (the database cannot be reached).
    #[error("cannot take the lock of the store {location}: {source}")]
    Database {
        /// The store.
        location: StoreLocation,
        /// The cause.
        #[source]
        source: super::StoreError,
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
pub struct RunLock(Held);

/// What holds a run lock.
#[derive(Debug)]
enum Held {
    /// The `flock` of a store file's lock file.
    File(FileLock),
    /// The advisory lock of a PostgreSQL store, held by this connection's session (closing
    /// it lets the lock go).
    #[cfg(feature = "postgres")]
    Postgres { _session: Box<PgSession> },
}

impl RunLock {
    /// The lock file, for a store file's lock.
    pub fn file(&self) -> Option<&Path> {
        match &self.0 {
            Held::File(lock) => Some(lock.path()),
            #[cfg(feature = "postgres")]
            Held::Postgres { .. } => None,
        }
    }
}

impl RunLockError {
    /// Whether another run holds the lock (as opposed to the lock being unusable).
    pub fn is_busy(&self) -> bool {
        matches!(self, Self::Busy { .. } | Self::BusyElsewhere { .. })
    }
}

impl RunLock {
    /// Takes the run lock of the store at `location`, waiting up to `wait` for another run to
    /// end.
    ///
    /// # Errors
    /// [`RunLockError::Busy`] or [`RunLockError::BusyElsewhere`] when another run still holds it;
    /// [`RunLockError::Io`] or [`RunLockError::Database`] when the lock cannot be used.
    pub async fn acquire(location: &StoreLocation, wait: Duration) -> Result<Self, RunLockError> {
        match location {
            StoreLocation::File(path) => FileLock::acquire(path, wait)
                .await
                .map(|lock| Self(Held::File(lock))),
            #[cfg(not(feature = "postgres"))]
            StoreLocation::Postgres(_) => Err(RunLockError::Database {
                location: location.clone(),
                source: super::no_postgres(location),
            }),
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(url) => {
                let url = url.clone();
                let location = location.clone();
                let database = |source| RunLockError::Database {
                    location: location.clone(),
                    source,
                };
                let name = format!(
                    "svc-cli reconcile on host {}, process {}",
                    hostname(),
                    std::process::id()
                );
                // A session of its own (a pool of one, never shared): the lock ends with it.
                let mut session = tokio::task::spawn_blocking(move || {
                    PgBackend::connect_with(&url, &name, 1)?.session()
                })
                .await
                .map_err(|e| database(super::StoreError::Postgres(e.to_string())))?
                .map_err(database)?;
                let deadline = Instant::now() + wait;
                loop {
                    let taken = session
                        .transaction(|db| {
                            db.query_one(
                                &format!("SELECT pg_try_advisory_lock($1, {STORE_KEY})"),
                                params![i64::from(RUN_LOCK)],
                            )?
                            .bool(0)
                        })
                        .map_err(database)?;
                    if taken {
                        return Ok(Self(Held::Postgres {
                            _session: Box::new(session),
                        }));
                    }
                    if Instant::now() >= deadline {
                        return Err(RunLockError::BusyElsewhere {
                            holder: pg_holder(&mut session),
                            location,
                        });
                    }
                    tokio::time::sleep(POLL).await;
                }
            }
        }
    }
}

/// " (svc-cli reconcile on host H, process N)": the `application_name` of the connection
/// holding the run lock, when it can be seen.
#[cfg(feature = "postgres")]
fn pg_holder(session: &mut PgSession) -> String {
    let name = session.transaction(|db| {
        let sql = format!(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND l.classid::bigint = $1
               AND l.objid::bigint = ({STORE_KEY}::bigint & 4294967295)"
        );
        db.query_opt(&sql, &[Value::Int(i64::from(RUN_LOCK))])?
            .map(|row| row.text(0))
            .transpose()
    });
    match name {
        Ok(Some(name)) if !name.is_empty() => format!(" ({name})"),
        _ => String::new(),
    }
}

/// This machine's name, for the holder's `application_name`.
#[cfg(feature = "postgres")]
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The `flock` of a store file's lock file.
#[derive(Debug)]
pub(crate) struct FileLock {
    _file: File,
    path: PathBuf,
}

impl FileLock {
    /// The lock file of the store at `store`.
    pub(crate) fn path_for(store: &Path) -> PathBuf {
        let mut name = store.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Takes the lock of the store at `store`, waiting up to `wait` for another run to end.
    ///
    /// # Errors
    /// [`RunLockError::Busy`] when another run still holds it; [`RunLockError::Io`] when the lock
    /// file cannot be used.
    pub(crate) async fn acquire(store: &Path, wait: Duration) -> Result<Self, RunLockError> {
        let path = Self::path_for(store);
        let io = |source| RunLockError::Io {
            path: path.clone(),
            source,
        };
        let mut file = open_lock_file(&path).map_err(io)?;
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    tokio::time::sleep(POLL).await;
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(RunLockError::Busy {
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
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Opens (or creates) the lock file at `path`, refusing a symbolic link there (never followed)
/// and a file with other hard links.
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW).mode(0o600);
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return std::io::Error::new(
                e.kind(),
                "it is a symbolic link, which is never followed: remove it",
            );
        }
        e
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata()?;
        if !meta.is_file() || meta.nlink() > 1 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "it is not a plain file of its own (another hard link, or not a file): remove it",
            ));
        }
    }
    Ok(file)
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
        let first = FileLock::acquire(&store, Duration::ZERO)
            .await
            .expect("first");
        let second = FileLock::acquire(&store, Duration::from_millis(250)).await;
        match second {
            Err(RunLockError::Busy { holder, .. }) => {
                assert_eq!(holder, format!(" (process {})", std::process::id()));
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        drop(first);
        FileLock::acquire(&store, Duration::ZERO)
            .await
            .expect("free again once dropped");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_link_at_the_lock_path_is_refused_and_its_target_left_untouched() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = dir.path().join("calls.db");
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "precious\n").expect("victim");
        std::os::unix::fs::symlink(&victim, FileLock::path_for(&store)).expect("symlink");
        match FileLock::acquire(&store, Duration::ZERO).await {
            Err(RunLockError::Io { source, .. }) => {
                assert!(source.to_string().contains("symbolic link"), "{source}");
            }
            other => panic!("expected Io, got {other:?}"),
        }
        std::fs::remove_file(FileLock::path_for(&store)).expect("remove the link");
        std::fs::hard_link(&victim, FileLock::path_for(&store)).expect("hard link");
        assert!(matches!(
            FileLock::acquire(&store, Duration::ZERO).await,
            Err(RunLockError::Io { .. })
        ));
        assert_eq!(
            std::fs::read_to_string(&victim).expect("victim"),
            "precious\n",
            "the link's target is neither truncated nor written"
        );
    }
}
