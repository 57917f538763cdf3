//! One thread owning one SQLite connection, committing the operations queued by many
//! concurrent requests together (group commit): while one transaction is being made durable,
//! new operations queue up and all go into the next transaction, so an fsync is shared by every
//! request that waited for it. Every caller is answered only after the commit.
//!
//! The thread also owns an in-memory [`Index`] of the file (which ids and signatures it holds),
//! so that the hot path is one append instead of inserts into B-trees keyed by random ids: such
//! inserts dirty one page per row and index, and writing those pages out at every commit is what
//! limits a durable store (4 KiB per row and index, against about 0.6 KiB for an append). The
//! index is loaded from the file when the store opens, and again whenever the file may no longer
//! match it: after another connection (another process, or another store opened on the same
//! file) committed, which `PRAGMA data_version` tells, and after a failed operation or commit.
//!
//! WAL checkpoints (copying committed pages into the database file) run on a second thread
//! with its own connection, at most every [`CHECKPOINT_EVERY`], instead of inside a commit
//! every thousand pages as SQLite does by default: a checkpoint writes megabytes and waits for
//! an fsync, and every request of the batch would wait with it. Those checkpoints never block
//! the writer, but under sustained load they never catch up with it either, and SQLite only
//! rewinds the WAL to its start when a checkpoint did; so once the WAL passes
//! [`RESTART_WAL_FRAMES`], the writer itself, between two batches, copies what is left (little,
//! the checkpointer having copied the rest) and rewinds it. The WAL stays bounded, and commits
//! overwrite it in place, which syncs faster than growing a file.
//!
//! Operations share the transaction without savepoints (per-operation savepoints cost about a
//! quarter of the throughput). So an operation that fails half-way leaves its earlier writes in
//! the commit: every operation here is written so that any prefix of its writes is valid on its
//! own (retention deletes, then one insert or update), and updates its index only after its
//! writes succeeded. Keep it so when adding one. After an operation fails, the next one
//! reloads the index inside the transaction, so it sees exactly the writes made so far. An
//! error that rolls the whole transaction back fails every later operation of the batch and
//! the commit, and then every caller gets an error.
//!
//! The connection skips the tables' CHECK constraints (see [`Writer::open`]): an operation
//! writes a state only as a literal its statement names, one the table's CHECK admits. The
//! tests read every state written back through `PRAGMA integrity_check`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Instant;

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::StoreError;
use crate::metrics::Stopwatch;
use crate::throttle::{REPEAT_EVERY, Say, Throttle};

/// Most operations committed in one transaction.
const MAX_BATCH: usize = 512;

/// How long the checkpointer waits after a commit before copying the WAL into the file. A
/// checkpoint ends with an fsync of the database file, which the next commits' fsyncs of the
/// WAL queue behind: fewer checkpoints keep that wait out of most commits (a lower p99 at the
/// same throughput in the load bench), for a larger WAL under sustained load (it is rewound past
/// [`RESTART_WAL_FRAMES`] either way).
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a write waits for another connection's lock before failing.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long rewinding the WAL may wait for other connections' readers.
const RESTART_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// WAL size (in 4 KiB frames, 32 MiB) past which the writer rewinds it.
const RESTART_WAL_FRAMES: i64 = 8192;

/// What the writer thread keeps in memory about its file.
pub(crate) trait Index: Send + Sized + 'static {
    /// The store's name in [`crate::metrics::STORE_COMMIT_SECONDS`] (`inbox`, `dedup`).
    const STORE: &'static str;

    /// Reads the index from the file (inside a transaction).
    fn load(conn: &Connection) -> rusqlite::Result<Self>;

    /// Brings a file written in an older layout up to date, where the store's schema (run
    /// right after) cannot do it alone; runs when the store opens, before anything else.
    fn upgrade(_conn: &Connection) -> rusqlite::Result<()> {
        Ok(())
    }
}

type Reply = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// An operation: runs on the connection and index (or learns why it cannot), and says whether
/// it succeeded; it is answered through its [`Reply`] once the batch's commit is known.
type Job<I> = Box<dyn FnOnce(Result<(&Connection, &mut I), StoreError>) -> (Reply, bool) + Send>;

/// A handle to the writer thread; cheap to clone.
#[derive(Debug)]
pub(crate) struct Writer<I> {
    jobs: mpsc::Sender<Job<I>>,
}

impl<I> Clone for Writer<I> {
    fn clone(&self) -> Self {
        Self {
            jobs: self.jobs.clone(),
        }
    }
}

fn db_error(err: rusqlite::Error) -> StoreError {
    StoreError::driver(err.to_string(), err)
}

/// The file's change counter for changes committed by *other* connections.
fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))
}

/// The connection and its index, as the writer thread holds them.
struct State<I> {
    conn: Connection,
    /// `None` when the index may not match the file (a reload failed); reloaded before use.
    index: Option<I>,
    /// `data_version` when the index was last known to match the file.
    version: i64,
    checkpointer: Checkpointer,
}

impl<I: Index> State<I> {
    /// Opens the transaction of a batch and makes sure the index matches the file.
    fn begin(&mut self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(db_error)?;
        let fresh = (|| {
            let version = data_version(&self.conn)?;
            if self.index.is_none() || version != self.version {
                self.index = None;
                self.index = Some(I::load(&self.conn)?);
                self.version = version;
            }
            Ok(())
        })();
        fresh.map_err(|err| {
            let _ = self.conn.execute_batch("ROLLBACK");
            db_error(err)
        })
    }

    /// Runs one job of the batch, only inside the batch's transaction and with an index that
    /// matches the file. An error can roll the whole transaction back (disk full, I/O error):
    /// later jobs would then write in autocommit, each committing alone, without the lock and
    /// against an index that still holds the rolled-back writes; they fail instead (and so
    /// does the commit). A job that failed half-way may have updated the index for only part
    /// of its writes: the next job reloads it, inside the transaction, so it sees them all.
    fn execute(&mut self, job: Job<I>) -> Reply {
        if self.conn.is_autocommit() {
            let rolled_back = StoreError::database("the batch's transaction was rolled back");
            return job(Err(rolled_back)).0;
        }
        if self.index.is_none() {
            match I::load(&self.conn) {
                Ok(index) => self.index = Some(index),
                Err(err) => return job(Err(db_error(err))).0,
            }
        }
        let Some(index) = self.index.as_mut() else {
            return job(Err(StoreError::Unavailable)).0;
        };
        let (reply, succeeded) = job(Ok((&self.conn, index)));
        if !succeeded {
            self.index = None;
        }
        reply
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.conn.execute_batch("COMMIT").map_err(|err| {
            let _ = self.conn.execute_batch("ROLLBACK");
            // The batch's index updates were for writes that are now gone.
            self.index = None;
            db_error(err)
        })?;
        self.checkpointer.committed();
        Ok(())
    }

    /// Rewinds the WAL if the checkpointer found it too long.
    fn restart_wal_if_due(&self) {
        if self.checkpointer.restart_due.swap(false, Ordering::Relaxed) {
            // A RESTART waits for readers of the old WAL (another process's); never long, as
            // batches queue meanwhile. If it cannot finish now, the checkpointer asks again.
            let restarted = self
                .conn
                .busy_timeout(RESTART_WAIT)
                .and_then(|()| checkpoint(&self.conn, "RESTART"));
            let restored = self.conn.busy_timeout(BUSY_TIMEOUT);
            if let Err(err) = restarted.and(restored) {
                tracing::warn!(error = %err, "webhook store WAL restart failed; will retry");
            }
        }
    }
}

impl<I: Index> Writer<I> {
    /// Opens (creating if needed) the database at `path` with WAL and `synchronous=FULL`,
    /// upgrades an older layout ([`Index::upgrade`]), runs `schema`, loads the index, and starts
    /// the writer thread.
    pub(crate) fn open(path: &Path, schema: &str) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(db_error)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db_error)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db_error)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(db_error)?;
        I::upgrade(&conn).map_err(db_error)?;
        conn.execute_batch(schema).map_err(db_error)?;
        // The tables' CHECKs (a state among three names) stay for every other writer of the
        // file; this connection writes states only as the literals of its own statements and
        // skips them. SQLite evaluates `state IN (three names)` by building a temporary B-tree
        // for every row written: about 15 % of this thread's time per arrival, and this thread
        // sets the pace (see BENCHMARKS.md).
        conn.pragma_update(None, "ignore_check_constraints", true)
            .map_err(db_error)?;
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(db_error)?;
        let mut state = State::<I> {
            conn,
            index: None,
            version: 0,
            checkpointer: Checkpointer::spawn(path)?,
        };
        // Load now, so that a file that cannot be read fails the open rather than every call.
        state.begin()?;
        state.commit()?;
        let (jobs, queue) = mpsc::channel::<Job<I>>();
        std::thread::Builder::new()
            .name("svc-receiver-sqlite".into())
            .spawn(move || run(state, &queue))
            .map_err(|err| StoreError::driver(format!("cannot start writer thread: {err}"), err))?;
        Ok(Self { jobs })
    }

    /// Runs `op` in the next group transaction and returns its result once committed (timed as
    /// [`crate::metrics::STORE_COMMIT_SECONDS`], queueing included).
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection, &mut I) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let stopwatch = Stopwatch::start();
        let result = self.run_untimed(op).await;
        stopwatch.committed(I::STORE);
        result
    }

    async fn run_untimed<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection, &mut I) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel::<Result<T, StoreError>>();
        let job: Job<I> = Box::new(move |ready| {
            let outcome = ready.and_then(|(conn, index)| op(conn, index).map_err(db_error));
            let succeeded = outcome.is_ok();
            let reply: Reply = Box::new(move |commit| {
                let result = match (commit, outcome) {
                    (Err(err), _) | (Ok(()), Err(err)) => Err(err),
                    (Ok(()), Ok(result)) => Ok(result),
                };
                // The caller may have gone away (request cancelled); nothing to do then.
                let _ = tx.send(result);
            });
            (reply, succeeded)
        });
        self.jobs.send(job).map_err(|_| StoreError::Unavailable)?;
        rx.await.map_err(|_| StoreError::Unavailable)?
    }
}

/// Runs a checkpoint in `mode`; returns the WAL's length in frames.
fn checkpoint(conn: &Connection, mode: &str) -> rusqlite::Result<i64> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| r.get(1))
}

/// The writer's handle on the checkpointer thread, which stops when this is dropped.
struct Checkpointer {
    /// Tells the thread that a commit added pages to the WAL.
    commits: mpsc::SyncSender<()>,
    /// Set by the thread when the WAL has grown past [`RESTART_WAL_FRAMES`].
    restart_due: Arc<AtomicBool>,
}

impl Checkpointer {
    fn spawn(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(db_error)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db_error)?;
        // Checkpoints sync the database file before the WAL may be rewound and overwritten.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(db_error)?;
        let (commits, committed) = mpsc::sync_channel::<()>(1);
        let restart_due = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&restart_due);
        std::thread::Builder::new()
            .name("svc-receiver-checkpoint".into())
            .spawn(move || {
                // A full disk fails every checkpoint until space returns: said once a minute.
                let failing = Throttle::new(REPEAT_EVERY);
                while committed.recv().is_ok() {
                    std::thread::sleep(CHECKPOINT_EVERY);
                    // Commits made meanwhile are covered by this checkpoint.
                    while committed.try_recv().is_ok() {}
                    // PASSIVE never blocks the writer; what it cannot copy now, the next one does.
                    match checkpoint(&conn, "PASSIVE") {
                        Ok(frames) => {
                            if frames >= RESTART_WAL_FRAMES {
                                flag.store(true, Ordering::Relaxed);
                            }
                            if failing.succeeded() {
                                tracing::info!("webhook store checkpoints succeed again");
                            }
                        }
                        Err(err) => {
                            if let Say::Log { left_out } = failing.failed(Instant::now()) {
                                tracing::warn!(error = %err, left_out,
                                    "webhook store checkpoint failed; will retry \
                                     (while it fails, said once a minute)");
                            }
                        }
                    }
                }
            })
            .map_err(|err| {
                StoreError::driver(format!("cannot start checkpoint thread: {err}"), err)
            })?;
        Ok(Self {
            commits,
            restart_due,
        })
    }

    fn committed(&self) {
        // Full means a checkpoint is already coming.
        let _ = self.commits.try_send(());
    }
}

fn run<I: Index>(mut state: State<I>, queue: &mpsc::Receiver<Job<I>>) {
    while let Ok(first) = queue.recv() {
        let begin = state.begin();
        // Run jobs as they arrive until the queue is empty, so operations queued while earlier
        // ones ran join this transaction instead of waiting for the next one.
        let mut replies: Vec<Reply> = Vec::new();
        let mut next = Some(first);
        while let Some(job) = next {
            replies.push(match &begin {
                Ok(()) => state.execute(job),
                Err(err) => job(Err(err.again())).0,
            });
            next = if replies.len() < MAX_BATCH {
                queue.try_recv().ok()
            } else {
                None
            };
        }
        let commit = match begin {
            Ok(()) => state.commit(),
            Err(err) => Err(err),
        };
        for reply in replies {
            let result = match &commit {
                Ok(()) => Ok(()),
                Err(err) => Err(err.again()),
            };
            reply(result);
        }
        state.restart_wal_if_due();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the rows of the test table.
    #[derive(Debug)]
    struct Rows(i64);

    impl Index for Rows {
        const STORE: &'static str = "test";

        fn load(conn: &Connection) -> rusqlite::Result<Self> {
            conn.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
                .map(Rows)
        }
    }

    fn rows_on_disk(path: &Path) -> i64 {
        let conn = Connection::open(path).expect("open");
        conn.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .expect("count")
    }

    #[tokio::test]
    async fn after_an_error_rolls_the_batch_back_no_later_job_of_the_batch_writes() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("w.db");
        let writer =
            Writer::<Rows>::open(&path, "CREATE TABLE IF NOT EXISTS t (v BLOB)").expect("open");
        // The first job holds the writer while the other two queue into the same batch, then
        // caps the file at its current size, so the next insert fails with SQLITE_FULL, which
        // rolls the whole transaction back.
        let cap = writer.run(|conn, _| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            conn.pragma_update(None, "max_page_count", pages)
        });
        let too_big = writer.run(|conn, _| {
            conn.execute("INSERT INTO t VALUES (zeroblob(1000000))", [])
                .map(drop)
        });
        let later = writer.run(|conn, rows| {
            conn.execute("INSERT INTO t VALUES (x'00')", [])?;
            rows.0 += 1;
            Ok(rows.0)
        });
        let (cap, too_big, later) = tokio::join!(cap, too_big, later);
        assert!(too_big.is_err(), "the insert past the cap fails");
        assert!(
            later.is_err(),
            "a job after the rollback fails instead of autocommitting"
        );
        assert!(
            cap.is_err(),
            "the batch's commit fails, so nothing of it is acknowledged"
        );
        assert_eq!(rows_on_disk(&path), 0, "nothing of the batch is on disk");

        // The writer goes on, with an index that matches the file again.
        let next = writer
            .run(|conn, rows| {
                conn.pragma_update(None, "max_page_count", 1_000_000)?;
                conn.execute("INSERT INTO t VALUES (x'01')", [])?;
                rows.0 += 1;
                Ok(rows.0)
            })
            .await
            .expect("next batch");
        assert_eq!(next, 1);
        assert_eq!(rows_on_disk(&path), 1);
    }
}
