//! Inbox mode: verify, then commit the event to a durable [`Inbox`] (SQLite or PostgreSQL)
//! before answering 2xx. User code runs later, from the inbox
//! ([`crate::inbox::run_inbox_worker`]).

use std::sync::Arc;

use ::axum::body::Bytes;
use ::axum::extract::rejection::BytesRejection;
use ::axum::extract::{DefaultBodyLimit, State};
use ::axum::http::HeaderMap;
use ::axum::routing::{MethodRouter, post};

use tracing::Instrument;

use super::request::{Answered, ReceiveError, answer, check, request_span, webhook_id};
use crate::TraceParent;
use crate::inbox::{Accepted, Inbox};
use crate::metrics::Mode;
use svc_contract::Verifier;
use svc_contract::WebhookId;
use svc_contract::{Clock, SystemClock};

/// What the inbox-mode handler needs: verifier, inbox and clock.
#[derive(Clone)]
pub struct InboxReceiver<I> {
    verifier: Verifier,
    inbox: I,
    clock: Arc<dyn Clock>,
}

impl<I: std::fmt::Debug> std::fmt::Debug for InboxReceiver<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxReceiver")
            .field("verifier", &self.verifier)
            .field("inbox", &self.inbox)
            .finish_non_exhaustive()
    }
}

impl<I: Inbox> InboxReceiver<I> {
    /// A receiver storing into `inbox`, using the system clock.
    pub fn new(verifier: Verifier, inbox: I) -> Self {
        Self {
            verifier,
            inbox,
            clock: Arc::new(SystemClock),
        }
    }

    /// Reads "now" from `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    async fn receive(
        &self,
        headers: HeaderMap,
        webhook_id: Option<WebhookId>,
        body: Result<Bytes, BytesRejection>,
    ) -> Result<Answered, ReceiveError> {
        let now = self.clock.now();
        let (checked, body) = check(Mode::Inbox, &self.verifier, &headers, webhook_id, body, now)?;
        let trace = TraceParent::from_headers(&headers);
        match self
            .inbox
            .accept_traced(
                &checked.webhook_id,
                &checked.signature,
                &body,
                trace.as_ref(),
                now,
            )
            .await?
        {
            Accepted::Stored => Ok(Answered::Accepted),
            Accepted::Duplicate => Ok(Answered::Duplicate),
            Accepted::Replayed => Err(ReceiveError::Replayed),
        }
    }
}

/// A POST route for inbox mode: answers 200 once the event is durably stored (or was already),
/// and the status of [`ReceiveError::http_status`] otherwise. Its log events, and those of
/// the worker that hands the entry to user code, carry the delivery's `webhook_id`.
pub fn inbox_route<I, T>(receiver: InboxReceiver<I>) -> MethodRouter<T>
where
    I: Inbox,
    T: Clone + Send + Sync + 'static,
{
    crate::metrics::describe();
    let limit = receiver.verifier.max_body_bytes();
    post(
        |State(receiver): State<Arc<InboxReceiver<I>>>,
         headers: HeaderMap,
         body: Result<Bytes, BytesRejection>| async move {
            let id = webhook_id(&headers);
            let span = request_span(id.as_ref(), &headers);
            async move { answer(Mode::Inbox, receiver.receive(headers, id, body).await) }
                .instrument(span)
                .await
        },
    )
    .layer(DefaultBodyLimit::max(limit))
    .with_state(Arc::new(receiver))
}
