//! [`PgRecorder`]: records a verified delivery in a transaction of yours on PostgreSQL
//! (`tokio-postgres`, or `sqlx` with the feature `sqlx-postgres`), for exactly-once effects
//! (see [`crate::exactly_once`]).

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::types::Type;

use super::{PgDatabase, PgError};
use svc_contract::Clock;

use crate::exactly_once::{Recorded, Retention};
use crate::handler::Received;

/// Records deliveries in your transactions, in the crate's table `webhook_recorded` of a
/// [`PgDatabase`] (your database: the crate's tables may sit in a schema of their own,
/// [`PgDatabase::connect_in_schema`]). Cheap to clone. Made by [`PgDatabase::recorder`].
///
/// ```rust,ignore
/// let tx = client.transaction().await?;              // your connection, your pool
/// if recorder.record(&tx, &received).await?.is_fresh() {
///     tx.execute("INSERT INTO scores (call_id) VALUES ($1)", &[&received.event.call_id]).await?;
/// }
/// tx.commit().await?;
/// ```
///
/// Recorded ids are forgotten after the retention ([`DEFAULT_RECORD_RETENTION`], a day, by
/// default): at most once a minute, a `record` call has the crate's own pool delete the older
/// ones, outside your transaction.
///
/// [`DEFAULT_RECORD_RETENTION`]: crate::exactly_once::DEFAULT_RECORD_RETENTION
#[derive(Clone)]
pub struct PgRecorder {
    /// The insert, its table named with the crate's schema.
    insert: Arc<str>,
    database: PgDatabase,
    retention: Retention,
}

impl std::fmt::Debug for PgRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgRecorder")
            .field("database", &self.database)
            .field("retention", &self.retention.period())
            .finish_non_exhaustive()
    }
}

impl PgRecorder {
    pub(super) fn new(database: PgDatabase) -> Self {
        let insert = format!(
            "INSERT INTO {} (id, recorded_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING \
             RETURNING TRUE",
            database.qualified("webhook_recorded")
        );
        Self {
            insert: insert.into(),
            database,
            retention: Retention::default(),
        }
    }

    /// The same recorder, reading "now" (when a delivery is recorded, and the retention's
    /// cutoff) from `clock` instead of the system clock.
    #[must_use]
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.retention = self.retention.with_clock(clock);
        self
    }

    /// The same recorder, keeping recorded ids for `retention` instead of a day. Keep it past
    /// every way a delivery can come back: the sender's retry (about 5 minutes), the inbox's
    /// retries and leases, and dead letters you requeue.
    #[must_use]
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = self.retention.with_period(retention);
        self
    }

    /// Records `received` in `tx`: [`Recorded::Fresh`] when no committed transaction recorded
    /// it (write its effect in `tx`, then commit), [`Recorded::Duplicate`] when one did (write
    /// nothing). Waits while another open transaction holds a record of the same id, and
    /// answers after it ended. One round trip: `tx` is a `tokio_postgres::Transaction`, or a
    /// `deadpool_postgres::Transaction`, whose connection's statement cache then keeps the
    /// statement prepared (parsed and planned once per connection).
    ///
    /// # Errors
    /// The driver's error, its text with the server's SQLSTATE and message: a serialization
    /// failure (SQLSTATE 40001, [`PgError::is_serialization_failure`]) under `REPEATABLE READ`
    /// or `SERIALIZABLE` when another transaction recorded the id after `tx`'s snapshot; the
    /// crate's table missing when the database was not opened through [`PgDatabase`].
    pub async fn record<T: PgTransaction>(
        &self,
        tx: &T,
        received: &Received,
    ) -> Result<Recorded, PgError> {
        let now = self.retention.now();
        let inserted = tx
            .insert_row(&self.insert, received.webhook_id.as_str(), now)
            .await?;
        self.prune_if_due(now);
        Ok(if inserted {
            Recorded::Fresh
        } else {
            Recorded::Duplicate
        })
    }

    /// [`PgRecorder::record`] in a transaction of your `sqlx` pool (feature `sqlx-postgres`).
    ///
    /// # Errors
    /// As [`PgRecorder::record`], as the `sqlx` error.
    #[cfg(feature = "sqlx-postgres")]
    pub async fn record_sqlx(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
        received: &Received,
    ) -> Result<Recorded, sqlx::Error> {
        use sqlx::Row;
        let now = self.retention.now();
        let inserted = sqlx::query(sqlx::AssertSqlSafe(&*self.insert))
            .bind(received.webhook_id.as_str())
            .bind(now)
            .fetch_optional(&mut **tx)
            .await?;
        self.prune_if_due(now);
        // The row, when there is one, holds TRUE: read it so a changed statement is noticed.
        Ok(match inserted {
            Some(row) if row.try_get::<bool, _>(0)? => Recorded::Fresh,
            _ => Recorded::Duplicate,
        })
    }

    /// Forgets ids recorded before the retention, on the crate's pool (outside any
    /// transaction of yours), at most once a minute.
    fn prune_if_due(&self, now: i64) {
        let Some(cutoff) = self.retention.prune_cutoff(now) else {
            return;
        };
        let database = self.database.clone();
        tokio::spawn(async move {
            if let Err(err) = database.forget_recorded_before(cutoff).await {
                tracing::warn!(error = %err, "pruning recorded webhook ids failed; tried again in a minute");
            }
        });
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for tokio_postgres::Transaction<'_> {}
    impl Sealed for deadpool_postgres::Transaction<'_> {}
}

/// A transaction [`PgRecorder::record`] writes in: `tokio_postgres::Transaction`, and
/// `deadpool_postgres::Transaction` (with its connection's statement cache). Implemented by
/// this crate only.
pub trait PgTransaction: sealed::Sealed + Sync {
    /// Runs the record's insert with the id and time; whether it inserted its row.
    #[doc(hidden)]
    fn insert_row(
        &self,
        sql: &str,
        id: &str,
        at: i64,
    ) -> impl std::future::Future<Output = Result<bool, tokio_postgres::Error>> + Send;
}

impl PgTransaction for tokio_postgres::Transaction<'_> {
    async fn insert_row(
        &self,
        sql: &str,
        id: &str,
        at: i64,
    ) -> Result<bool, tokio_postgres::Error> {
        // An unnamed statement with its types given: one round trip, no cache needed.
        let row = self
            .query_typed_opt(sql, &[(&id, Type::TEXT), (&at, Type::INT8)])
            .await?;
        Ok(row.is_some())
    }
}

impl PgTransaction for deadpool_postgres::Transaction<'_> {
    async fn insert_row(
        &self,
        sql: &str,
        id: &str,
        at: i64,
    ) -> Result<bool, tokio_postgres::Error> {
        let statement = self.prepare_cached(sql).await?;
        Ok(self.query_opt(&statement, &[&id, &at]).await?.is_some())
    }
}
