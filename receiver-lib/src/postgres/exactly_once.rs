//! Exactly-once effects on PostgreSQL: [`PgExactlyOnce`] runs your [`PgEffect`] in a
//! transaction of the inbox's database (your database) and marks the event done in that same
//! transaction, so that your writes and the mark commit together or not at all.
//!
//! - Inbox mode (as the handler of the inbox's workers): the transaction locks the entry's row
//!   (`SELECT … FOR UPDATE`) and runs your code only if the entry is not done yet. While it is
//!   open, no worker of any replica can take the entry (`FOR UPDATE SKIP LOCKED`), and a
//!   worker that took it anyway (its lease ran out under very slow code) waits for the commit
//!   and then finds it done. The worker's own settlement never turns a done entry back.
//! - Direct mode (`svc_receiver::axum::exactly_once_route`): the transaction first takes the
//!   advisory locks of the delivery's id and signature (the ones inbox batches take, in the
//!   same order), so concurrent deliveries of one id on any replicas run one after the other,
//!   and records the delivery as a done inbox entry with its signature: the sender's retry
//!   after a lost answer is a duplicate, a replay of the signature under another id is refused.
//!
//! Your code gets `&tokio_postgres::Transaction` and never commits: the crate commits once it
//! returns `Ok`, and rolls back when it returns `Err`, panics or is cancelled.

use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio_postgres::Transaction;

use super::{PgInbox, db_error};
use crate::dedup::StoreError;
use crate::exactly_once::{Applied, EffectError, Transactional, panic_text};
use crate::handler::{EventHandler, Received};

/// Your code's effect of one event, written in the transaction it is given (never commit or
/// roll back yourself: return `Err` to roll back). Implement it with an `async fn`:
///
/// ```rust,ignore
/// impl PgEffect for Scores {
///     type Error = tokio_postgres::Error;
///     async fn apply(&self, received: &Received, tx: &Transaction<'_>) -> Result<(), Self::Error> {
///         tx.execute("INSERT INTO scores (call_id) VALUES ($1)", &[&received.event.call_id]).await?;
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
        tx: &Transaction<'_>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// The crate's statements in a transaction handed to user code, their names qualified with
/// the crate's schema when it has one.
#[derive(Debug)]
pub(super) struct Statements {
    pub(super) lock_entry: String,
    pub(super) mark_done: String,
    pub(super) lock_keys: String,
    pub(super) stored: String,
    pub(super) remember_signature: String,
    pub(super) signature_owner: String,
    pub(super) record_done: String,
}

impl Statements {
    pub(super) fn new(inbox: &PgInbox) -> Self {
        let database = inbox.database();
        let table = database.qualified("webhook_inbox");
        let signatures = database.qualified("webhook_inbox_signatures");
        Self {
            lock_entry: format!("SELECT state FROM {table} WHERE id = $1 FOR UPDATE"),
            mark_done: format!(
                "UPDATE {table} SET state = 'done', last_error = NULL WHERE id = $1"
            ),
            lock_keys: format!(
                "SELECT {}(ARRAY[$1::TEXT], ARRAY[$2::BYTEA])",
                database.qualified("svc_receiver_lock_keys")
            ),
            stored: format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE id = $1)"),
            remember_signature: format!(
                "INSERT INTO {signatures} (signature, id, seen_at, first) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (signature) DO NOTHING"
            ),
            signature_owner: format!("SELECT id FROM {signatures} WHERE signature = $1"),
            record_done: format!(
                "INSERT INTO {table} (id, body, received_at, state, due_at)
                 VALUES ($1, $2, $3, 'done', $3)"
            ),
        }
    }
}

/// Runs a [`PgEffect`] exactly once per event, in your database's transaction (see the
/// module docs); cheap to clone. Use it as the handler of the workers of the inbox it was
/// built on (inbox mode), or in `svc_receiver::axum::exactly_once_route` (direct mode).
pub struct PgExactlyOnce<E> {
    inbox: PgInbox,
    effect: Arc<E>,
    sql: Arc<Statements>,
}

impl<E> Clone for PgExactlyOnce<E> {
    fn clone(&self) -> Self {
        Self {
            inbox: self.inbox.clone(),
            effect: Arc::clone(&self.effect),
            sql: Arc::clone(&self.sql),
        }
    }
}

impl<E> std::fmt::Debug for PgExactlyOnce<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgExactlyOnce")
            .field("inbox", &self.inbox)
            .finish_non_exhaustive()
    }
}

impl<E: PgEffect> PgExactlyOnce<E> {
    /// Runs `effect` with the events of `inbox`, whose database is yours: the transaction
    /// comes from it ([`super::PgDatabase::connect_in_schema`] keeps the crate's tables in a
    /// schema of their own).
    pub fn new(inbox: PgInbox, effect: E) -> Self {
        Self {
            sql: Arc::new(Statements::new(&inbox)),
            inbox,
            effect: Arc::new(effect),
        }
    }

    /// The inbox it marks events done in.
    pub fn inbox(&self) -> &PgInbox {
        &self.inbox
    }

    /// Inbox mode: one attempt at an entry the workers handed out.
    async fn apply_entry(&self, received: Received) -> Result<(), EffectError> {
        let id = received.webhook_id.as_str();
        let mut client = self.inbox.database().user_client().await?;
        let tx = client.transaction().await.map_err(|e| db_error(&e))?;
        let state = tx
            .query_opt(&self.sql.lock_entry, &[&id])
            .await
            .map_err(|e| db_error(&e))?;
        match state.as_ref().map(|row| row.get::<_, &str>(0)) {
            None => {
                return Err(EffectError::Store(StoreError::Database(format!(
                    "webhook {id} is not stored in this exactly-once handler's inbox"
                ))));
            }
            // Done by an earlier run whose settlement was lost: nothing more to do.
            Some("done") => return Ok(()),
            Some(_) => {}
        }
        self.run_effect(&received, &tx).await?;
        tx.execute(&self.sql.mark_done, &[&id])
            .await
            .map_err(|e| db_error(&e))?;
        tx.commit().await.map_err(|e| db_error(&e))?;
        Ok(())
    }

    /// Runs user code in `tx`: its error or panic as [`EffectError::Effect`].
    async fn run_effect(
        &self,
        received: &Received,
        tx: &Transaction<'_>,
    ) -> Result<(), EffectError> {
        match std::panic::AssertUnwindSafe(self.effect.apply(received, tx))
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
        self.apply_entry(received)
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
        let now = received.received_at;
        self.inbox.prune_if_due(now).await?;
        let id = received.webhook_id.as_str();
        let sql = &*self.sql;
        let mut client = self.inbox.database().user_client().await?;
        let tx = client.transaction().await.map_err(|e| db_error(&e))?;
        let db = |e: tokio_postgres::Error| EffectError::Store(db_error(&e));
        // Concurrent deliveries of this id or signature, on any replica, wait here for
        // this transaction to end (and inbox batches with them, in one lock order).
        tx.execute(&sql.lock_keys, &[&id, &&signature[..]])
            .await
            .map_err(db)?;
        let stored: bool = tx.query_one(&sql.stored, &[&id]).await.map_err(db)?.get(0);
        if stored {
            // Another attempt of a recorded delivery: remember its signature too.
            tx.execute(
                &sql.remember_signature,
                &[&&signature[..], &id, &now, &false],
            )
            .await
            .map_err(db)?;
            tx.commit().await.map_err(db)?;
            return Ok(Applied::Duplicate);
        }
        let remembered = tx
            .execute(
                &sql.remember_signature,
                &[&&signature[..], &id, &now, &true],
            )
            .await
            .map_err(db)?;
        if remembered == 0 {
            let owner = tx
                .query_opt(&sql.signature_owner, &[&&signature[..]])
                .await
                .map_err(db)?;
            if owner.is_some_and(|row| row.get::<_, &str>(0) != id) {
                return Ok(Applied::Replayed);
            }
        }
        tx.execute(&sql.record_done, &[&id, &&*received.body, &now])
            .await
            .map_err(db)?;
        let outcome = self.run_effect(&received, &tx).await;
        crate::metrics::handler_run("direct", if outcome.is_ok() { "ok" } else { "error" });
        outcome?;
        tx.commit().await.map_err(db)?;
        Ok(Applied::Done)
    }
}
