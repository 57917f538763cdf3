//! The user code a receiver hands verified events to, whichever integration runs it.

use std::future::Future;
use std::sync::Arc;

use crate::record_check::RecordCheck;
use svc_contract::CallScored;
use svc_contract::WebhookId;

/// A verified, deduplicated event handed to user code. Built by the integrations only, so
/// that fields can be added.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Received {
    /// The delivery's `X-Service-Webhook-Id` (the idempotency key).
    pub webhook_id: WebhookId,
    /// The decoded body.
    pub event: CallScored,
    /// Which attempt this is at handing the event to user code, from 1. Only inbox mode counts
    /// attempts (durably, across its retries and restarts). Direct mode always says 1, the
    /// sender's retry included: a [`DedupStore`](crate::dedup::DedupStore) answers a released
    /// claim's next claim with a plain `Claim::New`, so a retry looks like a first delivery.
    pub attempt: u32,
    /// The raw body exactly as received and verified, for a ledger or an audit trail (the
    /// signature covered these bytes).
    pub body: Arc<[u8]>,
    /// When the delivery was verified (unix seconds): in inbox mode when it was stored, before
    /// the sender got its 2xx; in direct mode when the request arrived.
    pub received_at: i64,
    /// The verified signature this attempt carried, when the integration knows it (direct
    /// mode): a recorder keeps it with the record, so that the same signature replayed under
    /// another webhook id finds the record (the id is not signed; the signature is).
    pub(crate) signature: Option<[u8; 32]>,
    /// What a recorder recorded of it in this run, checked after the handler's `Ok`.
    pub(crate) check: RecordCheck,
}

impl Received {
    /// A delivery as the integrations hand it to user code (attempt 1): for tests of your
    /// handler, and for an integration of your own that verified the delivery itself.
    pub fn new(
        webhook_id: WebhookId,
        event: CallScored,
        body: impl Into<Arc<[u8]>>,
        received_at: i64,
    ) -> Self {
        Self {
            webhook_id,
            event,
            attempt: 1,
            body: body.into(),
            received_at,
            signature: None,
            check: RecordCheck::default(),
        }
    }

    /// The same delivery with the verified signature its attempt carried (for an integration
    /// of your own: a recorder keeps it with the record, so that a replay of the signature
    /// under another webhook id is recorded `Duplicate`).
    #[must_use]
    pub fn with_signature(mut self, signature: [u8; 32]) -> Self {
        self.signature = Some(signature);
        self
    }

    /// The same delivery as attempt `attempt` (from 1) of handing it to user code.
    #[must_use]
    pub fn with_attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }
}

/// User code that processes events. Any `Fn(Received) -> impl Future<Output = Result<(), E>>`
/// with a displayable `E` is one; an `Err` means "not processed" (the claim is released so the
/// sender's retry is processed, or the inbox retries later).
pub trait EventHandler: Send + Sync + 'static {
    /// The handler's failure, logged by the integration.
    type Error: std::fmt::Display + Send;

    /// Processes one event.
    fn handle(&self, received: Received) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

impl<F, Fut, E> EventHandler for F
where
    F: Fn(Received) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send,
    E: std::fmt::Display + Send,
{
    type Error = E;

    fn handle(&self, received: Received) -> impl Future<Output = Result<(), E>> + Send {
        self(received)
    }
}

/// The span every log event of one delivery is recorded in (the crate's own, and user code's
/// in either mode), with the webhook id when the request carries a well-formed one, so that
/// logs can be matched with the service's delivery list. It is an ERROR-level span so that a
/// subscriber filtering at any level still shows the id on the events it keeps. Its
/// `attempt` (inbox workers: which attempt at user code) and `outcome` are recorded as they
/// become known.
#[cfg(any(
    feature = "sqlite",
    feature = "postgres",
    feature = "axum",
    feature = "tower"
))]
pub(crate) fn delivery_span(id: Option<&WebhookId>) -> tracing::Span {
    use tracing::field::Empty;
    match id {
        Some(id) => {
            tracing::error_span!("webhook_delivery", webhook_id = %id, attempt = Empty, outcome = Empty)
        }
        None => tracing::error_span!("webhook_delivery", attempt = Empty, outcome = Empty),
    }
}

/// [`delivery_span`] in the sender's trace: a child of the span `trace` names (feature
/// `opentelemetry`; without it, or without a `trace`, the plain span).
#[cfg(any(
    feature = "sqlite",
    feature = "postgres",
    feature = "axum",
    feature = "tower"
))]
pub(crate) fn delivery_span_in_trace(
    id: Option<&WebhookId>,
    trace: Option<&crate::TraceParent>,
) -> tracing::Span {
    let span = delivery_span(id);
    #[cfg(feature = "opentelemetry")]
    if let Some(trace) = trace {
        trace.link(&span);
    }
    #[cfg(not(feature = "opentelemetry"))]
    let _ = trace;
    span
}

/// Runs `handler` on one event the way both integrations do (`mode` is `inbox` or `direct`,
/// for [`crate::metrics::HANDLER_RUNS`]), turning every way it can fail into the text that is
/// logged (and, in inbox mode, stored as the entry's last error):
/// - an `Err` is formatted with `{:#}`, the alternate form in which `anyhow` and `eyre` print
///   the whole chain of context (other types ignore the flag);
/// - a panic is caught and reported as a failure of this event, so it neither unwinds into
///   the caller (a worker loop, a request task) nor leaves the event unsettled. The handler is
///   called again for later events: state it shares must stay usable after a panic.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "axum"))]
pub(crate) async fn run_handler<H: EventHandler>(
    handler: &H,
    received: Received,
    mode: &'static str,
) -> Result<(), String> {
    use futures_util::FutureExt;
    let (id, check) = (received.webhook_id.clone(), received.check.clone());
    // Calling `handle` inside the future catches a panic before its first await too.
    let run = std::panic::AssertUnwindSafe(async { handler.handle(received).await });
    let (outcome, result) = match run.catch_unwind().await {
        // A record the handler made must be committed before the delivery is acknowledged.
        Ok(Ok(())) => match check.verify(&id).await {
            Ok(()) => ("ok", Ok(())),
            Err(err) => ("error", Err(err)),
        },
        Ok(Err(err)) => ("error", Err(format!("{err:#}"))),
        Err(panic) => (
            "panic",
            Err(format!("handler panicked: {}", panic_message(&*panic))),
        ),
    };
    crate::metrics::handler_run(mode, outcome);
    result
}

/// The text a panic was raised with, when it was a string (as with `panic!` and `expect`).
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "axum"))]
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}
