//! Retention pruning, rate-limited so that it stays off the hot path of the durable stores.

use std::sync::atomic::{AtomicI64, Ordering};

/// Rate-limits retention pruning to once a minute of store time, so it stays off the hot path.
#[derive(Debug, Default)]
pub(crate) struct Pruner {
    last: AtomicI64,
}

impl Pruner {
    /// True (and records `now`) when the last prune was a minute or more before `now`.
    pub(crate) fn due(&self, now: i64) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        (now.saturating_sub(last) >= 60 || now < last)
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}
