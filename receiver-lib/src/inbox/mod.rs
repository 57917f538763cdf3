//! The durable inbox's contract, whichever database holds it: the [`Inbox`] trait that the
//! SQLite inbox (feature `sqlite`) and the PostgreSQL inbox (feature `postgres`) implement,
//! the types they share, and the workers that hand entries to user code ([`process_next`],
//! [`run_inbox_workers`]).
//!
//! An inbox stores a verified delivery durably before the sender gets its 2xx (it is also the
//! dedup and replay record of what it stores), hands due entries out one at a time under a
//! lease, and records each outcome: done, retried after a backoff, or set aside as a dead
//! letter after [`InboxPolicy::max_attempts`].

mod worker;

use std::future::Future;
use std::time::Duration;

use crate::{StoreError, TraceParent};
use svc_contract::WebhookId;

pub use worker::{
    Step, process_next, run_inbox_worker, run_inbox_workers, run_inbox_workers_until_drained,
};

/// Retry and retention settings of the inbox. Every field's default is on its line; with all of
/// them, a failing entry is tried 10 times over about 43 minutes before it is set aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboxPolicy {
    /// How long a processed entry (or a discarded dead letter) is kept after it was received,
    /// so that the sender's retry of it is still a duplicate and a replay of it still caught.
    /// Pending and dead entries are never dropped. Default: 24 hours; keep it well past the
    /// sender's retry (about 5 minutes) plus the signature tolerance.
    pub retention: Duration,
    /// Attempts before an entry is set aside as dead: kept, listed by
    /// [`InboxAdmin::dead_letters`], until [`InboxAdmin::requeue_dead_letter`] hands it out again or
    /// [`InboxAdmin::discard_dead_letter`] gives up on it (`svc-cli inbox` does both on the inbox
    /// `svc-cli webhook serve` writes). Default: 10.
    pub max_attempts: u32,
    /// Delay before the first retry; doubles on each failure (5 s, 10 s, 20 s, ...), capped at
    /// one hour. Default: 5 seconds.
    pub first_backoff: Duration,
    /// How long a handed-out entry is reserved for its handler before it is handed out again.
    /// The handler gets 90% of it (270 s by default) and is then cancelled, its attempt
    /// counted as failed. After a crash (the process killed with entries in hand) those entries
    /// wait for the rest of their lease, up to 5 minutes by default, before another worker
    /// (of this process or, on a shared PostgreSQL inbox, of another) takes them; a graceful
    /// shutdown settles them instead. Default: 300 seconds.
    pub lease: Duration,
}

impl Default for InboxPolicy {
    fn default() -> Self {
        Self {
            retention: Duration::from_secs(24 * 3600),
            max_attempts: 10,
            first_backoff: Duration::from_secs(5),
            lease: Duration::from_secs(300),
        }
    }
}

impl InboxPolicy {
    /// The retention in whole seconds.
    pub(crate) fn retention_secs(&self) -> i64 {
        secs(self.retention)
    }

    /// The lease in whole seconds.
    pub(crate) fn lease_secs(&self) -> i64 {
        secs(self.lease)
    }

    /// What settling `entry` with `outcome` at `now` records: the new state and, for an entry
    /// to retry, when it is due again (first backoff doubled per failed attempt, at most 1 h).
    pub(crate) fn settlement(
        &self,
        entry: &InboxEntry,
        outcome: &Result<(), String>,
        now: i64,
    ) -> (Settled, i64) {
        let settled = match outcome {
            Ok(()) => Settled::Done,
            Err(_) if entry.attempt >= self.max_attempts => Settled::Dead,
            Err(_) => Settled::Retrying,
        };
        let shift = entry.attempt.saturating_sub(1).min(20);
        let backoff = secs(self.first_backoff)
            .saturating_mul(1 << shift)
            .min(3600);
        (settled, now.saturating_add(backoff))
    }
}

fn secs(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

/// What storing a verified delivery did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Accepted {
    /// Stored and committed durably: answer 2xx.
    Stored,
    /// Already stored under this id: answer 2xx, store nothing.
    Duplicate,
    /// Its signature is already stored under another id: a replay; reject it.
    Replayed,
}

/// An entry handed out for processing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxEntry {
    /// The delivery's `X-Service-Webhook-Id`.
    pub webhook_id: WebhookId,
    /// The verified raw body.
    pub body: Vec<u8>,
    /// Which attempt this is, from 1.
    pub attempt: u32,
    /// When it was stored (unix seconds).
    pub received_at: i64,
    /// The sender's trace context it arrived with ([`Inbox::accept_traced`]), if any: the
    /// worker's span continues that trace.
    pub traceparent: Option<TraceParent>,
}

/// What happened to an entry after its handler ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settled {
    /// Processed; will not be handed out again.
    Done,
    /// Failed; handed out again after a backoff.
    Retrying,
    /// Failed its last attempt; kept as a dead letter.
    Dead,
}

impl Settled {
    /// The `outcome` of the worker's `webhook_delivery` span.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Retrying => "retrying",
            Self::Dead => "dead",
        }
    }

    /// The state column's value for this outcome.
    #[cfg(feature = "postgres")]
    pub(crate) fn state(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Retrying => "pending",
            Self::Dead => "dead",
        }
    }
}

/// How many entries an inbox holds in each state, at one moment ([`Inbox::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct InboxStats {
    /// Entries waiting to be handed out: due now, backing off after a failure, or held by the
    /// lease of a process that stopped without settling them.
    pub pending: u64,
    /// Entries handed out by this process (any clone of this inbox) and not yet settled.
    pub leased: u64,
    /// Dead letters: failed on their last attempt, kept until requeued or discarded.
    pub dead: u64,
    /// When the oldest entry not yet processed (pending or leased) was received (unix
    /// seconds); `None` when there is none.
    pub oldest_pending_received_at: Option<i64>,
}

impl InboxStats {
    /// How long ago, at `now`, the oldest entry not yet processed was received, in seconds
    /// (0 when there is none).
    pub fn oldest_pending_age_secs(&self, now: i64) -> u64 {
        self.oldest_pending_received_at
            .map_or(0, |at| u64::try_from(now.saturating_sub(at)).unwrap_or(0))
    }
}

/// An inbox entry set aside after its last attempt failed; kept until it is requeued or
/// discarded. Non-exhaustive: built by the inbox only.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The delivery's `X-Service-Webhook-Id`.
    pub webhook_id: WebhookId,
    /// How many times it was handed to user code.
    pub attempts: u32,
    /// The handler's error on the last attempt.
    pub last_error: String,
    /// When it was received (unix seconds).
    pub received_at: i64,
    /// The verified raw body (a `call.scored` event), to see which call it was about.
    pub body: Vec<u8>,
}

impl DeadLetter {
    /// A dead letter read back from a store; `None` for an id that is not a webhook id (the
    /// store was edited by hand).
    pub(crate) fn read(
        id: &str,
        attempts: i64,
        last_error: String,
        received_at: i64,
        body: Vec<u8>,
    ) -> Option<Self> {
        Some(Self {
            webhook_id: WebhookId::parse(id.as_bytes()).ok()?,
            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
            last_error,
            received_at,
            body,
        })
    }
}

/// A durable inbox: what the inbox route stores into and the workers hand out from. Cheap to
/// clone (a handle on the database); every clone is the same inbox. What tools and operators
/// do besides (counting, dead letters) is [`InboxAdmin`].
///
/// Implementations keep these guarantees: `accept` answers only once the entry is durable; of
/// any number of concurrent `accept`s of one id exactly one is [`Accepted::Stored`]; a
/// signature stored under one id is [`Accepted::Replayed`] under another for the retention;
/// `next_due` hands an entry to one caller at a time, again only once its lease ran out.
pub trait Inbox: Clone + Send + Sync + 'static {
    /// The policy in force.
    fn policy(&self) -> InboxPolicy;

    /// Stores a verified delivery durably, answering once it is committed.
    ///
    /// # Errors
    /// [`StoreError`] when it could not be stored; answer non-2xx so the sender retries.
    fn accept(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        body: &[u8],
        now: i64,
    ) -> impl Future<Output = Result<Accepted, StoreError>> + Send;

    /// [`Inbox::accept`], keeping the sender's trace context with a stored entry
    /// ([`InboxEntry::traceparent`]) so that the worker's span joins the sender's trace; the
    /// inbox route calls it. The crate's inboxes keep it; the default forgets it (an inbox of
    /// your own stays correct, its workers' spans just start traces of their own).
    ///
    /// # Errors
    /// As [`Inbox::accept`].
    fn accept_traced(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        body: &[u8],
        traceparent: Option<&TraceParent>,
        now: i64,
    ) -> impl Future<Output = Result<Accepted, StoreError>> + Send {
        let _ = traceparent;
        self.accept(id, signature, body, now)
    }

    /// Hands out the oldest due entry, reserving it for the lease; `None` when nothing is due.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    fn next_due(
        &self,
        now: i64,
    ) -> impl Future<Output = Result<Option<InboxEntry>, StoreError>> + Send;

    /// Records the outcome of an entry's handler.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails (the entry then comes back after its lease).
    fn settle(
        &self,
        entry: &InboxEntry,
        outcome: Result<(), String>,
        now: i64,
    ) -> impl Future<Output = Result<Settled, StoreError>> + Send;

    /// Waits until a delivery is stored through this handle (or a clone) or `max_wait`
    /// passes; workers use it between polls.
    fn wait_for_arrival(&self, max_wait: Duration) -> impl Future<Output = ()> + Send;

    /// A readiness probe: whether the inbox can store a delivery now (it waits as a delivery
    /// would; bound the wait with a timeout of your own).
    ///
    /// # Errors
    /// [`StoreError`] when the inbox cannot be written to.
    fn check_writable(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// How many entries wait, are in this process's hands and are dead, and the oldest not
    /// yet processed.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    fn stats(&self) -> impl Future<Output = Result<InboxStats, StoreError>> + Send;

    /// Reads [`Inbox::stats`] and sets the inbox gauges of [`crate::metrics`] from it (feature
    /// `metrics`), the age of the oldest pending entry counted at `now` (unix seconds). The
    /// inbox workers call it every few seconds; call it before rendering a scrape to serve
    /// figures of that moment.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails (the gauges keep their last values).
    #[cfg(feature = "metrics")]
    fn publish_metrics(
        &self,
        now: i64,
    ) -> impl Future<Output = Result<InboxStats, StoreError>> + Send {
        async move {
            let stats = self.stats().await?;
            crate::metrics::inbox_gauges(
                stats.pending,
                stats.leased,
                stats.dead,
                stats.oldest_pending_age_secs(now),
            );
            Ok(stats)
        }
    }
}

/// What tools, tests and operators do with a durable inbox besides storing and handing out:
/// look an id up, count entries by state, and handle dead letters. The workers need none of it.
pub trait InboxAdmin: Inbox {
    /// Whether a delivery with this id is stored (in any state).
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    fn contains(&self, id: &WebhookId) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Counts entries by state: (pending, done, dead).
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    fn counts(&self) -> impl Future<Output = Result<(u64, u64, u64), StoreError>> + Send;

    /// The dead entries (failed on their last attempt), oldest first.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    fn dead_letters(&self) -> impl Future<Output = Result<Vec<DeadLetter>, StoreError>> + Send;

    /// Hands a dead entry out again, as a new entry due at `now` with its attempts reset (after
    /// the cause of its failures was fixed). Returns false when `id` is not a dead entry.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    fn requeue_dead_letter(
        &self,
        id: &WebhookId,
        now: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Hands every dead entry out again (see [`InboxAdmin::requeue_dead_letter`]); returns how
    /// many.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    fn requeue_all_dead_letters(
        &self,
        now: i64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Gives up on a dead entry: it counts as done from now on (kept, like any processed
    /// entry, for the retention, so its id stays a duplicate). Returns false when `id` is not
    /// a dead entry.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    fn discard_dead_letter(
        &self,
        id: &WebhookId,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}
