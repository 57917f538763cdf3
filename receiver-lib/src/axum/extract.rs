//! The [`VerifiedWebhook`] extractor, for handlers that want their own flow: it verifies and
//! decodes, and leaves deduplication to the handler (see [`crate::dedup::DedupStore`]).

use std::sync::Arc;

use ::axum::body::Bytes;
use ::axum::extract::{FromRef, FromRequest, Request};

use tracing::Instrument;

use super::request::{ReceiveError, check, request_span, webhook_id};
use crate::metrics::{self, Mode};
use svc_contract::CallScored;
use svc_contract::Clock;
use svc_contract::Verifier;
use svc_contract::WebhookId;

/// What the extractor needs from the router state: the verifier and the clock.
#[derive(Clone)]
pub struct VerifyState {
    verifier: Arc<Verifier>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for VerifyState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyState")
            .field("verifier", &self.verifier)
            .finish_non_exhaustive()
    }
}

impl VerifyState {
    /// State for the extractor, reading "now" from `clock` (use [`svc_contract::SystemClock`]).
    pub fn new(verifier: Verifier, clock: impl Clock) -> Self {
        Self {
            verifier: Arc::new(verifier),
            clock: Arc::new(clock),
        }
    }
}

/// A verified, decoded delivery. Rejections answer the fixed status of [`ReceiveError`] and
/// are logged with the delivery's webhook id (an unknown event acknowledged by choice answers
/// 200 without running the handler).
///
/// The body is read under the route's `DefaultBodyLimit` (axum's default is 2 MB); add
/// `DefaultBodyLimit::max(verifier.max_body_bytes())` to the route to read no more than the
/// verifier accepts. This extractor does not deduplicate: claim
/// [`webhook_id`](Self::webhook_id) with [`signature`](Self::signature) in a
/// [`crate::dedup::DedupStore`], or use [`super::webhook_route`], which does it all.
#[derive(Debug, Clone)]
pub struct VerifiedWebhook {
    /// The `X-Service-Webhook-Id`.
    pub webhook_id: WebhookId,
    /// The matched signature, for replay protection.
    pub signature: [u8; 32],
    /// The decoded event.
    pub event: CallScored,
}

impl<S> FromRequest<S> for VerifiedWebhook
where
    VerifyState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ReceiveError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let verify = VerifyState::from_ref(state);
        let headers = request.headers().clone();
        let id = webhook_id(&headers);
        let span = request_span(id.as_ref(), &headers);
        async move {
            let body = Bytes::from_request(request, state).await;
            let now = verify.clock.now();
            let (checked, _) = check(Mode::Extractor, &verify.verifier, &headers, id, body, now)
                .inspect_err(|err| {
                    // The rejection is counted and logged here, in the delivery's span, with its
                    // webhook id.
                    metrics::delivery(Mode::Extractor, err.outcome());
                    tracing::Span::current().record("outcome", err.outcome());
                    err.log();
                })?;
            Ok(Self {
                webhook_id: checked.webhook_id,
                signature: checked.signature,
                event: checked.event,
            })
        }
        .instrument(span)
        .await
    }
}
