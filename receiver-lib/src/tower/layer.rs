//! [`VerifyWebhookLayer`] and its service: read the body under the limit, verify, and hand the
//! inner service the same bytes with the [`Verified`] delivery, or answer the rejection.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body::Body;
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use tower_layer::Layer;
use tower_service::Service;
use tracing::Instrument;

use super::Verified;
use crate::TraceParent;
use crate::handler::delivery_span_in_trace;
use crate::metrics::{self, Mode};
use crate::receive::{ReceiveError, check, rejection_response, webhook_id};
use svc_contract::{Clock, SystemClock, Verifier, VerifyError};

/// The body of the layer's responses: the inner service's (`Left`), or the layer's own
/// rejection (`Right`, the fixed JSON text).
pub type ResponseBody<B> = Either<B, Full<Bytes>>;

/// What every request of a layer's services reads: the verifier and the clock.
struct Config {
    verifier: Verifier,
    clock: Arc<dyn Clock>,
}

/// A tower [`Layer`] that verifies `call.scored` deliveries before the service it wraps
/// sees them (see [the module](super) for what is checked and answered).
///
/// ```
/// use bytes::Bytes;
/// use http::{Request, Response, StatusCode};
/// use http_body_util::Full;
/// use svc_contract::{Clock, Keyring, SigningSecret, SystemClock, Verifier, sign};
/// use svc_receiver::tower::{Verified, VerifyWebhookLayer};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let verifier = Verifier::new(Keyring::single(SigningSecret::new("whsec_fixture")?));
/// let service = VerifyWebhookLayer::new(verifier).layer(service_fn(
///     |request: Request<Full<Bytes>>| async move {
///         // Only a verified delivery gets here, with what was verified.
///         let verified = request.extensions().get::<Verified>();
///         let call_id = verified.map(|v| v.event.call_id.clone()).unwrap_or_default();
///         Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(call_id))))
///     },
/// ));
///
/// // Signed with another secret: answered 401 by the layer, the service is not called.
/// let body = r#"{"event":"call.scored"}"#;
/// let header = sign("whsec_other", SystemClock.now(), body.as_bytes());
/// let request = Request::post("/webhooks/svc")
///     .header("x-service-webhook-id", "wh_1")
///     .header("x-service-signature", header)
///     .body(Full::new(Bytes::from(body)))?;
/// let response = service.oneshot(request).await?;
/// assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct VerifyWebhookLayer {
    config: Arc<Config>,
}

impl std::fmt::Debug for VerifyWebhookLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The verifier's keys print as labels only, never the secrets.
        f.debug_struct("VerifyWebhookLayer")
            .field("verifier", &self.config.verifier)
            .finish_non_exhaustive()
    }
}

impl VerifyWebhookLayer {
    /// A layer verifying with `verifier` (its keyring, tolerance, body limit and unknown-event
    /// choice), reading "now" from the system clock.
    pub fn new(verifier: Verifier) -> Self {
        Self {
            config: Arc::new(Config {
                verifier,
                clock: Arc::new(SystemClock),
            }),
        }
    }

    /// Reads "now" from `clock` instead of the system clock.
    #[must_use]
    pub fn with_clock(self, clock: impl Clock) -> Self {
        Self {
            config: Arc::new(Config {
                verifier: self.config.verifier.clone(),
                clock: Arc::new(clock),
            }),
        }
    }
}

impl<S> Layer<S> for VerifyWebhookLayer {
    type Service = VerifyWebhook<S>;

    fn layer(&self, inner: S) -> Self::Service {
        metrics::describe();
        VerifyWebhook {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service of [`VerifyWebhookLayer`]: it takes a request of any body and calls `S` with
/// `Request<Full<Bytes>>` (the same bytes) once the delivery is verified.
#[derive(Clone)]
pub struct VerifyWebhook<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for VerifyWebhook<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyWebhook")
            .field("inner", &self.inner)
            .field("verifier", &self.config.verifier)
            .finish_non_exhaustive()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for VerifyWebhook<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    ReqBody: Body + Send + 'static,
    ReqBody::Data: Send,
    ReqBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The clone is not ready yet: the one polled ready serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let config = Arc::clone(&self.config);
        let (parts, body) = request.into_parts();
        let id = webhook_id(&parts.headers);
        // In the sender's trace when the request carries a well-formed `traceparent`.
        let span = delivery_span_in_trace(
            id.as_ref(),
            TraceParent::from_headers(&parts.headers).as_ref(),
        );
        let verify = async move {
            let limit = config.verifier.max_body_bytes();
            let body = read_body(&parts.headers, body, limit).await;
            let now = config.clock.now();
            match check(Mode::Layer, &config.verifier, &parts.headers, id, body, now) {
                Ok((checked, bytes)) => {
                    let mut request = Request::from_parts(parts, Full::new(bytes));
                    request.extensions_mut().insert(Verified::new(checked, now));
                    let response = inner.call(request).await?;
                    Ok(response.map(Either::Left))
                }
                Err(err) => {
                    metrics::delivery(Mode::Layer, err.outcome());
                    err.log();
                    let response = rejection_response(&err);
                    Ok(response.map(|body| Either::Right(Full::new(Bytes::from(body)))))
                }
            }
        };
        Box::pin(verify.instrument(span))
    }
}

/// Reads the whole body, at most `limit` bytes of it: 413 at once, before reading any, when
/// the request declares more (its `Content-Length`, or the body's own size hint), and as soon
/// as more arrives otherwise; 400 when the body cannot be read.
async fn read_body<B>(headers: &HeaderMap, body: B, limit: usize) -> Result<Bytes, ReceiveError>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let too_large = || ReceiveError::Verify(VerifyError::BodyTooLarge { limit });
    let limit_u64 = u64::try_from(limit).unwrap_or(u64::MAX);
    if declared_length(headers).is_some_and(|length| length > limit_u64)
        || body.size_hint().lower() > limit_u64
    {
        return Err(too_large());
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(err) => {
            tracing::debug!(error = %err, "reading the webhook body failed");
            Err(ReceiveError::UnreadableBody)
        }
    }
}

/// The request's `Content-Length`, when it has one that is a number (a server in front,
/// hyper's included, refuses a malformed one before the layer sees it).
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}
