//! One thread owning one SQLite connection, committing the operations queued by many
//! concurrent requests together (group commit): while one transaction is being made durable,
//! new operations queue up and all go into the next transaction, so an fsync is shared by every
//! request that waited for it. Every caller is answered only after the commit.
//!
//! Operations share the transaction without savepoints (per-operation savepoints cost about a
//! quarter of the throughput). So an operation that fails half-way leaves its earlier writes in
//! the commit: every operation here is written so that any prefix of its writes is valid on its
//! own (retention deletes, then one insert or update). Keep it so when adding one. An error that
//! aborts the whole transaction fails the commit, and then every caller gets the error.

use std::path::Path;
use std::sync::mpsc;

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::dedup::StoreError;

/// Most operations committed in one transaction.
const MAX_BATCH: usize = 512;

type Reply = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
type Job = Box<dyn FnOnce(Result<&Connection, StoreError>) -> Reply + Send>;

/// A handle to the writer thread; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    jobs: mpsc::Sender<Job>,
}

fn db_error(err: rusqlite::Error) -> StoreError {
    StoreError::Database(err.to_string())
}

impl Writer {
    /// Opens (creating if needed) the database at `path` with WAL and `synchronous=FULL`, runs
    /// `schema`, and starts the writer thread.
    pub(crate) fn open(path: &Path, schema: &str) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(db_error)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(db_error)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db_error)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(db_error)?;
        conn.execute_batch(schema).map_err(db_error)?;
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("svc-receiver-sqlite".into())
            .spawn(move || run(&conn, &queue))
            .map_err(|err| StoreError::Database(format!("cannot start writer thread: {err}")))?;
        Ok(Self { jobs })
    }

    /// Runs `op` in the next group transaction and returns its result once committed.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel::<Result<T, StoreError>>();
        let job: Job = Box::new(move |conn| {
            let outcome = conn.map(|conn| op(conn).map_err(db_error));
            Box::new(move |commit| {
                let result = match (commit, outcome) {
                    (Err(err), _) | (Ok(()), Err(err)) => Err(err),
                    (Ok(()), Ok(result)) => result,
                };
                // The caller may have gone away (request cancelled); nothing to do then.
                let _ = tx.send(result);
            })
        });
        self.jobs.send(job).map_err(|_| StoreError::Unavailable)?;
        rx.await.map_err(|_| StoreError::Unavailable)?
    }
}

fn run(conn: &Connection, queue: &mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let begin = conn.execute_batch("BEGIN IMMEDIATE").map_err(db_error);
        let execute = |job: Job| match &begin {
            Ok(()) => job(Ok(conn)),
            Err(err) => job(Err(StoreError::Database(err.to_string()))),
        };
        // Run jobs as they arrive until the queue is empty, so operations queued while earlier
        // ones ran join this transaction instead of waiting for the next one.
        let mut replies: Vec<Reply> = vec![execute(first)];
        while replies.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => replies.push(execute(job)),
                Err(_) => break,
            }
        }
        let commit = match &begin {
            Ok(()) => conn.execute_batch("COMMIT").map_err(|err| {
                let _ = conn.execute_batch("ROLLBACK");
                db_error(err)
            }),
            Err(err) => Err(StoreError::Database(err.to_string())),
        };
        for reply in replies {
            let result = match &commit {
                Ok(()) => Ok(()),
                Err(err) => Err(StoreError::Database(err.to_string())),
            };
            reply(result);
        }
    }
}

/// Rate-limits retention pruning to once a minute of store time, so it stays off the hot path.
#[derive(Debug, Default)]
pub(crate) struct Pruner {
    last: std::sync::atomic::AtomicI64,
}

impl Pruner {
    /// True (and records `now`) when the last prune was a minute or more before `now`.
    pub(crate) fn due(&self, now: i64) -> bool {
        use std::sync::atomic::Ordering;
        let last = self.last.load(Ordering::Relaxed);
        (now.saturating_sub(last) >= 60 || now < last)
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}
