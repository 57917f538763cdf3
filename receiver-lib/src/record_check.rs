//! What a handler run recorded, so that the integrations acknowledge a delivery only when the
//! record its handler made was committed.
//!
//! A recorder's `record` marks the delivery's [`RecordCheck`] when it inserts the record
//! (`Fresh`); committing through the recorder (`PgRecorder::commit`, `SqliteRecorder::commit`)
//! confirms it, having checked in the open transaction that the transaction is alive and
//! still holds the record. When the handler returns `Ok` with a record made but not confirmed
//! (it committed the transaction itself), the integration looks the record up outside the
//! transaction before it answers 200 or settles the entry done. PostgreSQL ends a `COMMIT` of
//! a transaction in which a statement failed as a rollback without an error, so a handler
//! that ignored that failure and committed would otherwise be acknowledged with nothing
//! written, and no retry would ever come.

use std::sync::{Arc, Mutex, PoisonError};

use svc_contract::WebhookId;

/// Shared by a delivery's [`crate::Received`] and the integration that handed it out; clones
/// share it.
#[derive(Clone, Default)]
pub(crate) struct RecordCheck(Arc<Mutex<State>>);

#[derive(Default)]
enum State {
    /// No record made in this run.
    #[default]
    Untouched,
    /// A record inserted, its commit not seen: look it up after the handler's `Ok`.
    Unconfirmed(Probe),
    /// Committed through the recorder, which checked the record first.
    Confirmed,
}

/// Where to look a recorded id up, outside the handler's transaction.
#[derive(Clone)]
pub(crate) enum Probe {
    /// In the crate's table on PostgreSQL, through the crate's pool.
    #[cfg(feature = "postgres")]
    Postgres(crate::postgres::RecordProbe),
    /// In the crate's table on PostgreSQL, through your `sqlx` pool (the lookup's statement).
    #[cfg(feature = "sqlx-postgres")]
    Sqlx(sqlx::PgPool, Arc<str>),
    /// In the tenant's SQLite file, on the recorder's read connection.
    #[cfg(feature = "sqlite")]
    Sqlite(crate::sqlite::RecordProbe, std::sync::Arc<std::path::Path>),
}

impl PartialEq for RecordCheck {
    /// Not part of what a delivery is: two copies of one delivery are equal.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RecordCheck {}

impl std::fmt::Debug for RecordCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordCheck").finish_non_exhaustive()
    }
}

impl RecordCheck {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A record was inserted in the handler's transaction; `probe` finds it once committed.
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn recorded(&self, probe: Probe) {
        *self.state() = State::Unconfirmed(probe);
    }

    /// The handler's transaction committed through the recorder, with the record in it.
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn committed(&self) {
        *self.state() = State::Confirmed;
    }

    /// After the handler's `Ok`: an error when it recorded `id` and the record is not
    /// committed (the transaction was rolled back, by the database or by the handler).
    #[cfg_attr(
        not(any(feature = "postgres", feature = "sqlite", feature = "axum")),
        allow(dead_code)
    )]
    // With no store feature there is no probe, so nothing reads `id` or `probe`.
    #[cfg_attr(
        not(any(feature = "postgres", feature = "sqlite")),
        allow(unused_variables)
    )]
    pub(crate) async fn verify(&self, id: &WebhookId) -> Result<(), String> {
        let probe = match &*self.state() {
            State::Unconfirmed(probe) => probe.clone(),
            State::Untouched | State::Confirmed => return Ok(()),
        };
        match probe.committed(id).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!(
                "the handler returned Ok, but the record of {id} it made is not committed: its \
                 transaction was rolled back (a statement in it failed and the database turned \
                 COMMIT into a rollback, or the record was rolled back to a savepoint); not \
                 acknowledged, so it comes back. Commit through the recorder's `commit` to get \
                 this error where it happens"
            )),
            Err(err) => Err(format!(
                "the handler returned Ok, but whether the record of {id} it made is committed \
                 could not be read ({err}); not acknowledged, so it comes back"
            )),
        }
    }
}

impl Probe {
    /// Whether `id` is recorded by a committed transaction.
    #[cfg_attr(
        not(any(feature = "postgres", feature = "sqlite")),
        allow(unused_variables)
    )]
    async fn committed(self, id: &WebhookId) -> Result<bool, String> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(probe) => probe
                .is_recorded(id.as_str())
                .await
                .map_err(|err| err.to_string()),
            #[cfg(feature = "sqlx-postgres")]
            Self::Sqlx(pool, sql) => sqlx::query_scalar::<_, bool>(sqlx::AssertSqlSafe(&*sql))
                .bind(id.as_str())
                .fetch_one(&pool)
                .await
                .map_err(|err| err.to_string()),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(probe, path) => {
                let id = id.as_str().to_owned();
                tokio::task::spawn_blocking(move || probe.is_recorded(&path, &id))
                    .await
                    .map_err(|err| err.to_string())?
                    .map_err(|err| err.to_string())
            }
        }
    }
}
