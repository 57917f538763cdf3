//! The parts both modes share: reading the headers and body, verifying, and the one mapping
//! from every way a request can fail to an HTTP answer.

use ::axum::body::Bytes;
use ::axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use ::axum::http::{HeaderMap, StatusCode};
use ::axum::response::{IntoResponse, Response};
use thiserror::Error;

use crate::dedup::{StoreError, WebhookId};
use crate::error::{MalformedHeader, VerifyError};
use crate::event::CallScored;
use crate::verify::Verifier;

/// The signature header name.
pub const SIGNATURE_HEADER: &str = "x-service-signature";
/// The idempotency key header name.
pub const WEBHOOK_ID_HEADER: &str = "x-service-webhook-id";

/// Every way receiving a delivery can fail, each with a fixed HTTP status.
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
}

impl ReceiveError {
    /// The HTTP status answered for this failure.
    pub fn http_status(&self) -> StatusCode {
        match self {
            Self::Verify(err) => {
                StatusCode::from_u16(err.http_status()).unwrap_or(StatusCode::BAD_REQUEST)
            }
            Self::UnreadableBody | Self::InvalidWebhookId => StatusCode::BAD_REQUEST,
            Self::Replayed => StatusCode::UNAUTHORIZED,
            Self::InFlight => StatusCode::CONFLICT,
            Self::Store(_) | Self::HandlerTimedOut => StatusCode::SERVICE_UNAVAILABLE,
            Self::Handler(_) => StatusCode::INTERNAL_SERVER_ERROR,
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
        }
    }
}

impl IntoResponse for ReceiveError {
    fn into_response(self) -> Response {
        // The whole chain, so that the cause of a store of one's own reaches the log.
        let mut error = self.to_string();
        let mut source = std::error::Error::source(&self);
        while let Some(cause) = source {
            error.push_str(": ");
            error.push_str(&cause.to_string());
            source = cause.source();
        }
        if self.http_status().is_server_error() {
            tracing::error!(%error, "webhook delivery not processed");
        } else {
            tracing::warn!(%error, "webhook delivery rejected");
        }
        let body = ::axum::Json(serde_json::json!({ "error": self.public_message() }));
        (self.http_status(), body).into_response()
    }
}

/// A delivery that passed verification and decoding.
pub(crate) struct Checked {
    pub(crate) webhook_id: WebhookId,
    pub(crate) signature: [u8; 32],
    pub(crate) event: CallScored,
}

/// Reads and checks one request: body limit, signature, id, decode, in that order.
pub(crate) fn check(
    verifier: &Verifier,
    headers: &HeaderMap,
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
    let mut values = headers.get_all(SIGNATURE_HEADER).iter();
    let header = values.next().ok_or(VerifyError::MissingHeader)?;
    if values.next().is_some() {
        return Err(VerifyError::MalformedHeader(MalformedHeader::Repeated).into());
    }
    let delivery = verifier.verify(header.as_bytes(), &body, now)?;
    let mut ids = headers.get_all(WEBHOOK_ID_HEADER).iter();
    let webhook_id = match (ids.next(), ids.next()) {
        (Some(value), None) => WebhookId::parse(value.as_bytes()).ok(),
        _ => None,
    }
    .ok_or(ReceiveError::InvalidWebhookId)?;
    let event = delivery.decode()?;
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
