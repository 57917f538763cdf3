//! Client-side group commit for the PostgreSQL stores, as the SQLite stores' writer thread
//! does it: concurrent calls of one store are combined into one statement (a `…_many`
//! function the migration installs), so a batch costs one round trip, one transaction and one
//! WAL flush however many rows it holds.
//!
//! A [`Batcher`] starts a task on its first call (and again in the caller's runtime if the one
//! it ran in has shut down). Callers queue their row with a oneshot for
//! the answer; the task waits for a free slot ([`IN_FLIGHT`] batches run at once), takes
//! everything queued (at most [`MAX_BATCH`] rows), and runs it on a pooled connection. Nobody
//! waits for a batch to fill: a row that arrives while a slot is free runs at once, alone; rows
//! gather only while every slot is busy, which is when the database is the bottleneck.
//!
//! A batch is sorted by id (a stable sort, so the rows of one id keep their order); the
//! statement itself first takes an advisory lock per id and signature in one global order
//! (migration 3), so batches of two replicas never deadlock with each other. A deadlock with
//! another transaction or a serialization failure (the whole statement rolled back) is retried up to [`ATTEMPTS`] times
//! before the batch's callers get a [`StoreError`]. Callers are answered only after the commit.
//! A caller that goes away (its request dropped) does not disturb the batch: its row is still
//! applied and its answer dropped. The task stops when the last handle of its store is dropped.

use std::future::Future;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};

use svc_postgres::describe_error;

use super::PgDatabase;
use crate::StoreError;

/// Batches one store runs at once, each on its own pooled connection: while one waits for its
/// WAL flush, the other runs, and rows arriving meanwhile gather into the next. One leaves the
/// CPU idle during each flush; more make smaller batches, each costing the server more CPU per
/// row (measured with the load bench: `cargo bench -p svc-receiver --bench load`).
pub(super) const IN_FLIGHT: usize = 2;

/// Most rows in one batch.
pub(super) const MAX_BATCH: usize = 256;

/// Tries of a batch that deadlocks or fails to serialize before its callers get the error.
pub(super) const ATTEMPTS: u32 = 5;

/// One store's set-based statement: how to order its rows and how to run a batch of them.
pub(super) trait BatchStatement: Send + Sync + 'static {
    /// One caller's row.
    type Row: Send + Sync + 'static;

    /// Batches of this statement that run at once, each on its own pooled connection.
    const IN_FLIGHT: usize = IN_FLIGHT;

    /// The id a row is about; a batch runs in this order (rows of one id in arrival order).
    fn key(row: &Self::Row) -> &str;

    /// Runs `rows` as one statement (one transaction) on `client`, a connection of
    /// `database`; returns one answer per row, in order.
    fn run<'a>(
        database: &'a PgDatabase,
        client: &'a deadpool_postgres::Client,
        rows: &'a [&'a Self::Row],
    ) -> impl Future<Output = Result<Vec<String>, tokio_postgres::Error>> + Send + 'a;
}

/// A row waiting for its batch, with where its answer goes.
struct Job<S: BatchStatement> {
    row: S::Row,
    answer: oneshot::Sender<Result<String, StoreError>>,
}

/// Combines concurrent calls into batches (see the module docs). Dropping it (with the last
/// handle of its store) stops its task once the batches already queued are done.
pub(super) struct Batcher<S: BatchStatement> {
    database: PgDatabase,
    /// The running task's queue; `None` before the first call.
    queue: Mutex<Option<mpsc::UnboundedSender<Job<S>>>>,
}

impl<S: BatchStatement> std::fmt::Debug for Batcher<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("running", &self.queue().is_some())
            .finish_non_exhaustive()
    }
}

impl<S: BatchStatement> Batcher<S> {
    /// A batcher over `database`; its task starts on the first call.
    pub(super) fn new(database: PgDatabase) -> Self {
        Self {
            database,
            queue: Mutex::new(None),
        }
    }

    /// The running task's queue, if one runs.
    fn queue(&self) -> Option<mpsc::UnboundedSender<Job<S>>> {
        let queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.as_ref().filter(|queue| !queue.is_closed()).cloned()
    }

    /// The running task's queue, starting the task in the current runtime if none runs: on the
    /// first call, or when the runtime it ran in has shut down (the store is used from another).
    fn queue_or_start(&self) -> mpsc::UnboundedSender<Job<S>> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        match &*queue {
            Some(running) if !running.is_closed() => running.clone(),
            _ => {
                let (sender, jobs) = mpsc::unbounded_channel();
                tokio::spawn(run::<S>(self.database.clone(), jobs));
                *queue = Some(sender.clone());
                sender
            }
        }
    }

    /// Runs `row` in the next batch; its answer once the batch has committed.
    ///
    /// # Errors
    /// [`StoreError::Database`] when its batch failed (every row of it is rolled back);
    /// [`StoreError::Unavailable`] when the task stopped before answering (its runtime shut
    /// down meanwhile).
    pub(super) async fn call(&self, row: S::Row) -> Result<String, StoreError> {
        let (answer, answered) = oneshot::channel();
        self.queue_or_start()
            .send(Job { row, answer })
            .map_err(|_| StoreError::Unavailable)?;
        answered.await.map_err(|_| StoreError::Unavailable)?
    }
}

/// The batching task: until every handle is dropped, takes what is queued whenever a slot is
/// free and runs it as one batch.
async fn run<S: BatchStatement>(database: PgDatabase, mut jobs: mpsc::UnboundedReceiver<Job<S>>) {
    let slots = Arc::new(Semaphore::new(S::IN_FLIGHT));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let mut batch = Vec::new();
        if jobs.recv_many(&mut batch, MAX_BATCH).await == 0 {
            return;
        }
        let database = database.clone();
        tokio::spawn(async move {
            execute::<S>(&database, batch).await;
            drop(slot);
        });
    }
}

/// Runs one batch, retrying it on a deadlock or serialization failure, and answers each of its
/// callers.
async fn execute<S: BatchStatement>(database: &PgDatabase, mut batch: Vec<Job<S>>) {
    batch.sort_by(|a, b| S::key(&a.row).cmp(S::key(&b.row)));
    let rows: Vec<&S::Row> = batch.iter().map(|job| &job.row).collect();
    let answers = run_with_retries::<S>(database, &rows).await;
    drop(rows);
    let answers = answers.and_then(|answers| {
        if answers.len() == batch.len() {
            Ok(answers)
        } else {
            Err(StoreError::database(format!(
                "a batch of {} rows was answered with {} answers",
                batch.len(),
                answers.len()
            )))
        }
    });
    match answers {
        Ok(answers) => {
            for (job, answer) in batch.into_iter().zip(answers) {
                // A caller that went away has no use for its answer.
                let _ = job.answer.send(Ok(answer));
            }
        }
        Err(err) => {
            tracing::warn!(rows = batch.len(), error = %err, "webhook store batch failed");
            for job in batch {
                let _ = job.answer.send(Err(err.again()));
            }
        }
    }
}

/// The batch's answers, or its error (its text without the password) once it failed for good.
async fn run_with_retries<S: BatchStatement>(
    database: &PgDatabase,
    rows: &[&S::Row],
) -> Result<Vec<String>, StoreError> {
    let mut attempt = 1;
    loop {
        let client = database.client().await?;
        let ran = client.answer_raw(S::run(database, &client, rows)).await?;
        match ran {
            Ok(answers) => return Ok(answers),
            Err(err) if attempt < ATTEMPTS && svc_postgres::is_serialization_failure(&err) => {
                drop(client);
                tracing::debug!(attempt, error = %describe_error(&err), "retrying a webhook store batch");
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            Err(err) => {
                let message = describe_error(&err);
                let message = if attempt > 1 {
                    format!("{message} (after {attempt} tries)")
                } else {
                    message
                };
                return Err(StoreError::driver(message, err));
            }
        }
    }
}

/// How long to wait before try `attempt + 1`: a few milliseconds, doubling, with jitter so
/// that two replicas' batches that collided do not collide again.
fn backoff(attempt: u32) -> Duration {
    let base_ms = 2_u64 << attempt.min(6);
    let jitter = std::collections::hash_map::RandomState::new().hash_one(attempt) % base_ms;
    Duration::from_millis(base_ms + jitter)
}
