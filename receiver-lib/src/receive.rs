//! What every HTTP integration shares (the axum routes and extractor, the tower layer):
//! reading the webhook id, verifying and decoding a delivery's raw bytes, and the one mapping
//! from every way receiving can fail to a status and a fixed short text.

use http::{HeaderMap, StatusCode};
use thiserror::Error;

use crate::StoreError;
use crate::metrics::{Mode, Stopwatch};
use svc_contract::CallScored;
use svc_contract::VerifyError;
use svc_contract::WEBHOOK_ID_HEADER;
use svc_contract::WebhookId;
use svc_contract::{UnknownEvents, Verifier, signature_header};

/// Every way receiving a delivery can end without user code processing it, each with a fixed
/// HTTP status. All but one are failures the sender sees as such; an unknown event
/// acknowledged by choice ([`ReceiveError::UnknownEventAcknowledged`]) answers 200.
///
/// The axum routes and extractor (feature `axum`) and the tower layer (feature `tower`)
/// answer with these statuses and [`public_message`](Self::public_message)s alike; the layer
/// and the extractor meet only those of reading and verifying (deduplicating and running user
/// code are the routes').
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

    /// The `outcome` label of [`crate::metrics::DELIVERIES`] for this error.
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

/// The `X-Service-Webhook-Id` of a request: exactly one, well formed.
pub(crate) fn webhook_id(headers: &HeaderMap) -> Option<WebhookId> {
    let mut ids = headers.get_all(WEBHOOK_ID_HEADER).iter();
    match (ids.next(), ids.next()) {
        (Some(value), None) => WebhookId::parse(value.as_bytes()).ok(),
        _ => None,
    }
}

/// The answer to a delivery refused (or acknowledged unprocessed): the status, and for a
/// failure the JSON body `{"error": "<fixed text>"}`. The routes, the extractor and the tower
/// layer all answer with it, so the sender sees the same bytes from each.
pub(crate) fn rejection_response(error: &ReceiveError) -> http::Response<Vec<u8>> {
    let status = error.http_status();
    let mut response = if status.is_success() {
        http::Response::new(Vec::new())
    } else {
        let body = serde_json::json!({ "error": error.public_message() });
        let mut response = http::Response::new(body.to_string().into_bytes());
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    };
    *response.status_mut() = status;
    response
}

/// A delivery that passed verification and decoding.
pub(crate) struct Checked {
    pub(crate) webhook_id: WebhookId,
    pub(crate) signature: [u8; 32],
    /// The signed timestamp (unix seconds).
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) timestamp: i64,
    pub(crate) event: CallScored,
}

/// Checks one request whose body was read (or failed to be, with the error that says why):
/// body limit, signature, id, decode, in that order (timed as [`crate::metrics::VERIFY_SECONDS`]).
/// An event this version does not know is [`ReceiveError::UnknownEventAcknowledged`] when
/// the verifier acknowledges them.
pub(crate) fn check<B: AsRef<[u8]>>(
    mode: Mode,
    verifier: &Verifier,
    headers: &HeaderMap,
    webhook_id: Option<WebhookId>,
    body: Result<B, ReceiveError>,
    now: i64,
) -> Result<(Checked, B), ReceiveError> {
    let stopwatch = Stopwatch::start();
    let checked = body.and_then(|body| {
        let checked = check_body(verifier, headers, webhook_id, body.as_ref(), now)?;
        Ok((checked, body))
    });
    stopwatch.verified(mode);
    checked
}

fn check_body(
    verifier: &Verifier,
    headers: &HeaderMap,
    webhook_id: Option<WebhookId>,
    body: &[u8],
    now: i64,
) -> Result<Checked, ReceiveError> {
    let delivery = verifier.verify(signature_header(headers)?, body, now)?;
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
    Ok(Checked {
        webhook_id,
        signature: *delivery.signature(),
        timestamp: delivery.timestamp(),
        event,
    })
}
