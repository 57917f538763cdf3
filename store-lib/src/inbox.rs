//! The inbox of `webhook serve` in the store: `svc-receiver`'s SQLite inbox in the store's
//! file, or its PostgreSQL inbox in the store's database (the queue every replica shares).

use std::future::Future;
use std::time::Duration;

use svc_contract::WebhookId;
use svc_receiver::inbox::{
    Accepted, DeadLetter, Inbox, InboxAdmin, InboxEntry, InboxPolicy, InboxStats, Settled,
};
#[cfg(feature = "postgres")]
use svc_receiver::postgres::{PgDatabase, PgInbox};
use svc_receiver::sqlite::SqliteInbox;
use svc_receiver::{StoreError, TraceParent};

use super::{Store, StoreLocation};

/// The inbox beside a store; cheap to clone.
#[derive(Debug, Clone)]
pub enum StoreInbox {
    /// In the store's SQLite file.
    Sqlite(SqliteInbox),
    /// In the store's PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres(PgInbox),
}

/// Connections the receiver's PostgreSQL inbox opens at most: one per request in flight,
/// beyond which requests wait a little.
#[cfg(feature = "postgres")]
const MAX_CONNECTIONS: usize = 16;

impl StoreInbox {
    /// Opens the inbox at `location` (which should hold a store already) with `policy`; on
    /// PostgreSQL, its statements wait for answers at most the location's answer timeout
    /// ([`StoreLocation::with_answer_timeout`]).
    ///
    /// # Errors
    /// The inbox's tables cannot be created or the database reached.
    pub async fn open(location: &StoreLocation, policy: InboxPolicy) -> Result<Self, StoreError> {
        match location {
            StoreLocation::File(path) => SqliteInbox::open(path, policy).map(Self::Sqlite),
            #[cfg(feature = "postgres")]
            StoreLocation::Postgres(url) => {
                let database = PgDatabase::connect_with(url.expose(), MAX_CONNECTIONS)
                    .await?
                    .with_answer_timeout(url.answer_timeout());
                Ok(Self::Postgres(PgInbox::new(database, policy)))
            }
            #[cfg(not(feature = "postgres"))]
            StoreLocation::Postgres(_) => Err(StoreError::Config(format!(
                "{location} is a PostgreSQL store, and this build has no PostgreSQL support \
                 (svc-store's feature `postgres`)"
            ))),
        }
    }

    /// Opens the inbox beside `store` (as [`StoreInbox::open`] at its location); on
    /// PostgreSQL on the store's own pool of connections, so that the store's writes and the
    /// inbox's requests share one set of connections (and one answer timeout).
    ///
    /// # Errors
    /// The inbox's tables cannot be created or the database reached.
    pub async fn open_beside(store: &Store, policy: InboxPolicy) -> Result<Self, StoreError> {
        #[cfg(feature = "postgres")]
        if let Some(pool) = store.postgres_pool() {
            let database = PgDatabase::on_pool(pool.clone()).await?;
            return Ok(Self::Postgres(PgInbox::new(database, policy)));
        }
        Self::open(store.location(), policy).await
    }
}

/// Calls the same method on whichever inbox this is.
#[cfg(feature = "postgres")]
macro_rules! each {
    ($self:ident, $inbox:ident => $call:expr) => {
        match $self {
            StoreInbox::Sqlite($inbox) => futures_util::future::Either::Left($call),
            StoreInbox::Postgres($inbox) => futures_util::future::Either::Right($call),
        }
    };
}

/// Calls the method on the inbox (SQLite is the only one without the feature `postgres`).
#[cfg(not(feature = "postgres"))]
macro_rules! each {
    ($self:ident, $inbox:ident => $call:expr) => {
        match $self {
            StoreInbox::Sqlite($inbox) => $call,
        }
    };
}

impl Inbox for StoreInbox {
    fn policy(&self) -> InboxPolicy {
        match self {
            Self::Sqlite(inbox) => Inbox::policy(inbox),
            #[cfg(feature = "postgres")]
            Self::Postgres(inbox) => inbox.policy(),
        }
    }

    fn accept(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        body: &[u8],
        now: i64,
    ) -> impl Future<Output = Result<Accepted, StoreError>> + Send {
        each!(self, inbox => Inbox::accept(inbox, id, signature, body, now))
    }

    fn accept_traced(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        body: &[u8],
        traceparent: Option<&TraceParent>,
        now: i64,
    ) -> impl Future<Output = Result<Accepted, StoreError>> + Send {
        each!(self, inbox => Inbox::accept_traced(inbox, id, signature, body, traceparent, now))
    }

    fn next_due(
        &self,
        now: i64,
    ) -> impl Future<Output = Result<Option<InboxEntry>, StoreError>> + Send {
        each!(self, inbox => Inbox::next_due(inbox, now))
    }

    fn settle(
        &self,
        entry: &InboxEntry,
        outcome: Result<(), String>,
        now: i64,
    ) -> impl Future<Output = Result<Settled, StoreError>> + Send {
        each!(self, inbox => Inbox::settle(inbox, entry, outcome, now))
    }

    fn wait_for_arrival(&self, max_wait: Duration) -> impl Future<Output = ()> + Send {
        each!(self, inbox => Inbox::wait_for_arrival(inbox, max_wait))
    }

    fn check_writable(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        each!(self, inbox => Inbox::check_writable(inbox))
    }

    fn stats(&self) -> impl Future<Output = Result<InboxStats, StoreError>> + Send {
        each!(self, inbox => Inbox::stats(inbox))
    }
}

impl InboxAdmin for StoreInbox {
    fn contains(&self, id: &WebhookId) -> impl Future<Output = Result<bool, StoreError>> + Send {
        each!(self, inbox => InboxAdmin::contains(inbox, id))
    }

    fn counts(&self) -> impl Future<Output = Result<(u64, u64, u64), StoreError>> + Send {
        each!(self, inbox => InboxAdmin::counts(inbox))
    }

    fn dead_letters(&self) -> impl Future<Output = Result<Vec<DeadLetter>, StoreError>> + Send {
        each!(self, inbox => InboxAdmin::dead_letters(inbox))
    }

    fn requeue_dead_letter(
        &self,
        id: &WebhookId,
        now: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        each!(self, inbox => InboxAdmin::requeue_dead_letter(inbox, id, now))
    }

    fn requeue_all_dead_letters(
        &self,
        now: i64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        each!(self, inbox => InboxAdmin::requeue_all_dead_letters(inbox, now))
    }

    fn discard_dead_letter(
        &self,
        id: &WebhookId,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        each!(self, inbox => InboxAdmin::discard_dead_letter(inbox, id))
    }
}
