//! An in-memory [`DedupStore`]: bounded, with expiry. Fast and atomic within one process, but
//! forgets everything on restart; use the SQLite store when that matters.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::{Claim, DedupPolicy, DedupStore};
use crate::StoreError;
use svc_contract::WebhookId;

/// Default bound on remembered deliveries.
pub const DEFAULT_CAPACITY: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    InFlight { lease_until: i64 },
    Released,
    Done,
}

#[derive(Debug)]
struct Entry {
    /// Every verified signature seen under this id: the sender signs each attempt afresh, and
    /// each must be remembered, or a captured retry could be replayed under another id.
    signatures: Vec<[u8; 32]>,
    claimed_at: i64,
    state: State,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<WebhookId, Entry>,
    by_signature: HashMap<[u8; 32], WebhookId>,
    /// Ids in first-claim order, for expiry and eviction.
    order: VecDeque<(i64, WebhookId)>,
}

impl Inner {
    fn remove(&mut self, id: &WebhookId) {
        if let Some(entry) = self.by_id.remove(id) {
            for signature in &entry.signatures {
                if self.by_signature.get(signature) == Some(id) {
                    self.by_signature.remove(signature);
                }
            }
        }
    }

    /// Drops entries claimed at or before `cutoff`, then the oldest ones beyond `capacity`.
    fn evict(&mut self, cutoff: i64, capacity: usize) {
        while let Some((claimed_at, id)) = self.order.front().cloned() {
            let stale = self
                .by_id
                .get(&id)
                .is_none_or(|e| e.claimed_at != claimed_at);
            if stale || claimed_at <= cutoff || self.by_id.len() >= capacity {
                self.order.pop_front();
                if !stale {
                    self.remove(&id);
                }
            } else {
                break;
            }
        }
    }
}

/// In-memory dedup store holding at most `capacity` deliveries for the policy's retention.
///
/// When full, the oldest delivery is forgotten first; size the capacity above the deliveries
/// expected within the retention window.
#[derive(Debug)]
pub struct MemoryDedupStore {
    inner: Mutex<Inner>,
    policy: DedupPolicy,
    capacity: usize,
}

impl Default for MemoryDedupStore {
    fn default() -> Self {
        Self::new(DedupPolicy::default(), DEFAULT_CAPACITY)
    }
}

impl MemoryDedupStore {
    /// A store with the given policy and bound (at least 1).
    pub fn new(policy: DedupPolicy, capacity: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            policy,
            capacity: capacity.max(1),
        }
    }

    /// How many deliveries are remembered.
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps inconsistent in a way that
        // matters more than losing dedup, so recover the guard.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn claim_now(&self, id: &WebhookId, signature: &[u8; 32], now: i64) -> Claim {
        let mut inner = self.lock();
        inner.evict(now.saturating_sub(self.policy.retention_secs()), usize::MAX);
        let lease_until = now.saturating_add(self.policy.lease_secs());
        // A signature remembered under another id is a replay, whatever this id's state.
        if inner
            .by_signature
            .get(signature)
            .is_some_and(|other| other != id)
        {
            return Claim::Replayed;
        }
        let Inner {
            by_id,
            by_signature,
            ..
        } = &mut *inner;
        if let Some(entry) = by_id.get_mut(id) {
            if !by_signature.contains_key(signature) {
                entry.signatures.push(*signature);
                by_signature.insert(*signature, id.clone());
            }
            return match entry.state {
                State::Done => Claim::Duplicate,
                State::InFlight { lease_until: held } if held > now => Claim::InFlight,
                State::InFlight { .. } | State::Released => {
                    entry.state = State::InFlight { lease_until };
                    Claim::New
                }
            };
        }
        inner.evict(i64::MIN, self.capacity);
        let entry = Entry {
            signatures: vec![*signature],
            claimed_at: now,
            state: State::InFlight { lease_until },
        };
        inner.by_id.insert(id.clone(), entry);
        inner.by_signature.insert(*signature, id.clone());
        inner.order.push_back((now, id.clone()));
        Claim::New
    }

    fn set_state(&self, id: &WebhookId, state: State) {
        if let Some(entry) = self.lock().by_id.get_mut(id) {
            entry.state = state;
        }
    }
}

impl DedupStore for MemoryDedupStore {
    async fn claim(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        now: i64,
    ) -> Result<Claim, StoreError> {
        Ok(self.claim_now(id, signature, now))
    }

    async fn complete(&self, id: &WebhookId, _now: i64) -> Result<(), StoreError> {
        self.set_state(id, State::Done);
        Ok(())
    }

    async fn release(&self, id: &WebhookId) -> Result<(), StoreError> {
        self.set_state(id, State::Released);
        Ok(())
    }
}
