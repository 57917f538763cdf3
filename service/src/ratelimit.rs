//! The optional per-tenant request rate limit (off by default: the contract enforces none in
//! v1, and says a limit would answer `429` with `Retry-After`). The operator sets a tenant's
//! requests a second (`tenant set-rate-limit`); each tenant has a token bucket of that many
//! requests, refilled continuously, so it may burst one second's worth.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The buckets of the tenants that have a limit. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct RateLimiter {
    buckets: Arc<Mutex<HashMap<String, Bucket>>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    /// Takes one request of `tenant_id`'s allowance of `per_second`; `Err` holds how long to
    /// wait before the next request would be allowed.
    ///
    /// # Errors
    /// The wait, when the tenant is over its limit.
    pub fn check(&self, tenant_id: &str, per_second: u32) -> Result<(), Duration> {
        self.check_at(tenant_id, per_second, Instant::now())
    }

    fn check_at(&self, tenant_id: &str, per_second: u32, now: Instant) -> Result<(), Duration> {
        let rate = f64::from(per_second.max(1));
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let bucket = buckets.entry(tenant_id.to_owned()).or_insert(Bucket {
            tokens: rate,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_bursts_one_seconds_worth_then_waits_and_others_are_unaffected() {
        let limiter = RateLimiter::default();
        let start = Instant::now();
        for _ in 0..5 {
            assert_eq!(limiter.check_at("ten_a", 5, start), Ok(()));
        }
        let wait = limiter
            .check_at("ten_a", 5, start)
            .expect_err("over the limit");
        assert!(wait <= Duration::from_millis(200), "{wait:?}");
        assert_eq!(limiter.check_at("ten_b", 5, start), Ok(()), "per tenant");
        let later = start + Duration::from_millis(200);
        assert_eq!(limiter.check_at("ten_a", 5, later), Ok(()), "refilled");
    }
}
