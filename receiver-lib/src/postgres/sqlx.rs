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
use sqlx::{PgConnection, PgPool, Row};

use super::PgInbox;
use super::exactly_once::Statements;
use crate::dedup::StoreError;
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

/// Runs a [`SqlxPgEffect`] exactly once per event in a transaction of your `sqlx` pool; cheap
/// to clone. Use it as the handler of the workers of the inbox it was built on (inbox mode), or
/// in `svc_receiver::axum::exactly_once_route` (direct mode).
pub struct SqlxPgExactlyOnce<E> {
    inbox: PgInbox,
    pool: PgPool,
    effect: Arc<E>,
    sql: Arc<Statements>,
}

impl<E> Clone for SqlxPgExactlyOnce<E> {
    fn clone(&self) -> Self {
        Self {
            inbox: self.inbox.clone(),
            pool: self.pool.clone(),
            effect: Arc::clone(&self.effect),
            sql: Arc::clone(&self.sql),
        }
    }
}

impl<E> std::fmt::Debug for SqlxPgExactlyOnce<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlxPgExactlyOnce")
            .field("inbox", &self.inbox)
            .finish_non_exhaustive()
    }
}

/// One of the crate's statements (built once from its fixed text and the validated schema
/// name; every value is a bind parameter).
fn query(sql: &str) -> sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(sqlx::AssertSqlSafe(sql))
}

fn db(err: sqlx::Error) -> EffectError {
    EffectError::Store(StoreError::Database(err.to_string()))
}

impl<E: SqlxPgEffect> SqlxPgExactlyOnce<E> {
    /// Runs `effect` with the events of `inbox`, in transactions of `pool`: both must be the
    /// same database. With the crate's tables in a schema of their own
    /// ([`super::PgDatabase::connect_in_schema`]), the crate's statements name it; `pool`'s
    /// `search_path` is yours.
    pub fn new(inbox: PgInbox, pool: PgPool, effect: E) -> Self {
        Self {
            sql: Arc::new(Statements::new(&inbox)),
            inbox,
            pool,
            effect: Arc::new(effect),
        }
    }

    /// The inbox it marks events done in.
    pub fn inbox(&self) -> &PgInbox {
        &self.inbox
    }

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

    /// Inbox mode: one attempt at an entry the workers handed out.
    async fn apply_entry(&self, received: Received) -> Result<(), EffectError> {
        let id = received.webhook_id.as_str();
        let mut tx = self.pool.begin().await.map_err(db)?;
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
                return Err(EffectError::Store(StoreError::Database(format!(
                    "webhook {id} is not stored in this exactly-once handler's inbox"
                ))));
            }
            Some("done") => return Ok(()),
            Some(_) => {}
        }
        self.run_effect(&received, &mut tx).await?;
        query(&self.sql.mark_done)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)
    }
}

impl<E: SqlxPgEffect> EventHandler for SqlxPgExactlyOnce<E> {
    type Error = String;

    async fn handle(&self, received: Received) -> Result<(), String> {
        self.apply_entry(received)
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
        let now = received.received_at;
        self.inbox.prune_if_due(now).await?;
        let id = received.webhook_id.as_str();
        let sql = &*self.sql;
        let mut tx = self.pool.begin().await.map_err(db)?;
        query(&sql.lock_keys)
            .bind(id)
            .bind(&signature[..])
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let stored: bool = query(&sql.stored)
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .and_then(|row| row.try_get(0))
            .map_err(db)?;
        let remember = |first: bool| {
            query(&sql.remember_signature)
                .bind(&signature[..])
                .bind(id)
                .bind(now)
                .bind(first)
        };
        if stored {
            remember(false).execute(&mut *tx).await.map_err(db)?;
            tx.commit().await.map_err(db)?;
            return Ok(Applied::Duplicate);
        }
        let remembered = remember(true)
            .execute(&mut *tx)
            .await
            .map_err(db)?
            .rows_affected();
        if remembered == 0 {
            let owner = query(&sql.signature_owner)
                .bind(&signature[..])
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
            if let Some(row) = owner {
                let owner: String = row.try_get(0).map_err(db)?;
                if owner != id {
                    return Ok(Applied::Replayed);
                }
            }
        }
        query(&sql.record_done)
            .bind(id)
            .bind(&*received.body)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let outcome = self.run_effect(&received, &mut tx).await;
        crate::metrics::handler_run("direct", if outcome.is_ok() { "ok" } else { "error" });
        outcome?;
        tx.commit().await.map_err(db)?;
        Ok(Applied::Done)
    }
}
