//! The outbox worker: delivers queued `call.scored` events with the contract's retry policy.
//!
//! Each attempt claims a due delivery, fairly across tenants (round-robin, at most two of one
//! tenant in flight: see [`crate::db`]'s `claim_due`; leased, so a crash mid-send only delays it),
//! reads the tenant's endpoint and secret *now* (rotation is immediate, pending retries
//! included), signs afresh and sends. A failed first attempt is retried once after the retry
//! delay; a failed retry is final. Every attempt is logged in the database and failures in the
//! service log. The worker wakes on [`Outbox::notify`] and when another process commits to the
//! database (a delivery or resend it queued), and otherwise sleeps until the next due row, so
//! it never busy-polls and resumes pending retries after a restart.
//!
//! Resends the operator asked for (`svc-cli sandbox resend`, queued in the database by another
//! process) go first: each is one attempt, signed afresh, without the tenant's faults unless
//! the request asked for them, logged as a resend, and outside the retry policy (a failed
//! resend is not retried; the delivery's own state and schedule stay as they were).
//! Each attempt runs in a `webhook_attempt` span that continues the trace kept with the row
//! (the scoring's, see [`crate::scoring`]), and its request carries that span as `traceparent`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tracing::Instrument as _;

use super::client::{Attempt, Target, WebhookClient};
use crate::clock::Clock;
use crate::db::{AttemptLog, Claimed, ClaimedResend, Db, DbError, Endpoint, Next};
use crate::faults::AppliedFault;

/// The key a delivery is signed with when a `bad-signature` fault hits it: not the tenant's.
const BAD_SIGNING_SECRET: &str = "whsec_fault_injection_wrong_key";

/// How many attempts run concurrently when there is a backlog.
pub const CONCURRENCY: usize = 8;
/// The longest the worker sleeps without re-checking (covers leases and clock changes; what
/// another process queues is seen sooner, see [`OUTSIDE_POLL`]).
const MAX_IDLE: Duration = Duration::from_secs(5);
/// How often the worker asks whether another process committed to the database (a delivery
/// queued by the operator's `calls ingest-real`, `svc-cli sandbox trigger`, a resend asked for
/// with `svc-cli sandbox resend`): one `PRAGMA data_version`, which the service's own writes
/// leave alone. A resend is then made within this much, not at the next idle check.
const OUTSIDE_POLL: Duration = Duration::from_millis(200);
/// The shortest idle wait, when a delivery is due but its tenant has its share in flight.
const MIN_IDLE: Duration = Duration::from_millis(50);
/// How often a storage failure that keeps repeating (a full disk fails every claim of every
/// loop, each second) is logged again: once when it starts, then at most this often with how
/// many were left out, and once when it stops.
const FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

/// Logs a fault injected into the delivery `claimed`, at `warn` (what `svc-cli sandbox` shows
/// by default): a tenant rehearsing a bad day sees each one as it happens.
fn log_fault(claimed: &Claimed, fault: AppliedFault, what: &str) {
    tracing::warn!(
        webhook_id = %claimed.id,
        tenant_id = %claimed.tenant_id,
        call_id = %claimed.call_id,
        attempt = claimed.attempts + 1,
        fault = fault.as_str(),
        "fault injection: {}: {what}",
        fault.as_str()
    );
}

/// The attempt logged when the tenant has no active endpoint: nothing was sent.
fn no_endpoint() -> Attempt {
    Attempt {
        status: None,
        latency: Duration::ZERO,
        error: Some("the tenant has no active webhook endpoint".to_string()),
    }
}

/// The log entry of an attempt made at `now` to `url`.
fn attempt_log(
    now: chrono::DateTime<chrono::Utc>,
    url: Option<String>,
    attempt: Attempt,
    faults: Vec<AppliedFault>,
) -> AttemptLog {
    AttemptLog {
        attempted_at: now.timestamp_millis(),
        url,
        status: attempt.status,
        latency_ms: i64::try_from(attempt.latency.as_millis()).unwrap_or(i64::MAX),
        error: attempt.error,
        faults,
        resend: false,
    }
}

/// The span of one attempt (its fields filled in as it goes), a child of the span that queued
/// the delivery when the row kept its trace context: every attempt of a delivery, the retry
/// minutes later, after a restart or resent on the operator's request included, is in the
/// trace of the call's scoring. The request carries the span as its `traceparent`
/// ([`super::client`]).
fn attempt_span(claimed: &Claimed) -> tracing::Span {
    let span = tracing::info_span!(
        "webhook_attempt",
        webhook_id = %claimed.id,
        tenant_id = %claimed.tenant_id,
        call_id = %claimed.call_id,
        attempt = claimed.attempts + 1,
        resend = tracing::field::Empty,
        status = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    if let Some(traceparent) = &claimed.traceparent {
        svc_ops::traces::continue_trace(&span, traceparent);
    }
    span
}

/// Records the status an attempt was answered with on its span (the current one).
fn record_status(attempt: &Attempt) {
    if let Some(status) = attempt.status {
        tracing::Span::current().record("status", status);
    }
}

/// The `outcome` of an attempt's span.
fn outcome_label(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Deferred => "deferred",
        Outcome::Empty => "empty",
        attempted => attempted.metric_label().unwrap_or("attempted"),
    }
}

/// A streak of storage failures, shared by the loops.
#[derive(Debug, Default)]
struct Streak {
    /// When the streak was last logged; `None` outside a streak.
    logged_at: Option<std::time::Instant>,
    /// Failures not logged since then.
    left_out: u64,
}

/// What one call to [`Outbox::try_deliver_next`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An attempt succeeded.
    Delivered,
    /// A first attempt failed; the retry is scheduled.
    Retried,
    /// The retry failed; the event will not be sent again.
    Failed,
    /// The first attempt was put off (an injected delay, see [`crate::faults`]).
    Deferred,
    /// A resend the operator asked for was made (whatever it was answered).
    Resent,
    /// Nothing was due.
    Empty,
}

impl Outcome {
    /// The `outcome` label of the deliveries metric; `None` for what is not an attempt.
    pub fn metric_label(self) -> Option<&'static str> {
        match self {
            Self::Delivered => Some("delivered"),
            Self::Retried => Some("retried"),
            Self::Failed => Some("failed"),
            Self::Deferred | Self::Resent | Self::Empty => None,
        }
    }
}

/// Delivers the outbox. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Outbox {
    db: Db,
    client: WebhookClient,
    clock: Clock,
    retry_delay: Duration,
    notify: Arc<Notify>,
    /// Where attempts are counted, once `--metrics-listen` set it ([`Outbox::observe`]).
    metrics: Arc<std::sync::OnceLock<crate::ops::metrics::Metrics>>,
    /// Storage failures of the loops, so that a full disk is said once a minute.
    failures: Arc<std::sync::Mutex<Streak>>,
}

impl Outbox {
    /// An outbox over `db` that retries a failed first attempt after `retry_delay`.
    pub fn new(db: Db, client: WebhookClient, clock: Clock, retry_delay: Duration) -> Self {
        Self {
            db,
            client,
            clock,
            retry_delay,
            notify: Arc::new(Notify::new()),
            metrics: Arc::default(),
            failures: Arc::default(),
        }
    }

    /// Counts every later attempt in `metrics` (the first call wins).
    pub fn observe(&self, metrics: crate::ops::metrics::Metrics) {
        let _ = self.metrics.set(metrics);
    }

    /// Wakes the worker (call after queueing a delivery).
    pub fn notify(&self) {
        self.notify.notify_one();
    }

    /// Makes at most one delivery attempt: the earliest due one.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn try_deliver_next(&self) -> Result<Outcome, DbError> {
        let now = self.clock.now();
        if let Some(resend) = self.db.claim_resend(now.timestamp_millis()).await? {
            // A resend is an attempt of its delivery too: in the trace of the call's scoring,
            // its request carrying the span as `traceparent` like any other attempt's.
            let span = attempt_span(&resend.delivery);
            span.record("resend", true);
            self.resend(resend, now).instrument(span.clone()).await?;
            span.record("outcome", "resent");
            return Ok(Outcome::Resent);
        }
        let Some(claimed) = self.db.claim_delivery(now.timestamp_millis()).await? else {
            return Ok(Outcome::Empty);
        };
        let span = attempt_span(&claimed);
        let outcome = self.deliver(claimed, now).instrument(span.clone()).await?;
        span.record("outcome", outcome_label(outcome));
        Ok(outcome)
    }

    /// One attempt at `claimed` (or its injected delay), logged and recorded.
    async fn deliver(
        &self,
        claimed: Claimed,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Outcome, DbError> {
        let endpoint = self.db.active_endpoint(&claimed.tenant_id).await?;
        let (url, attempt, faults) = match endpoint {
            Some(endpoint) => {
                let delayed_to = claimed.created_at.saturating_add(
                    i64::try_from(endpoint.faults.delay_deliveries_ms).unwrap_or(i64::MAX),
                );
                if claimed.attempts == 0 && now.timestamp_millis() < delayed_to {
                    self.db.defer_delivery(&claimed.id, delayed_to).await?;
                    // Said when the attempt is made (`attempt_with_faults`).
                    tracing::info!(webhook_id = %claimed.id, call_id = %claimed.call_id,
                        until = %crate::time::format_millis(delayed_to),
                        "fault injection: first attempt put off");
                    return Ok(Outcome::Deferred);
                }
                let url = endpoint.url.clone();
                let first = claimed.attempts == 0;
                let (attempt, faults) = self
                    .attempt_with_faults(&claimed, endpoint, now, first)
                    .await;
                (Some(url), attempt, faults)
            }
            None => (None, no_endpoint(), Vec::new()),
        };
        record_status(&attempt);
        let succeeded = attempt.succeeded();
        let (next, outcome) = if succeeded {
            (Next::Delivered, Outcome::Delivered)
        } else if claimed.attempts == 0 {
            // Counted from the failure: an attempt that timed out took up to 10 s.
            let failed_at = self.clock.now();
            let delay =
                chrono::Duration::from_std(self.retry_delay).unwrap_or(chrono::Duration::MAX);
            let due = failed_at.checked_add_signed(delay).unwrap_or(failed_at);
            (Next::RetryAt(due.timestamp_millis()), Outcome::Retried)
        } else {
            (Next::GiveUp, Outcome::Failed)
        };
        if !succeeded {
            tracing::warn!(
                webhook_id = %claimed.id,
                tenant_id = %claimed.tenant_id,
                attempt = claimed.attempts + 1,
                status = attempt.status,
                latency_ms = attempt.latency.as_millis() as u64,
                error = attempt.error.as_deref().unwrap_or(""),
                final_attempt = outcome == Outcome::Failed,
                "webhook delivery failed"
            );
        }
        let log = attempt_log(now, url, attempt, faults);
        self.db.record_attempt(&claimed.id, log, next).await?;
        if let (Some(metrics), Some(label)) = (self.metrics.get(), outcome.metric_label()) {
            metrics.delivery(&claimed.tenant_id, label);
        }
        Ok(outcome)
    }

    /// Makes the one attempt of a resend the operator asked for, and logs it.
    async fn resend(
        &self,
        resend: ClaimedResend,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), DbError> {
        let ClaimedResend {
            seq,
            delivery,
            with_faults,
        } = resend;
        let (url, attempt, faults) = match self.db.active_endpoint(&delivery.tenant_id).await? {
            None => (None, no_endpoint(), Vec::new()),
            Some(endpoint) if with_faults => {
                let url = endpoint.url.clone();
                let (attempt, faults) = self
                    .attempt_with_faults(&delivery, endpoint, now, false)
                    .await;
                (Some(url), attempt, faults)
            }
            Some(endpoint) => {
                let target = Target {
                    url: endpoint.url,
                    secret: endpoint.secret,
                };
                let attempt = self
                    .client
                    .attempt(&target, &delivery.id, delivery.body.as_bytes(), now.timestamp())
                    .await;
                (Some(target.url), attempt, Vec::new())
            }
        };
        record_status(&attempt);
        tracing::info!(
            webhook_id = %delivery.id,
            tenant_id = %delivery.tenant_id,
            status = attempt.status,
            error = attempt.error.as_deref().unwrap_or(""),
            with_faults,
            "webhook resent on the operator's request"
        );
        let log = AttemptLog {
            resend: true,
            ..attempt_log(now, url, attempt, faults)
        };
        self.db.record_resend(seq, &delivery.id, log).await
    }

    /// One attempt at `claimed` to `endpoint` with the tenant's faults applied, each logged:
    /// what the attempt did and the faults it applied (an injected delay is counted on the
    /// `first` attempt, the one it put off).
    async fn attempt_with_faults(
        &self,
        claimed: &Claimed,
        endpoint: Endpoint,
        now: chrono::DateTime<chrono::Utc>,
        first: bool,
    ) -> (Attempt, Vec<AppliedFault>) {
        let faults = endpoint.faults;
        let mut applied = Vec::new();
        if first && faults.delay_deliveries_ms > 0 {
            applied.push(AppliedFault::Delayed);
            let queued_ms = now.timestamp_millis().saturating_sub(claimed.created_at);
            log_fault(
                claimed,
                AppliedFault::Delayed,
                &format!(
                    "first attempt made {queued_ms} ms after it was queued (delay {} ms)",
                    faults.delay_deliveries_ms
                ),
            );
        }
        if faults.drops(&claimed.call_id) {
            // As if the endpoint were down: nothing is sent, on either attempt.
            applied.push(AppliedFault::Dropped);
            log_fault(claimed, AppliedFault::Dropped, "nothing sent");
            let attempt = Attempt {
                status: None,
                latency: Duration::ZERO,
                error: Some(
                    "fault injection: delivery dropped (as if the endpoint were down)".to_string(),
                ),
            };
            return (attempt, applied);
        }
        let secret = if faults.signs_badly(&claimed.call_id) {
            applied.push(AppliedFault::BadSignature);
            log_fault(
                claimed,
                AppliedFault::BadSignature,
                "signed with a key that is not the tenant's",
            );
            BAD_SIGNING_SECRET.to_string()
        } else {
            endpoint.secret
        };
        let target = Target {
            url: endpoint.url,
            secret,
        };
        let body = claimed.body.as_bytes();
        let attempt = self
            .client
            .attempt(&target, &claimed.id, body, now.timestamp())
            .await;
        if attempt.succeeded() && faults.duplicates(&claimed.call_id) {
            // The same delivery again: same webhook id, a fresh signature.
            let again = self
                .client
                .attempt(&target, &claimed.id, body, now.timestamp() + 1)
                .await;
            applied.push(AppliedFault::SentTwice);
            let answer = again
                .status
                .map_or_else(|| "no answer".to_owned(), |s| format!("HTTP {s}"));
            log_fault(
                claimed,
                AppliedFault::SentTwice,
                &format!("sent again, answered {answer}"),
            );
        }
        (attempt, applied)
    }

    /// Attempts every delivery due now, until none is; returns what each attempt did. Tests use
    /// it instead of waiting for the worker.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn drain(&self) -> Result<Vec<Outcome>, DbError> {
        let mut done = Vec::new();
        loop {
            match self.try_deliver_next().await? {
                Outcome::Empty => return Ok(done),
                outcome => done.push(outcome),
            }
        }
    }

    /// Runs the worker until `shutdown` resolves: [`CONCURRENCY`] loops that deliver while
    /// work is due and otherwise sleep until the next due row or a notification, and a watch
    /// that notifies them when another process commits to the database.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut loops = tokio::task::JoinSet::new();
        // The first look comes before the loops' first pass: what another process commits
        // after that pass is then a change the watch sees.
        let seen = self.db.outside_commits().await.ok();
        let outbox = self.clone();
        loops.spawn(async move { outbox.watch_other_processes(seen).await });
        for _ in 0..CONCURRENCY {
            let outbox = self.clone();
            loops.spawn(async move { outbox.work().await });
        }
        shutdown.await;
        loops.abort_all();
        while loops.join_next().await.is_some() {}
    }

    async fn work(&self) {
        loop {
            let next = self.try_deliver_next().await;
            if next.is_ok() {
                self.storage_works();
            }
            match next {
                Ok(Outcome::Empty) => self.idle().await,
                Ok(_) => self.notify.notify_one(), // more may be due: wake a peer
                Err(error) => {
                    self.storage_failed(&error);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// Wakes a loop whenever another process has committed since the last look: what it
    /// queued is claimed now rather than at the loops' next idle check. A failed look is left
    /// to the loops, which say so.
    async fn watch_other_processes(&self, mut seen: Option<i64>) {
        loop {
            tokio::time::sleep(OUTSIDE_POLL).await;
            let Ok(version) = self.db.outside_commits().await else {
                continue;
            };
            if seen.is_some_and(|seen| seen != version) {
                self.notify.notify_one();
            }
            seen = Some(version);
        }
    }

    fn streak(&self) -> std::sync::MutexGuard<'_, Streak> {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Logs a storage failure: the first of a streak, then at most once a minute.
    fn storage_failed(&self, error: &DbError) {
        let now = std::time::Instant::now();
        let mut streak = self.streak();
        match streak.logged_at {
            Some(at) if now.saturating_duration_since(at) < FAILURE_LOG_EVERY => {
                streak.left_out += 1;
            }
            _ => {
                let left_out = std::mem::take(&mut streak.left_out);
                streak.logged_at = Some(now);
                tracing::error!(error = %error, left_out,
                    "webhook outbox storage failure (while it lasts, said once a minute)");
            }
        }
    }

    /// Ends a streak of storage failures, saying so.
    fn storage_works(&self) {
        let mut streak = self.streak();
        if streak.logged_at.is_some() {
            *streak = Streak::default();
            tracing::info!("webhook outbox storage works again");
        }
    }

    async fn idle(&self) {
        // Something may be due yet not claimable (its tenant already has its share in flight):
        // look again shortly rather than at once, so a busy tenant never makes the loops spin.
        let wait = match self.db.next_delivery_due().await {
            Ok(Some(due)) => {
                let millis = due
                    .saturating_sub(self.clock.now().timestamp_millis())
                    .max(0);
                Duration::from_millis(u64::try_from(millis).unwrap_or(0)).clamp(MIN_IDLE, MAX_IDLE)
            }
            Ok(None) | Err(_) => MAX_IDLE,
        };
        tokio::select! {
            () = self.notify.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}
