//! [`Verified`] as an axum extractor (features `tower` and `axum`), for handlers behind
//! [`VerifyWebhookLayer`](super::VerifyWebhookLayer).

use ::axum::extract::FromRequestParts;
use ::axum::http::request::Parts;
use ::axum::http::{HeaderValue, StatusCode, header::CONTENT_TYPE};
use ::axum::response::{IntoResponse, Response};
use thiserror::Error;

use super::Verified;

/// The fixed text answered when the layer is missing.
const NOT_VERIFIED: &str = r#"{"error":"delivery not verified"}"#;

/// The extractor's rejection: the request did not go through
/// [`VerifyWebhookLayer`](super::VerifyWebhookLayer), so there is nothing verified to hand
/// the handler. That is a mistake in the receiver's set-up, not the sender's: it is logged
/// at error level (naming the fix) and answered `503` with
/// `{"error": "delivery not verified"}`, so the sender retries once the layer is in place,
/// and the handler does not run.
#[derive(Debug, Clone, Copy, Error)]
#[error("no verified delivery in the request: VerifyWebhookLayer is not in front of this route")]
#[non_exhaustive]
pub struct MissingVerifyLayer;

impl IntoResponse for MissingVerifyLayer {
    fn into_response(self) -> Response {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            NOT_VERIFIED,
        )
            .into_response()
    }
}

/// The delivery [`VerifyWebhookLayer`](super::VerifyWebhookLayer) verified, read from the
/// request's extensions. Without the layer in front of the route, [`MissingVerifyLayer`].
impl<S: Send + Sync> FromRequestParts<S> for Verified {
    type Rejection = MissingVerifyLayer;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Self>().cloned().ok_or_else(|| {
            tracing::error!(
                path = %parts.uri.path(),
                "{MissingVerifyLayer}; add svc_receiver::tower::VerifyWebhookLayer to the route"
            );
            MissingVerifyLayer
        })
    }
}
