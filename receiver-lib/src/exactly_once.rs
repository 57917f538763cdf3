//! Exactly once: your code records a verified delivery in **its own** transaction, next to its
//! own writes, and commits both together.
//!
//! ```text
//! begin (your pool, your isolation level)
//!   record(tx, received)  -> Fresh      -> your writes
//!                         -> Duplicate  -> nothing (already committed once)
//! commit
//! ```
//!
//! The record is one row keyed by the webhook id in a table of the crate's (`webhook_recorded`),
//! written in your transaction: it commits with your writes or rolls back with them. So a
//! delivery's writes are committed at most once, whatever crashes, retries, duplicates,
//! replicas or lost answers happen around them; and since the integrations run your code until
//! it succeeds (the inbox retries, the sender retries a direct delivery once), at least once.
//!
//! Concurrent transactions recording one id (two replicas, two copies of one delivery) wait on
//! the row's unique key, as for any insert: the first to commit gets [`Recorded::Fresh`], the
//! others [`Recorded::Duplicate`] once it has committed, or `Fresh` if it rolled back. Nothing
//! else is shared between deliveries: your transaction holds your code's statements and this
//! one row, nobody else's. Your savepoints, `ROLLBACK`, `SET LOCAL`, isolation level and
//! statement cache are yours; the rule is only that the record and the writes it guards commit
//! or roll back together (record in the same transaction, outside any savepoint you roll back
//! on its own).
//!
//! Under `REPEATABLE READ` or `SERIALIZABLE`, a transaction that records an id another
//! transaction committed after its snapshot was taken fails with a serialization failure
//! (SQLSTATE 40001), as any write conflict does there: roll back and run it again (it then
//! finds the delivery recorded), or answer with an error and let the inbox or the sender retry.
//!
//! The drivers (each a few lines over one `INSERT … ON CONFLICT DO NOTHING`):
//! - `svc_receiver::postgres::PgRecorder::record` for a `tokio_postgres::Transaction` (a
//!   `deadpool_postgres::Transaction` derefs to one), and `record_sqlx` for a `sqlx`
//!   PostgreSQL transaction (feature `sqlx-postgres`);
//! - `svc_receiver::sqlite::SqliteRecorder::record` for a `rusqlite` connection inside a
//!   transaction.
//!
//! Both modes use it the same way, from a handler of your own:
//! - direct mode (`svc_receiver::axum::webhook_route`): the route claims the id in a dedup
//!   store (which also catches replays, and remembers the signature even when your code fails),
//!   runs your handler and answers 200 once it returns `Ok`, that is after your commit;
//! - inbox mode (`inbox::run_inbox_workers_until_drained`): a worker hands your handler the
//!   stored delivery, and marks the entry done after your handler returns `Ok`. If the process
//!   dies in between, the entry is handed out again and `record` answers `Duplicate`.

use std::sync::Arc;
use std::time::Duration;

use svc_contract::{Clock, SystemClock};

use crate::pruner::Pruner;

/// What recording a delivery in your transaction found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "run your writes only for a Fresh delivery"]
pub enum Recorded {
    /// Recorded now, in your transaction: write its effect there, then commit both.
    Fresh,
    /// Already recorded by a committed transaction: its effect is written; write nothing.
    Duplicate,
}

impl Recorded {
    /// Whether the delivery is new (its effect is still to be written).
    pub fn is_fresh(self) -> bool {
        self == Self::Fresh
    }
}

/// How long recorded ids are kept by default: a day, as the inbox and the dedup store keep
/// theirs, well past the sender's retry (about 5 minutes) and the inbox's retries (about 43
/// minutes with the default policy).
pub const DEFAULT_RECORD_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// What the recorders (`PgRecorder`, `SqliteRecorder`) share: the clock that says "now" for a
/// record's time and the retention's cutoff, how long recorded ids are kept
/// ([`DEFAULT_RECORD_RETENTION`] unless set), and the gate that lets a prune through at most
/// once a minute. Cheap to clone; clones share the gate.
#[derive(Clone)]
pub(crate) struct Retention {
    clock: Arc<dyn Clock>,
    period: Duration,
    pruner: Arc<Pruner>,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            period: DEFAULT_RECORD_RETENTION,
            pruner: Arc::default(),
        }
    }
}

impl Retention {
    /// The same, reading "now" from `clock`.
    pub(crate) fn with_clock(self, clock: impl Clock) -> Self {
        Self {
            clock: Arc::new(clock),
            ..self
        }
    }

    /// The same, keeping recorded ids for `period`.
    pub(crate) fn with_period(self, period: Duration) -> Self {
        Self { period, ..self }
    }

    /// How long recorded ids are kept.
    pub(crate) fn period(&self) -> Duration {
        self.period
    }

    /// Now, by the clock.
    #[cfg(feature = "sqlite")]
    pub(crate) fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Whether a prune is due now (the last one a minute or more before, by the clock): a
    /// rate limit only; what is pruned is the recorder's to say.
    #[cfg(feature = "postgres")]
    pub(crate) fn prune_due(&self) -> bool {
        self.pruner.due(self.clock.now())
    }

    /// When a prune is due at `now` (the last one a minute or more before), the cutoff to
    /// forget ids recorded before; `None` otherwise.
    #[cfg(feature = "sqlite")]
    pub(crate) fn prune_cutoff(&self, now: i64) -> Option<i64> {
        self.pruner
            .due(now)
            .then(|| now.saturating_sub(i64::try_from(self.period.as_secs()).unwrap_or(i64::MAX)))
    }
}
