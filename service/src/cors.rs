//! Cross-origin policy. The API-key endpoints refuse cross-origin requests: they carry no
//! CORS layer, so no response (preflight included) has any `Access-Control-Allow-*` header
//! and a browser blocks the call. Only the SDK's redeem endpoint accepts them; mount it
//! with [`with_sdk_cors`].

use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, Method, header};
use tower_http::cors::{Any, CorsLayer};

/// The permissive policy of `POST /v1/roleplay/session` (the single-use token is the trust
/// boundary): any origin, `POST`, the `Authorization` and `Content-Type` headers, and the
/// request id exposed to the page.
pub fn sdk_cors_layer() -> CorsLayer {
    CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::POST])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
        .expose_headers([HeaderName::from_static("x-service-request-id")])
        .max_age(Duration::from_secs(600))
}

/// Wraps `routes` (only the redeem route) in the SDK's CORS policy.
pub fn with_sdk_cors<S>(routes: Router<S>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    routes.layer(sdk_cors_layer())
}
