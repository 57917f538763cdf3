//! Hands inbox entries to user code: one step at a time ([`process_next`], which tests drain
//! directly) or as loops until shutdown: [`run_inbox_worker`] with one entry in hand at a time,
//! [`run_inbox_workers`] with several.
//!
//! Each entry in hand costs two commits (reserving it, then recording its outcome), so one
//! loop settles at most a few hundred entries a second however fast the handler is;
//! several loops share those commits, and handlers that wait on I/O overlap. Entries are handed
//! out in due order, but with several loops their handlers may finish in any order.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tracing::Instrument;

use super::{Inbox, InboxEntry, InboxPolicy, Settled};
use crate::StoreError;
use crate::handler::{EventHandler, Received, delivery_span_in_trace, run_handler};
use crate::throttle::{REPEAT_EVERY, Say, Throttle};
use svc_contract::Clock;

/// How long an idle worker waits for an arrival before looking for due retries again.
const IDLE_POLL: Duration = Duration::from_secs(1);

/// How often a pool of workers sets the inbox gauges (feature `metrics`).
#[cfg(feature = "metrics")]
const GAUGES_EVERY: Duration = Duration::from_secs(5);

/// How long one handler run may take before [`process_next`] cancels it and settles the entry
/// as a failure: 90% of the lease, so the entry is settled before it is due again.
fn handler_deadline(policy: &InboxPolicy) -> Duration {
    policy.lease / 10 * 9
}

/// What one worker step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Nothing is due.
    Empty,
    /// An entry was handed to the handler and settled so.
    Settled(Settled),
}

/// Hands the entry that is due first at `clock`'s now to `handler` and records the outcome. A
/// failed entry is due again a backoff after the attempt *ended* (read from `clock` again once
/// the handler returned), so that the backoff protects a slow downstream however long the
/// handler ran.
///
/// Besides an `Err` (logged and stored with `{:#}`, so an `anyhow` error keeps its whole chain),
/// two more outcomes count as a failure of the entry, retried after a backoff and dead after
/// [`InboxPolicy::max_attempts`], so that neither stops the caller:
/// - a panic in the handler, caught here ("handler panicked: …");
/// - a run longer than 90% of the inbox's [`InboxPolicy::lease`] (270 s by default), cancelled
///   at that point ("handler did not finish within …"). The entry is thus settled before its
///   lease runs out and another loop is handed it, so a handler that hangs holds one loop for
///   at most that long, not every loop in turn. Cancelling drops the handler's future at its
///   current await; a handler that blocks its thread without awaiting cannot be cancelled.
///
/// # Errors
/// [`StoreError`] when the inbox cannot be read or updated.
pub async fn process_next<I: Inbox, H: EventHandler>(
    inbox: &I,
    handler: &H,
    clock: &impl Clock,
) -> Result<Step, StoreError> {
    let Some(entry) = inbox.next_due(clock.now()).await? else {
        return Ok(Step::Empty);
    };
    // The entry's log events, user code's included, carry its webhook id; its span continues
    // the sender's trace the entry was stored with.
    let span = delivery_span_in_trace(Some(&entry.webhook_id), entry.traceparent.as_ref());
    span.record("attempt", entry.attempt);
    let step = settle_next(inbox, handler, entry, clock)
        .instrument(span.clone())
        .await;
    if let Ok(Step::Settled(settled)) = &step {
        span.record("outcome", settled.label());
    }
    step
}

/// Hands one reserved entry to `handler` and records the outcome, timed when the attempt ended.
async fn settle_next<I: Inbox, H: EventHandler>(
    inbox: &I,
    handler: &H,
    entry: InboxEntry,
    clock: &impl Clock,
) -> Result<Step, StoreError> {
    // The body was verified and decoded before it was stored; a failure here would mean the
    // file was edited, so it is recorded like a handler failure rather than lost.
    let outcome = match serde_json::from_slice(&entry.body) {
        Ok(event) => {
            let received = Received {
                webhook_id: entry.webhook_id.clone(),
                event,
                attempt: entry.attempt,
                body: entry.body.as_slice().into(),
                received_at: entry.received_at,
                // The inbox refused replays when it stored the delivery.
                signature: None,
                check: Default::default(),
            };
            let deadline = handler_deadline(&inbox.policy());
            tokio::time::timeout(deadline, run_handler(handler, received, "inbox"))
                .await
                .unwrap_or_else(|_| {
                    crate::metrics::handler_run("inbox", "timeout");
                    Err(format!("handler did not finish within {deadline:?}"))
                })
        }
        Err(err) => Err(format!("stored body does not decode: {err}")),
    };
    if let Err(err) = &outcome {
        tracing::warn!(attempt = entry.attempt, error = %err, "webhook handler failed");
    }
    let ended = clock.now();
    Ok(Step::Settled(inbox.settle(&entry, outcome, ended).await?))
}

/// Runs [`process_next`] until `shutdown` resolves, sleeping while nothing is due. A handler
/// that fails, panics or overruns its deadline fails only its entry; the loop goes on. Shutdown
/// is graceful: the entry in hand is finished (or reaches its deadline) and settled first, so a
/// stop never leaves a handled entry unrecorded (an entry interrupted by a crash is handed out
/// again after its lease).
pub async fn run_inbox_worker<I: Inbox, H: EventHandler>(
    inbox: I,
    handler: H,
    clock: impl Clock,
    shutdown: impl Future<Output = ()> + Send,
) {
    run_inbox_workers(inbox, handler, clock, 1, shutdown).await;
}

/// Like [`run_inbox_worker`], with up to `workers` entries in hand at once (at least one), all
/// on the calling task: handlers overlap while they wait, and each entry still goes to exactly
/// one of them. Shutdown lets every entry in hand finish and be settled.
///
/// Beside a server, use [`run_inbox_workers_until_drained`] instead: it hands out what
/// arrived last before it stops.
pub async fn run_inbox_workers<I: Inbox, H: EventHandler>(
    inbox: I,
    handler: H,
    clock: impl Clock,
    workers: usize,
    shutdown: impl Future<Output = ()> + Send,
) {
    run_until(inbox, handler, clock, workers, shutdown, Phase::Stop).await;
}

/// Like [`run_inbox_workers`], for workers beside the server that takes the deliveries: when
/// `drain` resolves (the server has answered its last request, so every delivery acknowledged
/// is in the inbox), the workers finish the entries in hand, hand out what is still due, and
/// return once nothing is due (or the inbox fails). Past any deadline of yours (drop the
/// future), the entries in hand come back after the inbox's lease, as after a crash.
///
/// With `svc_server::Server`, whose background work gets the drain signal:
///
/// ```no_run
/// # use svc_receiver::Received;
/// # use svc_receiver::sqlite::SqliteInbox;
/// use svc_receiver::inbox::run_inbox_workers_until_drained;
///
/// # use axum::Router;
/// # use tokio::net::TcpListener;
/// # async fn run(app: Router, inbox: SqliteInbox, listener: TcpListener) -> std::io::Result<()> {
/// let handler = |received: Received| async move {
///     println!("processing {}", received.event.call_id);
///     Ok::<(), String>(())
/// };
/// svc_server::Server::new(app)
///     .with_background(move |draining| {
///         run_inbox_workers_until_drained(inbox, handler, svc_contract::SystemClock, 4, draining)
///     })
///     .run(listener, svc_server::shutdown_signal()?)
///     .await
/// # }
/// ```
pub async fn run_inbox_workers_until_drained<I: Inbox, H: EventHandler>(
    inbox: I,
    handler: H,
    clock: impl Clock,
    workers: usize,
    drain: impl Future<Output = ()> + Send,
) {
    run_until(inbox, handler, clock, workers, drain, Phase::Drain).await;
}

/// Runs a pool of `workers` loops until `signal` resolves, then asks them for `then`.
async fn run_until<I: Inbox, H: EventHandler>(
    inbox: I,
    handler: H,
    clock: impl Clock,
    workers: usize,
    signal: impl Future<Output = ()> + Send,
    then: Phase,
) {
    let (phase, phases) = watch::channel(Phase::Run);
    let mut loops = std::pin::pin!(run_pool(&inbox, &handler, &clock, workers, phases));
    tokio::select! {
        () = &mut loops => {}
        () = signal => {
            let _ = phase.send(then);
            loops.await;
        }
    }
}

/// What the loops of a pool are asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Hand out due entries, waiting for more when none is due.
    Run,
    /// Hand out due entries until none is due (or the inbox fails), then stop: what arrived
    /// before a shutdown is handled before it completes.
    Drain,
    /// Stop once the entry in hand is settled.
    Stop,
}

/// Runs `workers` loops (at least one) on the calling task until `phases` says so.
async fn run_pool<I: Inbox, H: EventHandler>(
    inbox: &I,
    handler: &H,
    clock: &impl Clock,
    workers: usize,
    phases: watch::Receiver<Phase>,
) {
    // One streak for the pool: an inbox that cannot be read or written (a full disk, a
    // database down) fails every loop each second until it heals; said once a minute.
    let unavailable = Throttle::new(REPEAT_EVERY);
    let loops = futures_util::future::join_all(
        (0..workers.max(1))
            .map(|_| worker_loop(inbox, handler, clock, &unavailable, phases.clone())),
    );
    #[cfg(feature = "metrics")]
    futures_util::future::join(loops, publish_gauges(inbox, clock, phases)).await;
    #[cfg(not(feature = "metrics"))]
    loops.await;
}

/// Sets the inbox gauges every [`GAUGES_EVERY`] while the pool runs.
#[cfg(feature = "metrics")]
async fn publish_gauges<I: Inbox>(
    inbox: &I,
    clock: &impl Clock,
    mut phases: watch::Receiver<Phase>,
) {
    loop {
        if *phases.borrow_and_update() != Phase::Run {
            return;
        }
        if let Err(err) = inbox.publish_metrics(clock.now()).await {
            tracing::warn!(error = %err, "webhook inbox gauges not updated");
        }
        tokio::select! {
            changed = phases.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep(GAUGES_EVERY) => {}
        }
    }
}

async fn worker_loop<I: Inbox, H: EventHandler>(
    inbox: &I,
    handler: &H,
    clock: &impl Clock,
    unavailable: &Throttle,
    mut phases: watch::Receiver<Phase>,
) {
    loop {
        if *phases.borrow_and_update() == Phase::Stop {
            return;
        }
        let step = process_next(inbox, handler, clock).await;
        if step.is_ok() && unavailable.succeeded() {
            tracing::info!("webhook inbox available again");
        }
        let idle = match step {
            Ok(Step::Settled(_)) => continue,
            Ok(Step::Empty) => IDLE_POLL,
            Err(err) => {
                if let Say::Log { left_out } = unavailable.failed(std::time::Instant::now()) {
                    tracing::error!(error = %err, left_out,
                        "webhook inbox unavailable (while it is, said once a minute)");
                }
                IDLE_POLL
            }
        };
        if *phases.borrow_and_update() != Phase::Run {
            return;
        }
        tokio::select! {
            changed = phases.changed() => {
                // The sender is gone: nobody can ask for more; stop.
                if changed.is_err() {
                    return;
                }
            }
            () = inbox.wait_for_arrival(idle) => {}
        }
    }
}
