//! Group commit of exactly-once direct-mode deliveries on PostgreSQL (issue 24's benchmark
//! target): the deliveries that wait together share one transaction of the tenant's database
//! and one commit (one WAL flush) before any of them is answered. Both drivers ([`super::PgExactlyOnce`] and, with the feature
//! `sqlx-postgres`, `SqlxPgExactlyOnce`) run their direct mode through it.
//!
//! A [`Gatherer`] starts a task on its first call (and again in the caller's runtime if the one
//! it ran in has shut down). As in the `batch` module, nobody waits for a batch to fill: the
//! task waits for a free slot ([`IN_FLIGHT`] batches run at once, each on its own connection),
//! takes what is queued (at most [`MAX_BATCH`] deliveries) and runs it. Deliveries gather only
//! while every slot is busy, which is when the database is the bottleneck.
//!
//! One batch, in one transaction (see [`BatchRunner`] for what a driver does):
//! 1. the advisory locks of every id and signature of the batch, in one global order (the
//!    ones inbox accepts and other batches take, so batches of any replicas never wait for
//!    each other in a cycle);
//! 2. each delivery classified by what is already recorded: a duplicate (its signature is
//!    remembered with the batch, nothing runs), a replay (nothing runs), or fresh;
//! 3. each fresh delivery's effect, in arrival order (or, with `effects_at_once`, all at once),
//!    with no savepoint; when one fails (an `Err`, a panic, or an `Ok` after a failed
//!    statement, which aborts the transaction and fails the next statement), the attempt is
//!    rolled back and the batch runs again the careful way: steps 1 and 2 anew, then each
//!    effect one after the other under the savepoint `svc_effect`, where its error or panic
//!    rolls back to the savepoint only, and only that delivery fails (answered `500`, so the
//!    sender retries it); the others of the batch are not held past the batch;
//! 4. the done records of the effects that succeeded and the signatures, in one statement
//!    (the first after the effects, so it fails if one of them aborted the transaction);
//! 5. one commit (tokio-postgres sends it with step 4), and only then every caller's answer.
//!
//! A batch holds distinct ids and distinct signatures: a second copy of an id (or a signature
//! under a second id) waits for the next batch, which then finds the first one recorded (or
//! not, if its effect failed), exactly as if they had come one after the other. A delivery
//! whose caller has gone away (its request's deadline passed) before its effect ran is left
//! out: nothing of it is recorded, and the sender's retry runs it. A batch that fails as a
//! whole (a deadlock or serialization failure of the crate's own statements or of the commit,
//! or, under `REPEATABLE READ`, a unique key another transaction took after the batch's
//! snapshot) is rolled back and run again, up to [`ATTEMPTS`] tries; then each of its callers gets the
//! error (`503`). The savepoints of a batch's careful run stay below PostgreSQL's cache of 64
//! subtransactions per transaction ([`MAX_BATCH`]), past which every snapshot of the server
//! gets slower.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::dedup::StorageError;
use crate::exactly_once::{Applied, EffectError};
use crate::handler::Received;

/// Batches one driver runs at once, each on its own pooled connection of the tenant's pool.
/// A batch is a chain of round trips on its connection (the effects' own, one after the
/// other unless they run at once), so several batches keep the server busy while each waits
/// for its answers. On the 2-core development VM, busy with other builds, 2 and 4 did about
/// as well (noisy runs) and 8 worse (smaller batches); after the savepoint-free first run, 2
/// batches of up to 64 again did no better than 4 of up to 32 (noisy side-by-side runs).
pub(super) const IN_FLIGHT: usize = 4;

/// Most deliveries in one batch: in a batch's careful run (after an effect failed) each fresh
/// one opens a savepoint, and PostgreSQL caches the subtransactions of a transaction up to 64
/// (past that every snapshot on the server has to look them up on disk).
pub(super) const MAX_BATCH: usize = 32;

/// Tries of a batch that fails as a whole on a deadlock or serialization failure.
pub(super) const ATTEMPTS: u32 = 3;

/// The savepoint each effect runs under.
pub(super) const SAVEPOINT: &str = "svc_effect";

/// A verified delivery waiting for its batch, with where its answer goes.
#[derive(Debug)]
pub(super) struct Delivery {
    /// The delivery.
    pub(super) received: Received,
    /// Its verified signature.
    pub(super) signature: [u8; 32],
    answer: oneshot::Sender<Result<Applied, EffectError>>,
}

impl Delivery {
    /// Whether its caller is still waiting for the answer (a request past its deadline is not).
    pub(super) fn wanted(&self) -> bool {
        !self.answer.is_closed()
    }
}

/// What is already recorded of a delivery, read under the batch's locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// The id is recorded: its signature is remembered, nothing runs.
    Duplicate,
    /// The signature is remembered under another id: nothing runs, nothing is written.
    Replayed,
    /// Not recorded: its effect runs, and it is recorded if the effect succeeds.
    Fresh,
}

impl Class {
    /// The class of delivery `id`, whose id is `stored` or not and whose signature is
    /// remembered under `owner` (if at all).
    pub(super) fn of(id: &str, stored: bool, owner: Option<&str>) -> Self {
        if stored {
            Self::Duplicate
        } else if owner.is_some_and(|owner| owner != id) {
            Self::Replayed
        } else {
            Self::Fresh
        }
    }
}

/// What a batch records with its commit: the done entries of the effects that succeeded
/// (with their signatures, `first`) and the signatures of duplicates (not `first`).
#[derive(Debug, Default)]
pub(super) struct Records<'a> {
    /// Ids of the done entries.
    pub(super) ids: Vec<&'a str>,
    /// Their bodies.
    pub(super) bodies: Vec<&'a [u8]>,
    /// Their times of arrival.
    pub(super) received_ats: Vec<i64>,
    /// Signatures to remember (one per delivery that succeeded or was a duplicate).
    pub(super) signatures: Vec<&'a [u8]>,
    /// The id each signature is remembered under.
    pub(super) signature_ids: Vec<&'a str>,
    /// When each was seen.
    pub(super) seen_ats: Vec<i64>,
    /// Whether each is the signature its delivery was recorded with.
    pub(super) firsts: Vec<bool>,
}

impl<'a> Records<'a> {
    /// Records `delivery` as done, its effect committed with the batch.
    pub(super) fn done(&mut self, delivery: &'a Delivery) {
        let received = &delivery.received;
        self.ids.push(received.webhook_id.as_str());
        self.bodies.push(&received.body);
        self.received_ats.push(received.received_at);
        self.signature(delivery, true);
    }

    /// Remembers `delivery`'s signature (a duplicate's: not the first of its id).
    pub(super) fn signature(&mut self, delivery: &'a Delivery, first: bool) {
        self.signatures.push(&delivery.signature[..]);
        self.signature_ids
            .push(delivery.received.webhook_id.as_str());
        self.seen_ats.push(delivery.received.received_at);
        self.firsts.push(first);
    }

    /// Whether there is nothing to write.
    pub(super) fn is_empty(&self) -> bool {
        self.signatures.is_empty()
    }
}

/// A batch's deliveries sorted out after its locks: each one's outcome so far, what to record,
/// and which are fresh (their effect runs; until then their outcome is a placeholder).
#[derive(Debug)]
pub(super) struct Sorted<'a> {
    /// Each delivery's outcome, in order.
    pub(super) outcomes: Vec<Result<Applied, EffectError>>,
    /// What the batch records with its commit so far (the duplicates' signatures).
    pub(super) records: Records<'a>,
    /// The indexes of the fresh deliveries, in order.
    pub(super) fresh: Vec<usize>,
}

impl<'a> Sorted<'a> {
    /// Sorts `batch` out by what is recorded of each of its deliveries, in order: whether its
    /// id is stored and the id its signature is remembered under, as
    /// `svc_receiver_lock_and_classify` answers them (one row per delivery).
    pub(super) fn of<O: AsRef<str>>(
        batch: &'a [Delivery],
        recorded: Vec<(bool, Option<O>)>,
    ) -> Result<Self, BatchFailed> {
        if recorded.len() != batch.len() {
            return Err(BatchFailed {
                message: format!(
                    "{} rows classified a batch of {} deliveries",
                    recorded.len(),
                    batch.len()
                ),
                transient: false,
            });
        }
        let mut sorted = Self {
            outcomes: Vec::with_capacity(batch.len()),
            records: Records::default(),
            fresh: Vec::new(),
        };
        for (i, (delivery, (stored, owner))) in batch.iter().zip(recorded).enumerate() {
            let id = delivery.received.webhook_id.as_str();
            match Class::of(id, stored, owner.as_ref().map(AsRef::as_ref)) {
                Class::Duplicate => {
                    sorted.records.signature(delivery, false);
                    sorted.outcomes.push(Ok(Applied::Duplicate));
                }
                Class::Replayed => sorted.outcomes.push(Ok(Applied::Replayed)),
                Class::Fresh => {
                    sorted.fresh.push(i);
                    // Until its effect has run.
                    sorted
                        .outcomes
                        .push(Err(EffectError::Store(StorageError::Unavailable)));
                }
            }
        }
        Ok(sorted)
    }

    /// The fresh deliveries whose callers still wait (a request past its deadline is left
    /// out: nothing of it runs or is recorded), in order: the ones a fast run runs.
    pub(super) fn running(&self, batch: &[Delivery]) -> Vec<usize> {
        self.fresh
            .iter()
            .copied()
            .filter(|&i| batch[i].wanted())
            .collect()
    }

    /// Records the `running` deliveries of `batch` as done, with the batch's commit.
    pub(super) fn record_done(&mut self, batch: &'a [Delivery], running: &[usize]) {
        for &i in running {
            self.records.done(&batch[i]);
        }
    }

    /// The outcomes once the batch, with the `running` deliveries' effects, has committed.
    pub(super) fn committed(mut self, running: &[usize]) -> Vec<Result<Applied, EffectError>> {
        for &i in running {
            crate::metrics::handler_run("direct", "ok");
            self.outcomes[i] = Ok(Applied::Done);
        }
        self.outcomes
    }
}

/// Why a batch failed as a whole (nothing of it committed).
#[derive(Debug)]
pub(super) struct BatchFailed {
    /// The error's text, for every caller of the batch.
    pub(super) message: String,
    /// Whether running it again may succeed (a deadlock or a serialization failure).
    pub(super) transient: bool,
}

/// A driver's way of running one batch (see the module docs).
pub(super) trait BatchRunner: Send + Sync + 'static {
    /// Runs `batch` (distinct ids and signatures, in arrival order) in one transaction and
    /// commits it; returns each delivery's outcome, in order. An effect's failure is its
    /// delivery's outcome; `Err` only when nothing was committed.
    fn run(
        &self,
        batch: &[Delivery],
    ) -> impl Future<Output = Result<Vec<Result<Applied, EffectError>>, BatchFailed>> + Send;
}

/// Gathers concurrent direct-mode deliveries into batches (see the module docs). Dropping it
/// (with the last handle of its driver) stops its task once the batches queued are done.
pub(super) struct Gatherer<R> {
    runner: Arc<R>,
    /// The running task's queue; `None` before the first call.
    queue: Mutex<Option<mpsc::UnboundedSender<Delivery>>>,
}

impl<R> std::fmt::Debug for Gatherer<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gatherer").finish_non_exhaustive()
    }
}

impl<R: BatchRunner> Gatherer<R> {
    /// A gatherer whose batches `runner` runs; its task starts on the first call.
    pub(super) fn new(runner: Arc<R>) -> Self {
        Self {
            runner,
            queue: Mutex::new(None),
        }
    }

    /// The running task's queue, starting the task in the current runtime if none runs.
    fn queue_or_start(&self) -> mpsc::UnboundedSender<Delivery> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        match &*queue {
            Some(running) if !running.is_closed() => running.clone(),
            _ => {
                let (sender, deliveries) = mpsc::unbounded_channel();
                tokio::spawn(gather(Arc::clone(&self.runner), deliveries));
                *queue = Some(sender.clone());
                sender
            }
        }
    }

    /// Runs `received` in the next batch; its outcome once the batch has committed.
    pub(super) async fn call(
        &self,
        received: Received,
        signature: [u8; 32],
    ) -> Result<Applied, EffectError> {
        let (answer, answered) = oneshot::channel();
        self.queue_or_start()
            .send(Delivery {
                received,
                signature,
                answer,
            })
            .map_err(|_| EffectError::Store(StorageError::Unavailable))?;
        answered
            .await
            .map_err(|_| EffectError::Store(StorageError::Unavailable))?
    }
}

/// The gathering task: until every handle is dropped, takes what is queued whenever a slot is
/// free and runs it as one batch.
async fn gather<R: BatchRunner>(runner: Arc<R>, mut queue: mpsc::UnboundedReceiver<Delivery>) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    // Deliveries that shared an id or a signature with an earlier one of their batch.
    let mut deferred = VecDeque::new();
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let mut taken: Vec<Delivery> = deferred.drain(..).collect();
        if taken.is_empty() && queue.recv_many(&mut taken, MAX_BATCH).await == 0 {
            return;
        }
        while taken.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(delivery) => taken.push(delivery),
                Err(_) => break,
            }
        }
        let (mut ids, mut signatures) = (HashSet::new(), HashSet::new());
        let mut batch = Vec::with_capacity(taken.len());
        for delivery in taken {
            let id = delivery.received.webhook_id.as_str().to_owned();
            if batch.len() < MAX_BATCH
                && !ids.contains(&id)
                && !signatures.contains(&delivery.signature)
            {
                ids.insert(id);
                signatures.insert(delivery.signature);
                batch.push(delivery);
            } else {
                deferred.push_back(delivery);
            }
        }
        let runner = Arc::clone(&runner);
        tokio::spawn(async move {
            execute(&*runner, batch).await;
            drop(slot);
        });
    }
}

/// Runs one batch, again on a transient failure, and answers each of its callers.
async fn execute<R: BatchRunner>(runner: &R, batch: Vec<Delivery>) {
    let mut attempt = 1;
    let outcomes = loop {
        match runner.run(&batch).await {
            Ok(outcomes) if outcomes.len() == batch.len() => break Ok(outcomes),
            Ok(outcomes) => {
                break Err(format!(
                    "a batch of {} deliveries was answered with {} outcomes",
                    batch.len(),
                    outcomes.len()
                ));
            }
            Err(failed) if failed.transient && attempt < ATTEMPTS => {
                tracing::debug!(attempt, error = %failed.message, "retrying an exactly-once batch");
                tokio::time::sleep(Duration::from_millis(2 << attempt)).await;
                attempt += 1;
            }
            Err(failed) => break Err(failed.message),
        }
    };
    match outcomes {
        Ok(outcomes) => {
            for (delivery, outcome) in batch.into_iter().zip(outcomes) {
                // A caller that went away has no use for its answer.
                let _ = delivery.answer.send(outcome);
            }
        }
        Err(message) => {
            tracing::warn!(deliveries = batch.len(), error = %message, "exactly-once batch failed");
            for delivery in batch {
                let _ = delivery
                    .answer
                    .send(Err(EffectError::Store(StorageError::Database(
                        message.clone(),
                    ))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Class, Sorted};

    #[test]
    fn an_answer_of_another_length_than_the_batch_fails_it_for_good() {
        let failed = Sorted::of(&[], vec![(true, None::<String>)]).expect_err("refused");
        assert!(!failed.transient);
        assert_eq!(failed.message, "1 rows classified a batch of 0 deliveries");
    }

    #[test]
    fn a_recorded_id_is_a_duplicate_whoever_owns_its_signature() {
        assert_eq!(Class::of("wh_a", true, None), Class::Duplicate);
        assert_eq!(Class::of("wh_a", true, Some("wh_b")), Class::Duplicate);
    }

    #[test]
    fn a_signature_remembered_under_another_id_is_a_replay_and_under_its_own_id_is_not() {
        assert_eq!(Class::of("wh_a", false, Some("wh_b")), Class::Replayed);
        assert_eq!(Class::of("wh_a", false, Some("wh_a")), Class::Fresh);
        assert_eq!(Class::of("wh_a", false, None), Class::Fresh);
    }
}
