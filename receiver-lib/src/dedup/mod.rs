//! Deduplication on `X-Service-Webhook-Id`, and replay protection on the verified signature.
//!
//! The sender retries a failed delivery once, under the same id, about 5 minutes later. A
//! receiver [`DedupStore::claim`]s the id before running its code, then either
//! [`DedupStore::complete`]s it (later copies are [`Claim::Duplicate`]) or
//! [`DedupStore::release`]s it when its code failed (so the retry is processed).
//!
//! The id is not covered by the signature, so a captured delivery could be resent under a new
//! id while its timestamp is still inside the tolerance. Every claim therefore also records the
//! verified signature, and a signature already seen under a *different* id is
//! [`Claim::Replayed`]. Entries are kept for [`DedupPolicy::retention`] (24 h by default), well
//! past the retry delay plus the tolerance and at least twice the tolerance.

mod memory;

use std::future::Future;
use std::time::Duration;

use svc_contract::WebhookId;

use crate::StoreError;

pub use memory::{DEFAULT_CAPACITY, MemoryDedupStore};

/// The answer to a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim {
    /// First time (or the previous claim was released or its lease ran out): process it, then
    /// complete or release it.
    New,
    /// Already processed: do not run user code again; answer 2xx so the sender stops.
    Duplicate,
    /// Another request holds the claim right now: do not process it concurrently.
    InFlight,
    /// The same verified signature was seen under a different id: a replay. Reject it.
    Replayed,
}

/// How long claims live. Every field's default is on its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DedupPolicy {
    /// How long an id and its signature are remembered after the first claim. Keep it well
    /// past the retry delay (about 5 minutes) plus the tolerance, and at least twice the
    /// verifier's tolerance, or replays slip through once forgotten. Default: 24 hours.
    pub retention: Duration,
    /// How long a claim stays in flight before another request may take it over (the first
    /// holder is presumed dead). After a crash with a claim held, the sender's retry (about 5
    /// minutes later) finds the lease expired and is processed. A live but slow run keeps its
    /// claim only this long: keep it longer than the slowest run of user code (direct mode
    /// answers 503 at its deadline, 8 s, but lets user code run on). Default: 60 seconds.
    pub in_flight_lease: Duration,
}

impl Default for DedupPolicy {
    fn default() -> Self {
        Self {
            retention: Duration::from_secs(24 * 3600),
            in_flight_lease: Duration::from_secs(60),
        }
    }
}

impl DedupPolicy {
    pub(crate) fn retention_secs(&self) -> i64 {
        i64::try_from(self.retention.as_secs()).unwrap_or(i64::MAX)
    }

    pub(crate) fn lease_secs(&self) -> i64 {
        i64::try_from(self.in_flight_lease.as_secs()).unwrap_or(i64::MAX)
    }
}

/// Remembers webhook ids and verified signatures. Implementations make `claim` atomic: of any
/// number of concurrent claims of one id, exactly one gets [`Claim::New`].
pub trait DedupStore: Send + Sync + 'static {
    /// Claims `id` for processing at `now` (unix seconds), recording `signature` (the verified
    /// HMAC) for replay protection.
    ///
    /// A signature remembered under another id answers [`Claim::Replayed`], whatever the state
    /// of `id`. A new signature under a remembered id is recorded as well, whatever the answer:
    /// the sender signs each attempt afresh, and a captured retry must not be replayable under
    /// another id either.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot answer; the caller should answer 503.
    fn claim(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        now: i64,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// Marks `id` as processed: later claims answer [`Claim::Duplicate`].
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot record it.
    fn complete(
        &self,
        id: &WebhookId,
        now: i64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Gives up a claim whose processing failed, so the next delivery of `id` is
    /// [`Claim::New`]. The signature stays remembered.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot record it.
    fn release(&self, id: &WebhookId) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// A shared store is a store: one `Arc` can serve several routes and still be read elsewhere
/// (for example [`MemoryDedupStore::len`] for metrics).
impl<T: DedupStore + ?Sized> DedupStore for std::sync::Arc<T> {
    fn claim(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        now: i64,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        (**self).claim(id, signature, now)
    }

    fn complete(
        &self,
        id: &WebhookId,
        now: i64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).complete(id, now)
    }

    fn release(&self, id: &WebhookId) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).release(id)
    }
}
