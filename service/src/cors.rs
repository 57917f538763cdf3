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

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::routing::post;
    use tower::ServiceExt as _;

    use super::*;

    fn preflight(path: &str) -> Request<Body> {
        Request::builder()
            .method(Method::OPTIONS)
            .uri(path)
            .header(header::ORIGIN, "https://app.example")
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .header(
                header::ACCESS_CONTROL_REQUEST_HEADERS,
                "authorization,content-type",
            )
            .body(Body::empty())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn only_the_route_mounted_with_sdk_cors_answers_preflights() {
        let app: Router = Router::new()
            .route("/agents", post(|| async { "roster" }))
            .merge(with_sdk_cors(
                Router::new().route("/roleplay/session", post(|| async { "redeem" })),
            ));
        let sdk = app.clone().oneshot(preflight("/roleplay/session")).await;
        let sdk = sdk.map(|r| (r.status(), r.headers().clone()));
        let (status, headers) = sdk.unwrap_or((StatusCode::IM_A_TEAPOT, Default::default()));
        assert!(status.is_success());
        assert_eq!(
            headers
                .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
                .map(|v| v.as_bytes()),
            Some(&b"*"[..])
        );
        let roster = app.oneshot(preflight("/agents")).await;
        let headers = roster.map(|r| r.headers().clone()).unwrap_or_default();
        assert!(
            headers
                .keys()
                .all(|name| !name.as_str().starts_with("access-control-"))
        );
    }
}
