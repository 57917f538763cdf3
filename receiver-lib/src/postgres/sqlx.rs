//! Exactly-once effects through `sqlx` (feature `sqlx-postgres`): [`SqlxPgExactlyOnce`] is
//! [`super::PgExactlyOnce`] with your transaction taken from your own `sqlx::PgPool` of the
//! same database, and your code given its connection. The inbox (accepts, hand-outs,
//! settlements, dead letters, retention) stays on the crate's `tokio-postgres` pool
//! ([`super::PgInbox`]); only the transaction that holds your writes and marks the event done
//! is sqlx's. The statements, locks and guarantees are [`super::PgExactlyOnce`]'s.
//!
//! Only PostgreSQL: sqlx's SQLite driver links its own `libsqlite3-sys`, and a build holds one
//! native SQLite (`links = "sqlite3"`); sqlx-sqlite 0.9.0 accepts `>=0.30.1, <0.38`, the
//! workspace's rusqlite 0.43 requires 0.40, so for SQLite use
//! `SqliteExactlyOnce`.

use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt;
use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, PgPool, Row};

use super::PgInbox;
use super::effect_batch::{BatchFailed, BatchRunner, Delivery, Gatherer, Records, Sorted};
use super::exactly_once::{BEGIN_MARKED, ENDED_BY_EFFECT, Statements};
use crate::dedup::StorageError;
use crate::exactly_once::{Applied, EffectError, Transactional, panic_text};
use crate::handler::{EventHandler, Received};

/// Your code's effect of one event, written on the connection of the open transaction it is
/// given (`sqlx::query(…).execute(&mut *conn)`); never commit or roll back yourself: return
/// `Err` to roll back. Implement it with an `async fn`.
pub trait SqlxPgEffect: Send + Sync + 'static {
    /// Your code's failure (logged with `{:#}`, stored as the inbox entry's last error).
    type Error: std::fmt::Display + Send;

    /// Writes the effect of `received` on `conn`, inside the transaction.
    fn apply(
        &self,
        received: &Received,
        conn: &mut PgConnection,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// What a driver's handles share: the inbox, your pool and effect, and the statements.
struct Core<E> {
    inbox: PgInbox,
    pool: PgPool,
    effect: E,
    sql: Statements,
}

/// Runs a [`SqlxPgEffect`] exactly once per event in a transaction of your `sqlx` pool; cheap
/// to clone. Use it as the handler of the workers of the inbox it was built on (inbox mode), or
/// in `svc_receiver::axum::exactly_once_route` (direct mode).
pub struct SqlxPgExactlyOnce<E> {
    core: Arc<Core<E>>,
    /// Gathers direct-mode deliveries into batches.
    direct: Arc<Gatherer<Core<E>>>,
}

impl<E> Clone for SqlxPgExactlyOnce<E> {
    fn clone(&self) -> Self {
        Self {
            core: Arc::clone(&self.core),
            direct: Arc::clone(&self.direct),
        }
    }
}

impl<E> std::fmt::Debug for SqlxPgExactlyOnce<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlxPgExactlyOnce")
            .field("inbox", &self.core.inbox)
            .finish_non_exhaustive()
    }
}

/// One of the crate's statements (built once from its fixed text and the validated schema
/// name; every value is a bind parameter).
fn query(sql: &str) -> sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(sqlx::AssertSqlSafe(sql))
}

fn db(err: sqlx::Error) -> EffectError {
    EffectError::Store(StorageError::Database(err.to_string()))
}

/// A batch's failure from a sqlx error: transient when running the batch again may succeed
/// (a deadlock, a serialization failure, or a unique key another transaction took after this
/// one's snapshot, under `REPEATABLE READ`).
fn batch_failed(err: &sqlx::Error) -> BatchFailed {
    let code = err.as_database_error().and_then(|db| db.code());
    BatchFailed {
        message: err.to_string(),
        transient: matches!(code.as_deref(), Some("40P01" | "40001" | "23505")),
    }
}

impl<E: SqlxPgEffect> SqlxPgExactlyOnce<E> {
    /// Runs `effect` with the events of `inbox`, in transactions of `pool`: both must be the
    /// same database. With the crate's tables in a schema of their own
    /// ([`super::PgDatabase::connect_in_schema`]), the crate's statements name it; `pool`'s
    /// `search_path` is yours.
    pub fn new(inbox: PgInbox, pool: PgPool, effect: E) -> Self {
        let core = Arc::new(Core {
            sql: Statements::new(&inbox),
            inbox,
            pool,
            effect,
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

impl<E: SqlxPgEffect> Core<E> {
    /// Runs user code on `conn`: its error or panic as [`EffectError::Effect`].
    async fn run_effect(
        &self,
        received: &Received,
        conn: &mut PgConnection,
    ) -> Result<(), EffectError> {
        match std::panic::AssertUnwindSafe(self.effect.apply(received, conn))
            .catch_unwind()
            .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(EffectError::Effect(format!("{err:#}"))),
            Err(panic) => Err(EffectError::Effect(panic_text(&*panic))),
        }
    }

    /// Inbox mode: one attempt at an entry the workers handed out, within the database's
    /// answer timeout (see [`Core::bounded`]).
    async fn apply_entry(&self, received: Received) -> Result<(), EffectError> {
        let mut held: Option<PoolConnection<sqlx::Postgres>> = None;
        let attempt = async {
            // The checkout too: the pool pings the connection it hands out.
            let conn = held.insert(self.pool.acquire().await.map_err(db)?);
            self.apply_entry_on(conn, &received).await
        };
        let outcome = self.bounded(attempt).await;
        outcome.unwrap_or_else(|message| {
            if let Some(conn) = held.as_mut() {
                conn.close_on_drop();
            }
            Err(EffectError::Store(StorageError::Database(message)))
        })
    }

    /// Runs `work` (a transaction on a connection of your pool) within the inbox database's
    /// answer timeout; past it, `Err` with why, and the caller closes the connection instead of
    /// handing it back to your pool (on a stalled network its answers would never come).
    async fn bounded<T>(&self, work: impl Future<Output = T>) -> Result<T, String> {
        let timeout = self.inbox.database().answer_timeout();
        tokio::time::timeout(timeout, work).await.map_err(|_| {
            tracing::warn!(
                ?timeout,
                "an exactly-once transaction did not end in time; closing its connection"
            );
            format!("the transaction did not end within {timeout:?}; its connection was closed")
        })
    }

    /// [`Core::apply_entry`] on `conn`.
    async fn apply_entry_on(
        &self,
        conn: &mut PoolConnection<sqlx::Postgres>,
        received: &Received,
    ) -> Result<(), EffectError> {
        let id = received.webhook_id.as_str();
        let mut tx = Connection::begin_with(&mut **conn, BEGIN_MARKED)
            .await
            .map_err(db)?;
        let state = query(&self.sql.lock_entry)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        let state: Option<String> = match state {
            Some(row) => Some(row.try_get(0).map_err(db)?),
            None => None,
        };
        match state.as_deref() {
            None => {
                return Err(EffectError::Store(StorageError::Database(format!(
                    "webhook {id} is not stored in this exactly-once handler's inbox"
                ))));
            }
            Some("done") => return Ok(()),
            Some(_) => {}
        }
        self.run_effect(received, &mut tx).await?;
        let marked = query(&self.sql.mark_done)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        if marked.rows_affected() == 0 {
            return Err(EffectError::Effect(ENDED_BY_EFFECT.into()));
        }
        Ok(())
    }
}

impl<E: SqlxPgEffect> EventHandler for SqlxPgExactlyOnce<E> {
    type Error = String;

    async fn handle(&self, received: Received) -> Result<(), String> {
        self.core
            .apply_entry(received)
            .await
            .map_err(EffectError::into_text)
    }
}

impl<E: SqlxPgEffect> Transactional for SqlxPgExactlyOnce<E> {
    async fn apply_direct(
        &self,
        received: Received,
        signature: [u8; 32],
    ) -> Result<Applied, EffectError> {
        self.core.inbox.prune_if_due(received.received_at).await?;
        self.direct.call(received, signature).await
    }
}

/// A batch's transaction on a connection of the tenant's pool.
type Tx<'c> = sqlx::Transaction<'c, sqlx::Postgres>;

impl<E: SqlxPgEffect> BatchRunner for Core<E> {
    async fn run(
        &self,
        batch: &[Delivery],
    ) -> Result<Vec<Result<Applied, EffectError>>, BatchFailed> {
        let mut held: Option<PoolConnection<sqlx::Postgres>> = None;
        // The whole batch, the checkout (the pool pings the connection it hands out) and the
        // effects included, within the inbox database's answer timeout.
        let run = async {
            let conn = held.insert(
                self.pool
                    .acquire()
                    .await
                    .map_err(|err| batch_failed(&err))?,
            );
            if let Some(outcomes) = self.run_without_savepoints(conn, batch).await? {
                return Ok(outcomes);
            }
            self.run_one_by_one(conn, batch).await
        };
        let outcome = self.bounded(run).await;
        outcome.unwrap_or_else(|message| {
            if let Some(conn) = held.as_mut() {
                conn.close_on_drop();
            }
            Err(BatchFailed {
                message,
                transient: false,
            })
        })
    }
}

impl<E: SqlxPgEffect> Core<E> {
    /// Begins the batch's transaction, takes its locks (other batches of these ids or
    /// signatures, on any replica, wait for this one's end) and sorts its deliveries by what
    /// is recorded, read after the locks.
    async fn begin<'c, 'b>(
        &self,
        conn: &'c mut PoolConnection<sqlx::Postgres>,
        batch: &'b [Delivery],
    ) -> Result<(Tx<'c>, Sorted<'b>), BatchFailed> {
        let failed = |err: sqlx::Error| batch_failed(&err);
        let ids: Vec<&str> = batch
            .iter()
            .map(|delivery| delivery.received.webhook_id.as_str())
            .collect();
        let signatures: Vec<&[u8]> = batch.iter().map(|d| &d.signature[..]).collect();
        let mut tx = Connection::begin_with(&mut **conn, BEGIN_MARKED)
            .await
            .map_err(failed)?;
        let rows = query(&self.sql.lock_and_classify)
            .bind(&ids)
            .bind(&signatures)
            .fetch_all(&mut *tx)
            .await
            .map_err(failed)?;
        let recorded = rows
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get::<Option<String>, _>(1)?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(failed)?;
        Ok((tx, Sorted::of(batch, recorded)?))
    }

    /// Records what is to be recorded (the first statement after the effects: it fails with
    /// `IN_FAILED_SQL_TRANSACTION` when an effect returned `Ok` with a statement of it
    /// failed), then commits; `Ok(false)` when an effect ended the transaction itself (nothing
    /// recorded).
    async fn record_and_commit(
        &self,
        mut tx: Tx<'_>,
        records: &Records<'_>,
    ) -> Result<bool, sqlx::Error> {
        let mut recorded = true;
        if !records.is_empty() {
            recorded = query(&self.sql.record)
                .bind(&records.ids)
                .bind(&records.bodies)
                .bind(&records.received_ats)
                .bind(&records.signatures)
                .bind(&records.signature_ids)
                .bind(&records.seen_ats)
                .bind(&records.firsts)
                .fetch_one(&mut *tx)
                .await?
                .try_get(0)?;
        }
        tx.commit().await?;
        Ok(recorded)
    }

    /// The fast path: the batch's fresh effects one after the other with no savepoint (one
    /// round trip less per effect). When every effect returns `Ok` and the transaction is
    /// still sound, the batch is recorded and committed as it is. When an effect fails (the
    /// rest do not run), or returned `Ok` after a statement of it failed (which aborts the
    /// transaction), the whole transaction is rolled back and `None` says to run the batch
    /// again the careful way, one effect at a time under a savepoint of its own: nothing of
    /// this attempt was committed, so no effect happens twice.
    async fn run_without_savepoints(
        &self,
        conn: &mut PoolConnection<sqlx::Postgres>,
        batch: &[Delivery],
    ) -> Result<Option<Vec<Result<Applied, EffectError>>>, BatchFailed> {
        let failed = |err: sqlx::Error| batch_failed(&err);
        let (mut tx, mut sorted) = self.begin(conn, batch).await?;
        let running = sorted.running(batch);
        for &i in &running {
            if self.run_effect(&batch[i].received, &mut tx).await.is_err() {
                tx.rollback().await.map_err(failed)?;
                return Ok(None);
            }
        }
        sorted.record_done(batch, &running);
        match self.record_and_commit(tx, &sorted.records).await {
            Ok(true) => {}
            // An effect ended the transaction itself: nothing was recorded. The careful run
            // finds out which one (its savepoint is gone) and fails the batch.
            Ok(false) => {
                tracing::warn!("{ENDED_BY_EFFECT}");
                return Ok(None);
            }
            // An effect returned Ok with a statement of it failed: the transaction was aborted
            // (and is rolled back as it is dropped).
            Err(err)
                if err.as_database_error().and_then(|db| db.code()).as_deref()
                    == Some(IN_FAILED_SQL_TRANSACTION) =>
            {
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
        conn: &mut PoolConnection<sqlx::Postgres>,
        batch: &[Delivery],
    ) -> Result<Vec<Result<Applied, EffectError>>, BatchFailed> {
        let failed = |err: sqlx::Error| batch_failed(&err);
        let (mut tx, sorted) = self.begin(conn, batch).await?;
        let Sorted {
            mut outcomes,
            mut records,
            fresh,
        } = sorted;
        let mut savepoint = false;
        for (k, &i) in fresh.iter().enumerate() {
            let delivery = &batch[i];
            if !delivery.wanted() {
                // Its request gave up: nothing of it runs or is recorded.
                continue;
            }
            if !savepoint {
                sqlx::raw_sql(SAVEPOINT_SQL)
                    .execute(&mut *tx)
                    .await
                    .map_err(failed)?;
                savepoint = true;
            }
            let more = k + 1 < fresh.len();
            let outcome = self.run_effect(&delivery.received, &mut tx).await;
            crate::metrics::handler_run("direct", if outcome.is_ok() { "ok" } else { "error" });
            outcomes[i] = match outcome {
                Ok(()) => {
                    let release = if more {
                        RELEASE_AND_SAVEPOINT_SQL
                    } else {
                        RELEASE_SQL
                    };
                    match sqlx::raw_sql(release).execute(&mut *tx).await {
                        Ok(_) => {
                            savepoint = more;
                            records.done(delivery);
                            Ok(Applied::Done)
                        }
                        // The effect returned Ok with a statement of it failed (the
                        // transaction is aborted): it failed, back to its savepoint.
                        Err(err) => {
                            sqlx::raw_sql(ROLLBACK_SQL)
                                .execute(&mut *tx)
                                .await
                                .map_err(failed)?;
                            Err(EffectError::Effect(format!(
                                "a statement of the effect failed: {err}"
                            )))
                        }
                    }
                }
                Err(err) => {
                    sqlx::raw_sql(ROLLBACK_SQL)
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    Err(err)
                }
            };
        }
        if !self.record_and_commit(tx, &records).await.map_err(failed)? {
            return Err(BatchFailed {
                message: ENDED_BY_EFFECT.into(),
                transient: false,
            });
        }
        Ok(outcomes)
    }
}

/// PostgreSQL's code for a statement in an aborted transaction.
const IN_FAILED_SQL_TRANSACTION: &str = "25P02";

/// The savepoint statements of a batch (fixed text: see [`SAVEPOINT`]).
const SAVEPOINT_SQL: &str = "SAVEPOINT svc_effect";
const RELEASE_SQL: &str = "RELEASE SAVEPOINT svc_effect";
const RELEASE_AND_SAVEPOINT_SQL: &str = "RELEASE SAVEPOINT svc_effect; SAVEPOINT svc_effect";
const ROLLBACK_SQL: &str = "ROLLBACK TO SAVEPOINT svc_effect";

#[cfg(test)]
mod tests {
    use super::super::effect_batch::SAVEPOINT;
    use super::*;

    #[test]
    fn the_savepoint_statements_name_the_batch_savepoint() {
        for sql in [
            SAVEPOINT_SQL,
            RELEASE_SQL,
            RELEASE_AND_SAVEPOINT_SQL,
            ROLLBACK_SQL,
        ] {
            assert!(sql.ends_with(SAVEPOINT), "{sql}");
        }
    }
}
