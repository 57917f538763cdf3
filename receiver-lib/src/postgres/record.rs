//! [`PgRecorder`]: records a verified delivery in a transaction of yours on PostgreSQL
//! (`tokio-postgres`, `deadpool-postgres`, or `sqlx` with the feature `sqlx-postgres`), and
//! commits it, for exactly-once effects (see [`crate::exactly_once`]).

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::types::Type;

use super::PgDatabase;
use super::batch::{BatchStatement, Batcher};
use crate::StoreError;
use svc_postgres::PgError;

use crate::exactly_once::{Recorded, Retention};
use crate::handler::Received;
use crate::record_check::Probe;

/// Records deliveries in your transactions, in the crate's table `webhook_recorded` of a
/// [`PgDatabase`] (your database: the crate's tables may sit in a schema of their own,
/// [`PgDatabase::connect_in_schema`]), and commits those transactions. Cheap to clone. Made by
/// [`PgDatabase::recorder`].
///
/// ```rust,ignore
/// let tx = client.transaction().await?;              // your connection, your pool
/// if recorder.record(&tx, &received).await?.is_fresh() {
///     tx.execute("INSERT INTO scores (call_id) VALUES ($1)", &[&received.event.call_id]).await?;
/// }
/// tx.commit().await?;
/// ```
///
/// PostgreSQL ends a `COMMIT` of a transaction in which a statement failed (an error your code
/// logged and dropped) as a rollback, and the driver's `commit` answers `Ok`. The route and the
/// inbox workers catch it: after your handler's `Ok`, they look up the record it made (one
/// lookup on the crate's pool serves the deliveries that finish together) and do not
/// acknowledge a delivery whose record is missing. [`PgRecorder::commit`] checks the same
/// inside your transaction, for a handler you run yourself or that wants the error in place,
/// at one more statement per transaction.
///
/// Recorded ids are timed by the database's clock and forgotten after the retention
/// ([`DEFAULT_RECORD_RETENTION`], a day, by default), never while the delivery is still in the
/// inbox (pending, or a dead letter you may requeue): at most once a minute, a `record` call
/// has the crate's own pool delete the older ones, outside your transaction.
///
/// [`DEFAULT_RECORD_RETENTION`]: crate::exactly_once::DEFAULT_RECORD_RETENTION
#[derive(Clone)]
pub struct PgRecorder {
    /// The insert, its table named with the crate's schema.
    insert: Arc<str>,
    /// Whether the transaction holds the record, its table named with the crate's schema.
    holds: Arc<str>,
    /// Where its own statements run: the pruning, and the lookups of records handlers
    /// committed themselves, before their deliveries are acknowledged.
    home: Home,
    retention: Retention,
}

/// Where a recorder's own statements run.
#[derive(Clone)]
enum Home {
    /// The crate's pool, the lookups batched.
    Crate {
        database: PgDatabase,
        probe: RecordProbe,
    },
    /// Your `sqlx` pool, for the crate's tables in `schema` (quoted).
    #[cfg(feature = "sqlx-postgres")]
    Sqlx {
        pool: sqlx::PgPool,
        schema: Arc<str>,
    },
}

impl std::fmt::Debug for PgRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("PgRecorder");
        match &self.home {
            Home::Crate { database, .. } => out.field("database", database),
            #[cfg(feature = "sqlx-postgres")]
            Home::Sqlx { schema, .. } => out.field("sqlx_pool_schema", schema),
        };
        out.field("retention", &self.retention.period())
            .finish_non_exhaustive()
    }
}

impl PgRecorder {
    pub(super) fn new(database: PgDatabase) -> Self {
        let schema = database.schema().to_owned();
        let probe = RecordProbe(Arc::new(Batcher::new(database.clone())));
        Self::at_home(&schema, Home::Crate { database, probe })
    }

    /// A recorder for a tenant whose only pool is `sqlx`'s: the crate's tables are created (or
    /// checked, and refused when another role owns them, as [`PgDatabase`] does) in `schema`
    /// through a connection of `pool`, and the recorder's own statements (the pruning, the
    /// integrations' lookups of records) run on `pool` too. No pool of the crate's is opened:
    /// for direct mode with the in-memory dedup store, the whole receiver then holds no
    /// connection but yours (feature `sqlx-postgres`). `schema` is a plain lowercase
    /// identifier, as for [`PgDatabase::connect_in_schema`]; your connections need not have it
    /// in their `search_path`.
    ///
    /// # Errors
    /// [`StoreError::Config`] for a schema name outside that form; [`StoreError::Database`]
    /// when the tables cannot be created or checked (another role's objects among them).
    #[cfg(feature = "sqlx-postgres")]
    pub async fn on_sqlx(pool: sqlx::PgPool, schema: &str) -> Result<Self, StoreError> {
        super::database::check_schema_name(schema)?;
        let mut conn = pool
            .acquire()
            .await
            .map_err(|err| StoreError::driver(format!("migrating through sqlx: {err}"), err))?;
        let quoted = super::migrate::run(&mut *conn, Some(schema))
            .await
            .map_err(|err| StoreError::database(format!("migrating through sqlx: {err}")))?;
        drop(conn);
        let home = Home::Sqlx {
            pool,
            schema: Arc::from(quoted.as_str()),
        };
        Ok(Self::at_home(&quoted, home))
    }

    /// The recorder of the crate's tables in `schema` (quoted), its own statements at `home`.
    fn at_home(schema: &str, home: Home) -> Self {
        let table = format!("{schema}.webhook_recorded");
        Self {
            // No conflict target: a row of the same id or of the same signature (a replay under
            // another id) makes it a duplicate.
            insert: format!(
                "INSERT INTO {table} (id, signature) VALUES ($1::TEXT, $2::BYTEA) \
                 ON CONFLICT DO NOTHING RETURNING TRUE"
            )
            .into(),
            // The record of this id, or of this signature (a replay recorded a duplicate).
            holds: format!(
                "SELECT EXISTS (SELECT 1 FROM {table} WHERE id = $1::TEXT) \
                 OR EXISTS (SELECT 1 FROM {table} WHERE signature = $2::BYTEA)"
            )
            .into(),
            home,
            retention: Retention::default(),
        }
    }

    /// The same recorder, pacing its prunes (at most one a minute) by `clock` instead of the
    /// system clock. Only the pace: when an id was recorded and which are old enough to
    /// forget is the database's clock's to say, so a replica whose clock runs ahead (or jumps)
    /// forgets nothing early.
    #[must_use]
    pub fn with_clock(mut self, clock: impl svc_contract::Clock) -> Self {
        self.retention = self.retention.with_clock(clock);
        self
    }

    /// The same recorder, keeping recorded ids for `retention` instead of a day. Keep it past
    /// every way a delivery can come back: the sender's retry (about 5 minutes) and the
    /// inbox's retries and leases (a dead letter's record is kept until it is requeued and
    /// handled, whatever its age).
    #[must_use]
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = self.retention.with_period(retention);
        self
    }

    /// Records `received` in `tx`: [`Recorded::Fresh`] when no committed transaction recorded
    /// it (write its effect in `tx`, then [`PgRecorder::commit`]), [`Recorded::Duplicate`]
    /// when one did (write nothing). Waits while another open transaction holds a record of
    /// the same id, and answers after it ended. One round trip: `tx` is a
    /// `tokio_postgres::Transaction`, or a `deadpool_postgres::Transaction`, whose
    /// connection's statement cache then keeps the statement prepared.
    ///
    /// # Errors
    /// The driver's error, its text with the server's SQLSTATE and message: a serialization
    /// failure (SQLSTATE 40001, `PgError::is_serialization_failure`) under `REPEATABLE READ`
    /// or `SERIALIZABLE` when another transaction recorded the id after `tx`'s snapshot; the
    /// crate's table missing when the database was not opened through [`PgDatabase`].
    pub async fn record<T: PgTransaction>(
        &self,
        tx: &T,
        received: &Received,
    ) -> Result<Recorded, PgError> {
        let signature = received.signature.as_ref().map(<[u8; 32]>::as_slice);
        let inserted = tx
            .run_typed(&self.insert, received.webhook_id.as_str(), signature)
            .await?;
        Ok(self.recorded(inserted, received))
    }

    /// Commits `tx` after checking, in it, that it is alive and holds the record of
    /// `received` (made by [`PgRecorder::record`] in it, or committed before by another
    /// transaction, of its id or of its signature, when `record` answered `Duplicate`).
    ///
    /// # Errors
    /// The driver's error when a statement of `tx` failed (SQLSTATE 25P02: the transaction is
    /// aborted, and would have been rolled back by `COMMIT` without an error) or the commit
    /// fails (a serialization failure, say); an error when `tx` does not hold the record (it
    /// was never made, or was rolled back to a savepoint). `tx` is rolled back then.
    pub async fn commit<T: PgTransaction>(
        &self,
        tx: T,
        received: &Received,
    ) -> Result<(), PgError> {
        let signature = received.signature.as_ref().map(<[u8; 32]>::as_slice);
        if !tx
            .run_typed(&self.holds, received.webhook_id.as_str(), signature)
            .await?
        {
            return Err(not_recorded(&received.webhook_id));
        }
        tx.commit_now().await?;
        received.check.committed();
        Ok(())
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
        let inserted = sqlx::query(sqlx::AssertSqlSafe(&*self.insert))
            .bind(received.webhook_id.as_str())
            .bind(received.signature.as_ref().map(<[u8; 32]>::as_slice))
            .fetch_optional(&mut **tx)
            .await?;
        // The row, when there is one, holds TRUE: read it so a changed statement is noticed.
        let inserted = match inserted {
            Some(row) => row.try_get::<bool, _>(0)?,
            None => false,
        };
        Ok(self.recorded(inserted, received))
    }

    /// [`PgRecorder::commit`] for a transaction of your `sqlx` pool (feature `sqlx-postgres`).
    ///
    /// # Errors
    /// As [`PgRecorder::commit`], as the `sqlx` error: a missing record is
    /// `sqlx::Error::InvalidArgument`.
    #[cfg(feature = "sqlx-postgres")]
    pub async fn commit_sqlx(
        &self,
        mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
        received: &Received,
    ) -> Result<(), sqlx::Error> {
        let holds: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(&*self.holds))
            .bind(received.webhook_id.as_str())
            .bind(received.signature.as_ref().map(<[u8; 32]>::as_slice))
            .fetch_one(&mut *tx)
            .await?;
        if !holds {
            return Err(sqlx::Error::InvalidArgument(
                not_recorded(&received.webhook_id).to_string(),
            ));
        }
        tx.commit().await?;
        received.check.committed();
        Ok(())
    }

    /// What a record found, with the delivery's check told of a fresh record and a prune
    /// started when one is due.
    fn recorded(&self, inserted: bool, received: &Received) -> Recorded {
        self.prune_if_due();
        if inserted {
            let probe = match &self.home {
                Home::Crate { probe, .. } => Probe::Postgres(probe.clone()),
                #[cfg(feature = "sqlx-postgres")]
                Home::Sqlx { pool, schema } => Probe::Sqlx(
                    pool.clone(),
                    format!(
                        "SELECT EXISTS (SELECT 1 FROM {schema}.webhook_recorded WHERE id = $1)"
                    )
                    .into(),
                ),
            };
            received.check.recorded(probe);
            Recorded::Fresh
        } else {
            Recorded::Duplicate
        }
    }

    /// Forgets ids recorded before the retention, on the crate's pool (or your `sqlx` pool,
    /// outside any transaction of yours), at most once a minute.
    fn prune_if_due(&self) {
        if !self.retention.prune_due() {
            return;
        }
        let (home, period) = (self.home.clone(), self.retention.period());
        tokio::spawn(async move {
            let forgotten = match home {
                Home::Crate { database, .. } => database.forget_recorded(period).await.map(drop),
                #[cfg(feature = "sqlx-postgres")]
                Home::Sqlx { pool, schema } => sqlx::query(sqlx::AssertSqlSafe(
                    super::database::forget_recorded_sql(&schema),
                ))
                .bind(period.as_secs_f64())
                .execute(&pool)
                .await
                .map(drop)
                .map_err(|err| StoreError::driver(err.to_string(), err)),
            };
            if let Err(err) = forgotten {
                tracing::warn!(error = %err, "pruning recorded webhook ids failed; tried again in a minute");
            }
        });
    }
}

/// A transaction given to [`PgRecorder::commit`] without the record of `id`.
fn not_recorded(id: &svc_contract::WebhookId) -> PgError {
    PgError::other(format!(
        "the transaction does not hold the record of {id}: record the delivery in it \
         (PgRecorder::record) outside any savepoint rolled back on its own; rolled back"
    ))
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for tokio_postgres::Transaction<'_> {}
    impl Sealed for deadpool_postgres::Transaction<'_> {}
}

/// A transaction [`PgRecorder::record`] writes in and [`PgRecorder::commit`] commits:
/// `tokio_postgres::Transaction`, and `deadpool_postgres::Transaction` (with its connection's
/// statement cache). Implemented by this crate only.
pub trait PgTransaction: sealed::Sealed + Sync + Send {
    /// Runs one of the recorder's statements (the webhook id, and the signature or NULL),
    /// answering the boolean of its row (false without a row).
    #[doc(hidden)]
    fn run_typed(
        &self,
        sql: &str,
        id: &str,
        signature: Option<&[u8]>,
    ) -> impl std::future::Future<Output = Result<bool, tokio_postgres::Error>> + Send;

    /// Commits the transaction.
    #[doc(hidden)]
    fn commit_now(
        self,
    ) -> impl std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send;
}

impl PgTransaction for tokio_postgres::Transaction<'_> {
    async fn run_typed(
        &self,
        sql: &str,
        id: &str,
        signature: Option<&[u8]>,
    ) -> Result<bool, tokio_postgres::Error> {
        // An unnamed statement with its types given: one round trip, no cache needed.
        let row = self
            .query_typed_opt(sql, &[(&id, Type::TEXT), (&signature, Type::BYTEA)])
            .await?;
        row.map_or(Ok(false), |row| row.try_get(0))
    }

    async fn commit_now(self) -> Result<(), tokio_postgres::Error> {
        self.commit().await
    }
}

impl PgTransaction for deadpool_postgres::Transaction<'_> {
    async fn run_typed(
        &self,
        sql: &str,
        id: &str,
        signature: Option<&[u8]>,
    ) -> Result<bool, tokio_postgres::Error> {
        let statement = self.prepare_cached(sql).await?;
        let row = self.query_opt(&statement, &[&id, &signature]).await?;
        row.map_or(Ok(false), |row| row.try_get(0))
    }

    async fn commit_now(self) -> Result<(), tokio_postgres::Error> {
        self.commit().await
    }
}

/// Looks recorded ids up on the crate's pool, outside the transactions that recorded them: the
/// integrations' check of a record a handler committed itself. Lookups that arrive together
/// are one statement (the `batch` module), so that under load the check costs a fraction of a
/// round trip per delivery.
#[derive(Clone)]
pub(crate) struct RecordProbe(Arc<Batcher<RecordedMany>>);

impl RecordProbe {
    /// Whether a committed transaction recorded `id`.
    pub(crate) async fn is_recorded(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.0.call(id.to_owned()).await? == "recorded")
    }
}

/// The probe's batched lookup: per id, in order, whether it is recorded.
#[derive(Debug)]
pub(super) struct RecordedMany;

impl BatchStatement for RecordedMany {
    type Row = String;

    // One lookup at a time: the ids that arrive meanwhile wait for the next, so that under load
    // a lookup serves many deliveries (a primary-key read each, no commit to wait for).
    const IN_FLIGHT: usize = 1;

    fn key(row: &String) -> &str {
        row
    }

    async fn run(
        database: &PgDatabase,
        client: &deadpool_postgres::Client,
        rows: &[&String],
    ) -> Result<Vec<String>, tokio_postgres::Error> {
        let statement = client
            .prepare_cached(&database.sql(
                "SELECT CASE WHEN (SELECT TRUE FROM {s}.webhook_recorded r WHERE r.id = d.id)
                        THEN 'recorded' ELSE 'missing' END
                 FROM pg_catalog.unnest($1::TEXT[]) WITH ORDINALITY AS d (id, n) ORDER BY d.n",
            ))
            .await?;
        let ids: Vec<&str> = rows.iter().map(|id| id.as_str()).collect();
        let rows = client.query(&statement, &[&ids]).await?;
        rows.iter().map(|row| row.try_get(0)).collect()
    }
}
