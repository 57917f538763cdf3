//! What the routes and the extractor add to the shared checks of [`crate::receive`]: axum's
//! body rejections read as [`ReceiveError`]s, and the answer as an axum response.

use ::axum::body::Bytes;
use ::axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use ::axum::http::{HeaderMap, StatusCode};
use ::axum::response::{IntoResponse, Response};

use crate::metrics::{self, Mode};
use crate::receive::{Checked, rejection_response};
use svc_contract::{Verifier, VerifyError, WebhookId};

use crate::TraceParent;
use crate::handler::delivery_span_in_trace;
pub(crate) use crate::receive::{ReceiveError, webhook_id};

/// The response: the status, and `{"error": "<fixed text>"}` for a failure. Logging is done
/// before, by whoever produced the error (the routes and the extractor log inside the
/// delivery's span, so that every log event of a delivery carries its webhook id).
impl IntoResponse for ReceiveError {
    fn into_response(self) -> Response {
        rejection_response(&self)
            .map(::axum::body::Body::from)
            .into_response()
    }
}

/// The span of a request to a route: the delivery's span (`crate::handler::delivery_span`), in
/// the sender's trace when the request
/// carries a well-formed `traceparent` (see [`TraceParent`]).
pub(crate) fn request_span(id: Option<&WebhookId>, headers: &HeaderMap) -> tracing::Span {
    delivery_span_in_trace(id, TraceParent::from_headers(headers).as_ref())
}

/// A delivery the routes answer 200 for, other than an unknown event acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answered {
    /// Processed (direct mode) or durably stored (inbox mode).
    Accepted,
    /// Already processed or stored under this id.
    Duplicate,
}

/// Counts and logs a route's outcome (inside the delivery's span, whose `outcome` it records:
/// the label of [`metrics::DELIVERIES`]) and turns it into the response.
pub(crate) fn answer(mode: Mode, outcome: Result<Answered, ReceiveError>) -> Response {
    let span = tracing::Span::current();
    match outcome {
        Ok(answered) => {
            let label = match answered {
                Answered::Accepted => "accepted",
                Answered::Duplicate => "duplicate",
            };
            metrics::delivery(mode, label);
            span.record("outcome", label);
            StatusCode::OK.into_response()
        }
        Err(err) => {
            metrics::delivery(mode, err.outcome());
            span.record("outcome", err.outcome());
            err.log();
            err.into_response()
        }
    }
}

/// [`crate::receive::check`] over the body as axum read it: over the route's limit is 413,
/// any other failure to read it 400.
pub(crate) fn check(
    mode: Mode,
    verifier: &Verifier,
    headers: &HeaderMap,
    webhook_id: Option<WebhookId>,
    body: Result<Bytes, BytesRejection>,
    now: i64,
) -> Result<(Checked, Bytes), ReceiveError> {
    let body = body.map_err(|rejection| match rejection {
        BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => {
            ReceiveError::Verify(VerifyError::BodyTooLarge {
                limit: verifier.max_body_bytes(),
            })
        }
        _ => ReceiveError::UnreadableBody,
    });
    crate::receive::check(mode, verifier, headers, webhook_id, body, now)
}
