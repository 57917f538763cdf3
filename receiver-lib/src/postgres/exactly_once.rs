//! Exactly-once effects on PostgreSQL: [`PgExactlyOnce`] runs your [`PgEffect`] in a
//! transaction of the inbox's database (your database) and marks the event done in that same
//! transaction, so that your writes and the mark commit together or not at all.
//!
//! - Inbox mode (as the handler of the inbox's workers): the transaction locks the entry's row
//!   (`SELECT … FOR UPDATE`) and runs your code only if the entry is not done yet. While it is
//!   open, no worker of any replica can take the entry (`FOR UPDATE SKIP LOCKED`), and a
//!   worker that took it anyway (its lease ran out under very slow code) waits for the commit
//!   and then finds it done. The worker's own settlement never turns a done entry back.
//! - Direct mode (`svc_receiver::axum::exactly_once_route`): deliveries that wait together
//!   are group-committed (the `effect_batch` module): one transaction takes the advisory locks
//!   of every id and signature of the batch (the ones inbox batches take, in the same global
//!   order), so concurrent deliveries of one id on any replicas run one after the other; it
//!   runs each fresh delivery's effect (first with no savepoint; when one fails, the attempt
//!   is rolled back and run again with each effect under a savepoint of its own), records
//!   those that succeeded as done inbox entries with their signatures, and commits once
//!   before anyone is answered: the sender's retry after a lost answer is a duplicate, a
//!   replay of the signature under another id is refused.
//!
//! Your code gets a [`PgTx`] (the connection's client inside the transaction, with its
//! statement cache) and never commits or rolls back (in direct
//! mode the transaction is the batch's, shared with other deliveries' effects, and in its
//! careful run your code runs inside a savepoint of it): the crate commits once it returns
//! `Ok`, and rolls back (direct mode: the attempt, or in the careful run to the savepoint)
//! when it returns `Err`, panics or is cancelled.
//!
//! The crate sends `BEGIN` together with its first statement of a transaction (the entry's
//! lock, or a batch's locks), so a transaction costs no round trip of its own. A connection
//! whose transaction did not end (its exchange cancelled, or its `ROLLBACK` unanswered) is
//! closed instead of going back to the pool.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use deadpool_postgres::StatementCache;
use futures_util::FutureExt;
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use super::batch::is_transient;
use super::database::Conn;
use super::effect_batch::{
    BatchFailed, BatchRunner, Delivery, Gatherer, Records, SAVEPOINT, Sorted,
};
use super::{PgInbox, PgTx, db_error, describe_error};
use crate::dedup::StorageError;
use crate::exactly_once::{Applied, EffectError, Transactional, panic_text};
use crate::handler::{EventHandler, Received};

/// Your code's effect of one event, written in the transaction it is given (never commit or
/// roll back yourself: return `Err` to roll back). Implement it with an `async fn`:
///
/// ```rust,ignore
/// impl PgEffect for Scores {
///     type Error = tokio_postgres::Error;
///     async fn apply(&self, received: &Received, tx: &PgTx<'_>) -> Result<(), Self::Error> {
///         let insert = tx.prepare_cached("INSERT INTO scores (call_id) VALUES ($1)").await?;
///         tx.execute(&insert, &[&received.event.call_id]).await?;
///         Ok(())
///     }
/// }
/// ```
pub trait PgEffect: Send + Sync + 'static {
    /// Your code's failure (logged with `{:#}`, stored as the inbox entry's last error).
    type Error: std::fmt::Display + Send;

    /// Writes the effect of `received` in `tx`.
    fn apply(
        &self,
        received: &Received,
        tx: &PgTx<'_>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// How the crate begins a transaction it hands to user code: `BEGIN`, and a transaction-local
/// marker ([`MARKER`]) that the entry's mark and a batch's record require, so that they write
/// nothing and say so when user code ended the transaction itself (a `COMMIT` or `ROLLBACK` of
/// its own, after which they would run on their own, outside it). One simple query, one
/// message.
pub(super) const BEGIN_MARKED: &str = "BEGIN; SET LOCAL svc_receiver.tx = 'open'";

/// The condition the mark and the record write under: the crate's transaction is still open.
const MARKER: &str = "current_setting('svc_receiver.tx', true) IS NOT DISTINCT FROM 'open'";

/// The failure of an attempt whose effect ended the crate's transaction itself.
pub(super) const ENDED_BY_EFFECT: &str = "an effect ended the crate's transaction itself (a COMMIT or ROLLBACK of \
     its own): the event is not recorded as done, and is run again";

/// The crate's statements in a transaction handed to user code, their names qualified with
/// the crate's schema when it has one.
#[derive(Debug)]
pub(super) struct Statements {
    pub(super) lock_entry: String,
    /// Marks the entry done; 0 rows when the transaction is not the crate's (see
    /// [`BEGIN_MARKED`]).
    pub(super) mark_done: String,
    /// Takes the advisory locks of a batch's ids and signatures, in the global order, then
    /// (read after them) per delivery of the batch, in order: whether its id is recorded, and
    /// the id its signature is remembered under (migration 4). Both are scalar subqueries,
    /// which PostgreSQL always runs per delivery through the primary keys: an `EXISTS` may be
    /// planned as a hashed subplan that reads the whole inbox table on every batch (it was,
    /// for the plan made while the table was small, and then cached: 9 ms a batch at 20 000
    /// entries).
    pub(super) lock_and_classify: String,
    /// Records a batch's done entries and remembers its signatures; answers one row, whether
    /// it did (false, with nothing written, when the transaction is not the crate's).
    pub(super) record: String,
}

impl Statements {
    pub(super) fn new(inbox: &PgInbox) -> Self {
        let database = inbox.database();
        let table = database.qualified("webhook_inbox");
        let signatures = database.qualified("webhook_inbox_signatures");
        Self {
            lock_entry: format!("SELECT state FROM {table} WHERE id = $1 FOR UPDATE"),
            mark_done: format!(
                "UPDATE {table} SET state = 'done', last_error = NULL WHERE id = $1 AND {MARKER}"
            ),
            lock_and_classify: format!(
                "SELECT stored, owner FROM {}($1::TEXT[], $2::BYTEA[])",
                database.qualified("svc_receiver_lock_and_classify")
            ),
            record: format!(
                "WITH marker AS (SELECT {MARKER} AS open),
                 entries AS (
                     INSERT INTO {table} (id, body, received_at, state, due_at)
                     SELECT id, body, at, 'done', at
                     FROM unnest($1::TEXT[], $2::BYTEA[], $3::BIGINT[]) AS r (id, body, at)
                     WHERE (SELECT open FROM marker)
                 ),
                 remembered AS (
                     INSERT INTO {signatures} (signature, id, seen_at, first)
                     SELECT * FROM unnest($4::BYTEA[], $5::TEXT[], $6::BIGINT[], $7::BOOLEAN[])
                     WHERE (SELECT open FROM marker)
                     ON CONFLICT (signature) DO NOTHING
                 )
                 SELECT open FROM marker"
            ),
        }
    }
}

/// What a driver's handles share: the inbox, your effect and the statements.
struct Core<E> {
    inbox: PgInbox,
    effect: E,
    sql: Statements,
    /// Direct mode runs a batch's effects at once (see [`PgExactlyOnce::effects_at_once`]).
    at_once: bool,
}

/// Runs a [`PgEffect`] exactly once per event, in your database's transaction (see the
/// module docs); cheap to clone. Use it as the handler of the workers of the inbox it was
/// built on (inbox mode), or in `svc_receiver::axum::exactly_once_route` (direct mode).
pub struct PgExactlyOnce<E> {
    core: Arc<Core<E>>,
    /// Gathers direct-mode deliveries into batches.
    direct: Arc<Gatherer<Core<E>>>,
}

impl<E> Clone for PgExactlyOnce<E> {
    fn clone(&self) -> Self {
        Self {
            core: Arc::clone(&self.core),
            direct: Arc::clone(&self.direct),
        }
    }
}

impl<E> std::fmt::Debug for PgExactlyOnce<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgExactlyOnce")
            .field("inbox", &self.core.inbox)
            .finish_non_exhaustive()
    }
}

impl<E: PgEffect> PgExactlyOnce<E> {
    /// Runs `effect` with the events of `inbox`, whose database is yours: the transaction
    /// comes from it ([`super::PgDatabase::connect_in_schema`] keeps the crate's tables in a
    /// schema of their own).
    pub fn new(inbox: PgInbox, effect: E) -> Self {
        Self::build(inbox, effect, false)
    }

    /// As [`PgExactlyOnce::new`], but direct mode runs the effects of a batch at once instead
    /// of one after the other: their statements are pipelined on the batch's connection, and
    /// the batch waits for one round trip for all of them instead of one per effect (see the
    /// README's "Performance" for what it gains on the load bench). When any effect fails,
    /// the whole attempt is rolled back and the batch runs again the careful way, one effect
    /// at a time under a savepoint of its own, so a failing effect still rolls back alone and
    /// nothing happens twice.
    ///
    /// Turn it on only for effects that do not depend on one another within a transaction:
    /// each writes rows of its own, or changes shared rows in single statements
    /// (`UPDATE … SET n = n + 1`, `INSERT … ON CONFLICT DO UPDATE`). Effects that read a row
    /// and then write what they read (even with `SELECT … FOR UPDATE`, which does not block
    /// the transaction that holds the lock) interleave in one transaction and can lose an
    /// update.
    pub fn effects_at_once(inbox: PgInbox, effect: E) -> Self {
        Self::build(inbox, effect, true)
    }

    fn build(inbox: PgInbox, effect: E, at_once: bool) -> Self {
        let core = Arc::new(Core {
            sql: Statements::new(&inbox),
            inbox,
            effect,
            at_once,
        });
        Self {
            direct: Arc::new(Gatherer::new(Arc::clone(&core))),
            core,
        }
    }

    /// The inbox it marks events done in.
    pub fn inbox(&self) -> &PgInbox {
        &self.core.inbox
    }
}

impl<E: PgEffect> Core<E> {
    /// Inbox mode: one attempt at an entry the workers handed out.
    async fn apply_entry(&self, received: Received) -> Result<(), EffectError> {
        let mut client = self.inbox.database().user_client().await?;
        // The whole attempt, the effect included, within the database's answer timeout: on a
        // stalled network the worker gives up, the connection is closed, and the entry is
        // retried with the inbox's backoff.
        let watch = client.watch();
        watch
            .bound(self.apply_entry_on(&mut client, &received))
            .await
            .map_err(|err| EffectError::Store(err.into()))?
    }

    /// [`Core::apply_entry`] on `client`.
    async fn apply_entry_on(
        &self,
        client: &mut Conn,
        received: &Received,
    ) -> Result<(), EffectError> {
        // Both prepared before the transaction (cached on the connection after its first
        // use), so that the lock goes with `BEGIN` and the mark with `COMMIT`.
        let (lock_entry, mark_done) = futures_util::future::try_join(
            client.prepare_cached(&self.sql.lock_entry),
            client.prepare_cached(&self.sql.mark_done),
        )
        .await
        .map_err(|e| db_error(&e))?;
        let cache = Arc::clone(&client.statement_cache);
        client.set_close_on_drop(true);
        let outcome = self
            .entry_transaction(client, &cache, &lock_entry, &mark_done, received)
            .await;
        end_transaction(client, outcome.is_ok()).await;
        outcome
    }

    /// The transaction of [`Core::apply_entry_on`]: begun with the entry's lock, ended by its
    /// mark and `COMMIT` (on `Err`, left for the caller to roll back).
    async fn entry_transaction(
        &self,
        client: &Client,
        cache: &StatementCache,
        lock_entry: &tokio_postgres::Statement,
        mark_done: &tokio_postgres::Statement,
        received: &Received,
    ) -> Result<(), EffectError> {
        let id = received.webhook_id.as_str();
        let ((), state) = futures_util::future::try_join(
            client.batch_execute(BEGIN_MARKED),
            client.query_opt(lock_entry, &[&id]),
        )
        .await
        .map_err(|e| db_error(&e))?;
        match state.as_ref().map(|row| row.get::<_, &str>(0)) {
            None => {
                return Err(EffectError::Store(StorageError::Database(format!(
                    "webhook {id} is not stored in this exactly-once handler's inbox"
                ))));
            }
            // Done by an earlier run whose settlement was lost: nothing more to do.
            Some("done") => {
                return client
                    .batch_execute("COMMIT")
                    .await
                    .map_err(|e| EffectError::Store(db_error(&e)));
            }
            Some(_) => {}
        }
        self.run_effect(received, client, cache).await?;
        // The mark and the COMMIT sent at once, as a batch's record and COMMIT are (see
        // `record_and_commit`): the mark is the first statement after the effect, so it fails
        // when the effect returned Ok with a statement of it failed, and PostgreSQL then
        // answers the COMMIT of the aborted transaction by rolling it back.
        let (marked, committed) = futures_util::future::join(
            client.execute(mark_done, &[&id]),
            client.batch_execute("COMMIT"),
        )
        .await;
        let marked = marked.map_err(|e| db_error(&e))?;
        committed.map_err(|e| db_error(&e))?;
        if marked == 0 {
            return Err(EffectError::Effect(ENDED_BY_EFFECT.into()));
        }
        Ok(())
    }

    /// Runs user code in the transaction open on `client`, with the statement cache of its
    /// connection: its error or panic as [`EffectError::Effect`].
    async fn run_effect(
        &self,
        received: &Received,
        client: &Client,
        cache: &StatementCache,
    ) -> Result<(), EffectError> {
        let tx = PgTx::new(client, cache);
        match std::panic::AssertUnwindSafe(self.effect.apply(received, &tx))
            .catch_unwind()
            .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(EffectError::Effect(format!("{err:#}"))),
            Err(panic) => Err(EffectError::Effect(panic_text(&*panic))),
        }
    }
}

impl<E: PgEffect> EventHandler for PgExactlyOnce<E> {
    type Error = String;

    async fn handle(&self, received: Received) -> Result<(), String> {
        self.core
            .apply_entry(received)
            .await
            .map_err(EffectError::into_text)
    }
}

impl<E: PgEffect> Transactional for PgExactlyOnce<E> {
    async fn apply_direct(
        &self,
        received: Received,
        signature: [u8; 32],
    ) -> Result<Applied, EffectError> {
        self.core.inbox.prune_if_due(received.received_at).await?;
        self.direct.call(received, signature).await
    }
}

/// A savepoint's release, sent and not yet answered.
type Pending<'t> = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send + 't>>;

/// The failure of an effect that returned `Ok` although a statement of it failed (its
/// savepoint could not be released: the transaction was aborted).
fn statement_failed(err: &tokio_postgres::Error) -> EffectError {
    EffectError::Effect(format!(
        "a statement of the effect failed: {}",
        describe_error(err)
    ))
}

/// A batch's failure from a driver error: transient when running the batch again may
/// succeed (a deadlock, a serialization failure, or a unique key another transaction took
/// after this one's snapshot, under `REPEATABLE READ`).
fn batch_failed(err: &tokio_postgres::Error) -> BatchFailed {
    BatchFailed {
        message: describe_error(err),
        transient: is_transient(err) || err.code() == Some(&SqlState::UNIQUE_VIOLATION),
    }
}

/// The crate's prepared statements of a batch, on its connection, and that connection's
/// statement cache (for the effects').
struct Prepared {
    lock_and_classify: tokio_postgres::Statement,
    record: tokio_postgres::Statement,
    cache: Arc<StatementCache>,
}

impl<E: PgEffect> BatchRunner for Core<E> {
    async fn run(
        &self,
        batch: &[Delivery],
    ) -> Result<Vec<Result<Applied, EffectError>>, BatchFailed> {
        let failed = |err: tokio_postgres::Error| batch_failed(&err);
        let mut client = self
            .inbox
            .database()
            .user_client()
            .await
            .map_err(|err| BatchFailed {
                message: err.to_string(),
                transient: false,
            })?;
        // The whole batch, the effects included, within the database's answer timeout: on a
        // stalled network the batch fails (its callers are answered, the sender retries), the
        // connection is closed, and the batch's slot is free for the next.
        let watch = client.watch();
        let run = async {
            let (lock_and_classify, record) = futures_util::future::try_join(
                client.prepare_cached(&self.sql.lock_and_classify),
                client.prepare_cached(&self.sql.record),
            )
            .await
            .map_err(failed)?;
            let prepared = Prepared {
                lock_and_classify,
                record,
                cache: Arc::clone(&client.statement_cache),
            };
            client.set_close_on_drop(true);
            let outcome = self.run_batch(&client, &prepared, batch).await;
            end_transaction(&mut client, outcome.is_ok()).await;
            outcome
        };
        watch.bound(run).await.map_err(|err| BatchFailed {
            message: err.to_string(),
            transient: false,
        })?
    }
}

/// Ends the bookkeeping of a transaction begun with a plain `BEGIN` on `client`: unless it
/// `committed`, rolls it back (a `ROLLBACK` after the transaction already ended only makes the
/// server log a warning). The connection goes back to the pool only once the transaction is
/// known to have ended; otherwise it is closed when dropped.
async fn end_transaction(client: &mut Conn, committed: bool) {
    if committed || client.batch_execute("ROLLBACK").await.is_ok() {
        client.set_close_on_drop(false);
    }
}

impl<E: PgEffect> Core<E> {
    /// A batch's attempts (see the module docs), its transactions on `client`: the fast one,
    /// and the careful one when the fast one was rolled back. On `Err`, a transaction may be
    /// left open (for [`end_transaction`]).
    async fn run_batch(
        &self,
        client: &Client,
        prepared: &Prepared,
        batch: &[Delivery],
    ) -> Result<Vec<Result<Applied, EffectError>>, BatchFailed> {
        if let Some(outcomes) = self.run_without_savepoints(client, prepared, batch).await? {
            return Ok(outcomes);
        }
        self.run_one_by_one(client, prepared, batch).await
    }

    /// Begins the batch's transaction, takes its locks (other batches of these ids or
    /// signatures, on any replica, wait for this one's end) and sorts its deliveries by what
    /// is recorded, read after the locks, all in one round trip; `savepoint` also opens the
    /// first effect's savepoint, in the same round trip.
    async fn begin<'b>(
        client: &Client,
        prepared: &Prepared,
        batch: &'b [Delivery],
        savepoint: bool,
    ) -> Result<Sorted<'b>, BatchFailed> {
        let failed = |err: tokio_postgres::Error| batch_failed(&err);
        let ids: Vec<&str> = batch
            .iter()
            .map(|delivery| delivery.received.webhook_id.as_str())
            .collect();
        let signatures: Vec<&[u8]> = batch.iter().map(|d| &d.signature[..]).collect();
        let open = async {
            if savepoint {
                client
                    .batch_execute(&format!("SAVEPOINT {SAVEPOINT}"))
                    .await
            } else {
                Ok(())
            }
        };
        // Sent in this order (each is sent when first polled, and `try_join3` polls them in
        // order): `BEGIN`, the locks, the savepoint.
        let ((), rows, ()) = futures_util::future::try_join3(
            client.batch_execute(BEGIN_MARKED),
            client.query(&prepared.lock_and_classify, &[&ids, &signatures]),
            open,
        )
        .await
        .map_err(failed)?;
        let recorded = rows
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get::<_, Option<&str>>(1)?)))
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()
            .map_err(failed)?;
        Sorted::of(batch, recorded)
    }

    /// Records what is to be recorded and commits, both sent at once (one round trip): the
    /// record is the first statement after the effects, so an effect that returned `Ok` with
    /// a statement of it failed (the transaction aborted) fails it with
    /// `IN_FAILED_SQL_TRANSACTION`, and PostgreSQL then answers the `COMMIT` of the aborted
    /// transaction by rolling it back. Committed only when both succeed; `Ok(false)` when an
    /// effect ended the transaction itself (nothing recorded: see [`BEGIN_MARKED`]).
    async fn record_and_commit(
        client: &Client,
        prepared: &Prepared,
        records: &Records<'_>,
    ) -> Result<bool, tokio_postgres::Error> {
        if records.is_empty() {
            // No effect ran in it: nothing to record, and nothing aborted it.
            return client.batch_execute("COMMIT").await.map(|()| true);
        }
        let (recorded, committed) = futures_util::future::join(
            client.query_one(
                &prepared.record,
                &[
                    &records.ids,
                    &records.bodies,
                    &records.received_ats,
                    &records.signatures,
                    &records.signature_ids,
                    &records.seen_ats,
                    &records.firsts,
                ],
            ),
            client.batch_execute("COMMIT"),
        )
        .await;
        let recorded: bool = recorded?.try_get(0)?;
        committed?;
        Ok(recorded)
    }

    /// The fast path: the batch's fresh effects with no savepoint, one after the other (or,
    /// with [`PgExactlyOnce::effects_at_once`], at once: their statements pipelined on the
    /// batch's connection). When every effect returns `Ok` and the transaction is still
    /// sound, the batch is recorded and committed as it is. When an effect fails (the rest
    /// do not run), or returned `Ok` after a statement of it failed (which aborts the
    /// transaction), the whole transaction is rolled back and `None` says to run the batch
    /// again the careful way, one effect at a time under a savepoint of its own: nothing of
    /// this attempt was committed, so no effect happens twice.
    async fn run_without_savepoints(
        &self,
        client: &Client,
        prepared: &Prepared,
        batch: &[Delivery],
    ) -> Result<Option<Vec<Result<Applied, EffectError>>>, BatchFailed> {
        let failed = |err: tokio_postgres::Error| batch_failed(&err);
        let mut sorted = Self::begin(client, prepared, batch, false).await?;
        let running = sorted.running(batch);
        let sound = if self.at_once {
            futures_util::future::join_all(
                running
                    .iter()
                    .map(|&i| self.run_effect(&batch[i].received, client, &prepared.cache)),
            )
            .await
            .iter()
            .all(Result::is_ok)
        } else {
            let mut sound = true;
            for &i in &running {
                if self
                    .run_effect(&batch[i].received, client, &prepared.cache)
                    .await
                    .is_err()
                {
                    sound = false;
                    break;
                }
            }
            sound
        };
        if !sound {
            client.batch_execute("ROLLBACK").await.map_err(failed)?;
            return Ok(None);
        }
        sorted.record_done(batch, &running);
        match Self::record_and_commit(client, prepared, &sorted.records).await {
            Ok(true) => {}
            // An effect ended the transaction itself: nothing was recorded. The careful run
            // finds out which one (its savepoint is gone) and fails the batch.
            Ok(false) => {
                tracing::warn!("{ENDED_BY_EFFECT}");
                return Ok(None);
            }
            // An effect returned Ok with a statement of it failed: the transaction was aborted
            // (and rolled back by its COMMIT).
            Err(err) if err.code() == Some(&SqlState::IN_FAILED_SQL_TRANSACTION) => {
                return Ok(None);
            }
            Err(err) => return Err(failed(err)),
        }
        Ok(Some(sorted.committed(&running)))
    }

    /// The careful path, after the fast one failed: one effect at a time, each under a
    /// savepoint of its own, so that a failing effect rolls back alone.
    async fn run_one_by_one(
        &self,
        client: &Client,
        prepared: &Prepared,
        batch: &[Delivery],
    ) -> Result<Vec<Result<Applied, EffectError>>, BatchFailed> {
        let failed = |err: tokio_postgres::Error| batch_failed(&err);
        let sorted = Self::begin(client, prepared, batch, true).await?;
        let Sorted {
            mut outcomes,
            mut records,
            fresh,
        } = sorted;
        let release_sql = format!("RELEASE SAVEPOINT {SAVEPOINT}; SAVEPOINT {SAVEPOINT}");
        let rollback_sql = format!("ROLLBACK TO SAVEPOINT {SAVEPOINT}");
        // The last effect that returned Ok, with the release of its savepoint (and the next
        // one's savepoint) sent: its answer comes back while the next effect runs, so an
        // effect costs no round trip of the crate's. The effect counts as done only once the
        // release succeeded.
        let mut released: Option<(usize, Pending<'_>)> = None;
        for &i in &fresh {
            let delivery = &batch[i];
            if !delivery.wanted() {
                // Its request gave up: nothing of it runs or is recorded.
                continue;
            }
            let outcome = loop {
                let outcome = self
                    .run_effect(&delivery.received, client, &prepared.cache)
                    .await;
                if let Some((before, release)) = released.take() {
                    if let Err(err) = release.await {
                        // The effect before returned Ok with a statement of it failed (the
                        // transaction is aborted), so this one ran in an aborted transaction:
                        // back to the savepoint before both, and this one runs again.
                        client.batch_execute(&rollback_sql).await.map_err(failed)?;
                        crate::metrics::handler_run("direct", "error");
                        outcomes[before] = Err(statement_failed(&err));
                        continue;
                    }
                    crate::metrics::handler_run("direct", "ok");
                    records.done(&batch[before]);
                    outcomes[before] = Ok(Applied::Done);
                }
                break outcome;
            };
            match outcome {
                Ok(()) => {
                    let mut release: Pending<'_> = Box::pin(client.batch_execute(&release_sql));
                    // Polled once: sent, ahead of the next effect's statements.
                    if let Some(result) = (&mut release).now_or_never() {
                        release = Box::pin(std::future::ready(result));
                    }
                    released = Some((i, release));
                }
                Err(err) => {
                    // Back to its savepoint, which stays for the next effect.
                    client.batch_execute(&rollback_sql).await.map_err(failed)?;
                    crate::metrics::handler_run("direct", "error");
                    outcomes[i] = Err(err);
                }
            }
        }
        if let Some((before, release)) = released.take() {
            if let Err(err) = release.await {
                client.batch_execute(&rollback_sql).await.map_err(failed)?;
                crate::metrics::handler_run("direct", "error");
                outcomes[before] = Err(statement_failed(&err));
            } else {
                crate::metrics::handler_run("direct", "ok");
                records.done(&batch[before]);
                outcomes[before] = Ok(Applied::Done);
            }
        }
        // Its borrow of the transaction ends here.
        drop(released);
        if !Self::record_and_commit(client, prepared, &records)
            .await
            .map_err(failed)?
        {
            return Err(BatchFailed {
                message: ENDED_BY_EFFECT.into(),
                transient: false,
            });
        }
        Ok(outcomes)
    }
}
