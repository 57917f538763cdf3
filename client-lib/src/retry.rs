//! Retry policy: exponential backoff with jitter for `INTERNAL_ERROR`/5xx, connection errors and
//! timeouts on idempotent requests; `429` waits for `Retry-After` on any request (the request was
//! not processed); never `TENANT_QUOTA_EXCEEDED` nor any other 4xx. The sleep is injectable so
//! tests observe the delays instead of waiting them out.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

use super::error::ClientError;

/// How the client waits between attempts.
pub type SleepFn = Arc<dyn Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// When and how long to wait before trying a request again.
#[derive(Clone)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: u32,
    /// Backoff before the first retry; doubles each time.
    pub base_delay: Duration,
    /// Upper bound of one backoff delay.
    pub max_delay: Duration,
    /// A `Retry-After` longer than this is not waited for: the error is returned instead.
    pub max_retry_after: Duration,
    /// The sleep used between attempts (tokio's by default).
    pub sleep: SleepFn,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_retries", &self.max_retries)
            .field("base_delay", &self.base_delay)
            .field("max_delay", &self.max_delay)
            .field("max_retry_after", &self.max_retry_after)
            .finish_non_exhaustive()
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(120),
            sleep: Arc::new(|d| Box::pin(tokio::time::sleep(d))),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// The delay before retry number `retry` (0-based): exponential, capped, with "equal jitter"
    /// (uniform between half and all of the capped delay) so clients do not retry in lockstep.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(16));
        let capped = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let half = capped / 2;
        let jitter_ms = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
        half + Duration::from_millis(rand::thread_rng().gen_range(0..=jitter_ms))
    }

    /// The longest the waits between the attempts of one request can add up to: before each
    /// retry, its backoff (capped by [`RetryPolicy::max_delay`]) or a `Retry-After`, which is
    /// waited for up to [`RetryPolicy::max_retry_after`], whichever can be longer.
    pub fn max_total_wait(&self) -> Duration {
        (0..self.max_retries)
            .map(|retry| {
                let factor = 2u32.saturating_pow(retry.min(16));
                let backoff = self.base_delay.saturating_mul(factor).min(self.max_delay);
                backoff.max(self.max_retry_after)
            })
            .fold(Duration::ZERO, Duration::saturating_add)
    }

    /// The longest one request can take under this policy when each attempt is cut at
    /// `timeout` (connecting, the headers and the whole body): every attempt timed out, and
    /// every wait between them as long as it can be ([`RetryPolicy::max_total_wait`]).
    pub fn request_bound(&self, timeout: Duration) -> Duration {
        timeout
            .saturating_mul(self.max_retries.saturating_add(1))
            .saturating_add(self.max_total_wait())
    }

    /// Whether to retry after `error` on attempt `retry` (0-based count of retries done), and
    /// after how long. `idempotent` says whether repeating the request is safe.
    pub fn decide(&self, error: &ClientError, idempotent: bool, retry: u32) -> Option<Duration> {
        if retry >= self.max_retries {
            return None;
        }
        match error {
            ClientError::Api(e) if e.status == 429 => {
                let wait = e.retry_after.unwrap_or_else(|| self.backoff(retry));
                (wait <= self.max_retry_after).then_some(wait)
            }
            ClientError::Api(e) if matches!(e.status, 500 | 502 | 503 | 504) && idempotent => {
                Some(self.backoff(retry))
            }
            ClientError::Connect(_) | ClientError::Timeout(_) if idempotent => {
                Some(self.backoff(retry))
            }
            _ => None,
        }
    }
}

/// Parses a `Retry-After` value: delay-seconds or an HTTP date.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = at.signed_duration_since(chrono::Utc::now());
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}
