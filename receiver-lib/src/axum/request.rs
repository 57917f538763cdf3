//! The parts both modes share: reading the headers and body, verifying, and the one mapping
//! from every way a request can fail to an HTTP answer.

use ::axum::body::Bytes;
use ::axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use ::axum::http::{HeaderMap, StatusCode};
use ::axum::response::{IntoResponse, Response};
use thiserror::Error;

use crate::StoreError;
use crate::metrics::{self, Mode, Stopwatch};
use svc_contract::CallScored;
use svc_contract::VerifyError;
use svc_contract::WebhookId;
use svc_contract::{UnknownEvents, Verifier, signature_header};

use crate::TraceParent;
use crate::handler::delivery_span_in_trace;

use svc_contract::WEBHOOK_ID_HEADER;

/// Every way receiving a delivery can end without user code processing it, each with a fixed
/// HTTP status. All but one are failures the sender sees as such; an unknown event
/// acknowledged by choice ([`ReceiveError::UnknownEventAcknowledged`]) answers 200.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReceiveError {
    /// Verification or decoding failed (status from [`VerifyError::http_status`]).
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// The body could not be read (the client went away or sent a broken body): 400.
    #[error("the request body could not be read")]
    UnreadableBody,
    /// No valid `X-Service-Webhook-Id`: 400.
    #[error("missing or invalid X-Service-Webhook-Id")]
    InvalidWebhookId,
    /// A verified signature already seen under another id: 401.
    #[error("signature already used by another webhook id (replay)")]
    Replayed,
    /// The same id is being processed by another request: 409, so the sender may retry.
    #[error("this webhook id is being processed by another request")]
    InFlight,
    /// The store failed: 503, so the sender retries.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// User code failed or panicked: 500, so the sender retries (the claim is released).
    #[error("webhook handler failed: {0}")]
    Handler(String),
    /// The deadline, counted from the request's arrival, passed: 503. Either user code did not
    /// finish (it keeps running; its result still completes or releases the claim) or claiming
    /// the id used the whole deadline (the claim was released without running user code).
    #[error("webhook handler did not finish within the deadline")]
    HandlerTimedOut,
    /// A verified delivery of an event this version does not know, acknowledged because the
    /// verifier was built with [`UnknownEvents::Acknowledge`]: 200, logged, not processed.
    #[error("unknown event {event:?} acknowledged without processing")]
    UnknownEventAcknowledged {
        /// The `event` value, at most 64 characters of it.
        event: String,
    },
}

impl ReceiveError {
    /// The HTTP status answered for this outcome (the same type as
    /// [`VerifyError::http_status`]).
    pub fn http_status(&self) -> StatusCode {
        match self {
            Self::Verify(err) => err.http_status(),
            Self::UnreadableBody | Self::InvalidWebhookId => StatusCode::BAD_REQUEST,
            Self::Replayed => StatusCode::UNAUTHORIZED,
            Self::InFlight => StatusCode::CONFLICT,
            Self::Store(_) | Self::HandlerTimedOut => StatusCode::SERVICE_UNAVAILABLE,
            Self::Handler(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::UnknownEventAcknowledged { .. } => StatusCode::OK,
        }
    }

    /// The fixed text sent back to the sender (never a hint or internal detail).
    pub fn public_message(&self) -> &'static str {
        match self {
            Self::Verify(err) => err.public_message(),
            Self::UnreadableBody => "unreadable body",
            Self::InvalidWebhookId => "missing or invalid webhook id",
            Self::Replayed => "replayed delivery",
            Self::InFlight => "delivery in progress",
            Self::Store(_) => "temporarily unavailable",
            Self::Handler(_) => "processing failed",
            Self::HandlerTimedOut => "processing timed out",
            Self::UnknownEventAcknowledged { .. } => "unknown event acknowledged",
        }
    }

    /// The `outcome` label of [`metrics::DELIVERIES`] for this error.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            Self::Verify(err) => match err {
                VerifyError::MissingHeader | VerifyError::MalformedHeader(_) => "bad_header",
                VerifyError::TimestampTooOld { .. } | VerifyError::TimestampInFuture { .. } => {
                    "stale"
                }
                VerifyError::NoMatchingSignature { .. } => "bad_signature",
                VerifyError::BodyTooLarge { .. } => "too_large",
                VerifyError::InvalidEvent { .. } => "bad_body",
                VerifyError::UnknownEvent { .. } => "unknown_event",
                // A reason a later svc-contract adds, until it has a label of its own.
                _ => "rejected",
            },
            Self::UnreadableBody => "bad_body",
            Self::InvalidWebhookId => "bad_id",
            Self::Replayed => "replayed",
            Self::InFlight => "in_flight",
            Self::Store(_) => "store_error",
            Self::Handler(_) => "handler_failed",
            Self::HandlerTimedOut => "handler_timed_out",
            Self::UnknownEventAcknowledged { .. } => "unknown_event",
        }
    }

    /// Logs why the delivery was not processed, with the whole chain of causes: an error for
    /// what the receiver should fix (5xx), a warning otherwise. The integrations call it inside
    /// the delivery's span, so the event carries the webhook id.
    pub(crate) fn log(&self) {
        // The whole chain, so that the cause of a store of one's own reaches the log.
        let mut error = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            error.push_str(": ");
            error.push_str(&cause.to_string());
            source = cause.source();
        }
        match self.http_status() {
            status if status.is_server_error() => {
                tracing::error!(%error, %status, "webhook delivery not processed");
            }
            status if status.is_success() => {
                tracing::warn!(%error, %status, "webhook delivery acknowledged, not processed");
            }
            status => tracing::warn!(%error, %status, "webhook delivery rejected"),
        }
    }
}

/// The response: the status, and `{"error": "<fixed text>"}` for a failure. Logging is done
/// before, by whoever produced the error (the routes and the extractor log inside the
/// delivery's span, so that every log event of a delivery carries its webhook id).
impl IntoResponse for ReceiveError {
    fn into_response(self) -> Response {
        let status = self.http_status();
        if status.is_success() {
            return status.into_response();
        }
        let body = ::axum::Json(serde_json::json!({ "error": self.public_message() }));
        (status, body).into_response()
    }
}

/// The `X-Service-Webhook-Id` of a request: exactly one, well formed.
pub(crate) fn webhook_id(headers: &HeaderMap) -> Option<WebhookId> {
    let mut ids = headers.get_all(WEBHOOK_ID_HEADER).iter();
    match (ids.next(), ids.next()) {
        (Some(value), None) => WebhookId::parse(value.as_bytes()).ok(),
        _ => None,
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

/// A delivery that passed verification and decoding.
pub(crate) struct Checked {
    pub(crate) webhook_id: WebhookId,
    pub(crate) signature: [u8; 32],
    pub(crate) event: CallScored,
}

/// Reads and checks one request: body limit, signature, id, decode, in that order (timed as
/// [`metrics::VERIFY_SECONDS`]). An event this version does not know is
/// [`ReceiveError::UnknownEventAcknowledged`] when the verifier acknowledges them.
pub(crate) fn check(
    mode: Mode,
    verifier: &Verifier,
    headers: &HeaderMap,
    webhook_id: Option<WebhookId>,
    body: Result<Bytes, BytesRejection>,
    now: i64,
) -> Result<(Checked, Bytes), ReceiveError> {
    let stopwatch = Stopwatch::start();
    let checked = check_untimed(verifier, headers, webhook_id, body, now);
    stopwatch.verified(mode);
    checked
}

fn check_untimed(
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
    })?;
    let delivery = verifier.verify(signature_header(headers)?, &body, now)?;
    let webhook_id = webhook_id.ok_or(ReceiveError::InvalidWebhookId)?;
    let event = match delivery.decode() {
        Ok(event) => event,
        Err(VerifyError::UnknownEvent { event })
            if verifier.unknown_events() == UnknownEvents::Acknowledge =>
        {
            return Err(ReceiveError::UnknownEventAcknowledged { event });
        }
        Err(err) => return Err(err.into()),
    };
    let signature = *delivery.signature();
    Ok((
        Checked {
            webhook_id,
            signature,
            event,
        },
        body,
    ))
}
