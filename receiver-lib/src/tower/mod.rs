//! Verification as a tower [`Layer`](tower_layer::Layer) (feature `tower`), for any
//! tower-based server: hyper's, axum, or a stack of your own. No axum and no server needed.
//!
//! [`VerifyWebhookLayer`] reads the body under the verifier's size limit (413, before reading
//! more, when the request declares or sends more), verifies it over the raw bytes (signature
//! header, timestamp tolerance, HMAC under the keyring), checks the `X-Service-Webhook-Id` and
//! decodes the event: the same checks as the axum routes, answered with the same statuses and
//! the same fixed JSON texts (see [`ReceiveError`](crate::ReceiveError)). A delivery that
//! passes reaches the inner service with its body bytes unchanged (as an
//! `http_body_util::Full<Bytes>`) and a [`Verified`] in the request's extensions; one that
//! fails never reaches it. An event this version does not know is refused with 400, or
//! answered 200 without calling the inner service when the verifier acknowledges them.
//!
//! The layer does not deduplicate: it remembers nothing between requests. The sender retries
//! a delivery it got no 2xx for and sends some twice, and a captured delivery can be replayed
//! within the timestamp tolerance; claim [`Verified::webhook_id`] with
//! [`Verified::signature`] in a [`DedupStore`](crate::dedup::DedupStore) in the inner service
//! (completing the claim on success, releasing it on failure), or record the delivery in your
//! own transaction (`exactly_once`, from [`Verified::received`]). The axum routes do all of it.
//!
//! Rejections are logged (`tracing`, with the detailed reason) and counted (`mode` `layer`,
//! feature `metrics`), and the whole request, the inner service included, runs inside the
//! delivery's `webhook_delivery` span carrying its `webhook_id`. With feature `axum` too,
//! [`Verified`] is an axum extractor.

#[cfg(feature = "axum")]
mod extract;
mod layer;
mod verified;

#[cfg(feature = "axum")]
pub use extract::MissingVerifyLayer;
pub use layer::{ResponseBody, VerifyWebhook, VerifyWebhookLayer};
pub use verified::Verified;
