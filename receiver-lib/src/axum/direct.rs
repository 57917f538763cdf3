//! Direct mode: verify, claim the webhook id, run user code inside the request, answer.

use std::sync::Arc;
use std::time::Duration;

use ::axum::body::Bytes;
use ::axum::extract::rejection::BytesRejection;
use ::axum::extract::{DefaultBodyLimit, State};
use ::axum::http::HeaderMap;
use ::axum::routing::{MethodRouter, post};
use tokio::time::Instant;
use tracing::Instrument;

use super::request::{Answered, ReceiveError, answer, check, request_span, webhook_id};
use crate::dedup::{Claim, DedupStore};
use crate::handler::{EventHandler, Received, run_handler};
use crate::metrics::Mode;
use svc_contract::Verifier;
use svc_contract::WebhookId;
use svc_contract::{Clock, SystemClock};

/// Default time from a request's arrival to a 503 if user code has not finished by then: well
/// inside the sender's 10-second deadline, with 2 s left for what happens before the route
/// sees the request (connecting, uploading the body, queueing).
pub const DEFAULT_HANDLER_DEADLINE: Duration = Duration::from_secs(8);

/// Everything the direct-mode handler needs: verifier, dedup store, user code and clock.
pub struct WebhookReceiver<S, H> {
    verifier: Verifier,
    store: Arc<S>,
    handler: Arc<H>,
    clock: Arc<dyn Clock>,
    deadline: Duration,
}

impl<S, H> std::fmt::Debug for WebhookReceiver<S, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookReceiver")
            .field("verifier", &self.verifier)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<S: DedupStore, H: EventHandler> WebhookReceiver<S, H> {
    /// A receiver using the system clock and the default deadline.
    pub fn new(verifier: Verifier, store: S, handler: H) -> Self {
        Self {
            verifier,
            store: Arc::new(store),
            handler: Arc::new(handler),
            clock: Arc::new(SystemClock),
            deadline: DEFAULT_HANDLER_DEADLINE,
        }
    }

    /// Reads "now" from `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Sets how long a request may take, from its arrival, before it answers 503 (8 s by
    /// default). Arrival is when the route is called with the whole body read; verifying and
    /// claiming the id (which may wait on the store) count against the deadline, and user code
    /// gets what is left. Past the deadline the code keeps running and its outcome still
    /// completes or releases the claim; keep the store's in-flight lease longer than the slowest
    /// run. If claiming alone used the whole deadline, the claim is released without running
    /// the code, so the sender's retry is processed.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    async fn receive(
        self: Arc<Self>,
        headers: HeaderMap,
        webhook_id: Option<WebhookId>,
        body: Result<Bytes, BytesRejection>,
    ) -> Result<Answered, ReceiveError> {
        let arrived = Instant::now();
        let now = self.clock.now();
        let (checked, body) = check(
            Mode::Direct,
            &self.verifier,
            &headers,
            webhook_id,
            body,
            now,
        )?;
        match self
            .store
            .claim(&checked.webhook_id, &checked.signature, now)
            .await?
        {
            Claim::New => {}
            Claim::Duplicate => return Ok(Answered::Duplicate),
            Claim::InFlight => return Err(ReceiveError::InFlight),
            Claim::Replayed => return Err(ReceiveError::Replayed),
        }
        let left = self.deadline.saturating_sub(arrived.elapsed());
        if left.is_zero() {
            tracing::warn!(webhook_id = %checked.webhook_id,
                "claiming the webhook id used the whole deadline; released without processing");
            self.store.release(&checked.webhook_id).await?;
            return Err(ReceiveError::HandlerTimedOut);
        }
        let received = Received {
            webhook_id: checked.webhook_id,
            event: checked.event,
            attempt: 1,
            body: body.as_ref().into(),
            received_at: now,
            signature: Some(checked.signature),
            check: Default::default(),
        };
        self.run_claimed(received, left)
            .await
            .map(|()| Answered::Accepted)
    }

    /// Runs user code on a claimed event in a task of its own, so that the deadline (or the
    /// sender hanging up) does not cancel it half-way: its outcome, a panic included, completes
    /// or releases the claim whenever it comes. Waits for that outcome at most `left`.
    async fn run_claimed(
        self: &Arc<Self>,
        received: Received,
        left: Duration,
    ) -> Result<(), ReceiveError> {
        let this = Arc::clone(self);
        // In the delivery's span, so that user code's log events carry the webhook id too.
        let span = tracing::Span::current();
        let task = tokio::spawn(
            async move {
                let id = received.webhook_id.clone();
                let outcome = run_handler(&*this.handler, received, "direct").await;
                let settled = match &outcome {
                    Ok(()) => this.store.complete(&id, this.clock.now()).await,
                    Err(_) => this.store.release(&id).await,
                };
                match settled {
                    Ok(()) => outcome.map_err(ReceiveError::Handler),
                    Err(err) => Err(ReceiveError::Store(err)),
                }
            }
            .instrument(span),
        );
        match tokio::time::timeout(left, task).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => Err(ReceiveError::Handler(format!(
                "handler task failed: {join}"
            ))),
            Err(_) => Err(ReceiveError::HandlerTimedOut),
        }
    }
}

/// A POST route for direct mode, mountable in a router of any state:
/// `Router::new().route("/webhooks/svc", webhook_route(receiver))`.
///
/// Answers 200 when user code succeeded or the id was already processed (duplicate), and the
/// status of [`ReceiveError::http_status`] otherwise. Every log event of a delivery, user
/// code's included, is recorded in a `webhook_delivery` span carrying its `webhook_id`.
pub fn webhook_route<S, H, T>(receiver: WebhookReceiver<S, H>) -> MethodRouter<T>
where
    S: DedupStore,
    H: EventHandler,
    T: Clone + Send + Sync + 'static,
{
    crate::metrics::describe();
    let limit = receiver.verifier.max_body_bytes();
    post(
        |State(receiver): State<Arc<WebhookReceiver<S, H>>>,
         headers: HeaderMap,
         body: Result<Bytes, BytesRejection>| async move {
            let id = webhook_id(&headers);
            let span = request_span(id.as_ref(), &headers);
            async move { answer(Mode::Direct, receiver.receive(headers, id, body).await) }
                .instrument(span)
                .await
        },
    )
    .layer(DefaultBodyLimit::max(limit))
    .with_state(Arc::new(receiver))
}
