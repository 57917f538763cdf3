//! The browser SDK, served by the service itself: `GET /sdk/v1/svc-sdk.js` (one
//! dependency-free ES module, no build step) and `GET /sdk/v1/svc-sdk.d.ts` (its hand-written
//! types), both embedded in the binary. Any origin may load them: a page imports the module
//! cross-origin, and a module script is fetched in CORS mode. They hold no secret.
//!
//! Each answer carries a strong `ETag` (a hash of the file) and `Cache-Control: no-cache`, so a
//! browser revalidates on every load (a `304` when unchanged) and never runs an SDK older than
//! the service it talks to.

use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};
use tower_http::cors::{Any, CorsLayer};

/// The SDK module.
pub const SDK_JS: &str = include_str!("svc-sdk.js");
/// Its TypeScript declarations.
pub const SDK_TYPES: &str = include_str!("svc-sdk.d.ts");
/// Where the module is served.
pub const SDK_JS_PATH: &str = "/sdk/v1/svc-sdk.js";
/// Where the declarations are served.
pub const SDK_TYPES_PATH: &str = "/sdk/v1/svc-sdk.d.ts";

/// One embedded file and how it is served.
struct Asset {
    body: &'static str,
    content_type: &'static str,
    etag: String,
}

impl Asset {
    fn new(body: &'static str, content_type: &'static str) -> Self {
        let digest = Sha256::digest(body.as_bytes());
        Self {
            body,
            content_type,
            etag: format!("\"{}\"", hex::encode(&digest[..12])),
        }
    }

    fn serve(&self, headers: &HeaderMap) -> Response {
        let etag = HeaderValue::from_str(&self.etag).ok();
        let unchanged = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|tags| {
                tags.split(',')
                    .any(|tag| tag.trim() == self.etag || tag.trim() == "*")
            });
        let mut response = if unchanged {
            StatusCode::NOT_MODIFIED.into_response()
        } else {
            (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(self.content_type),
                )],
                self.body,
            )
                .into_response()
        };
        let headers = response.headers_mut();
        if let Some(etag) = etag {
            headers.insert(header::ETAG, etag);
        }
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        response
    }
}

static MODULE: LazyLock<Asset> =
    LazyLock::new(|| Asset::new(SDK_JS, "text/javascript; charset=utf-8"));
// `.d.ts` has no registered media type; plain text shows in a browser tab and downloads as is.
static TYPES: LazyLock<Asset> =
    LazyLock::new(|| Asset::new(SDK_TYPES, "text/plain; charset=utf-8"));

/// The SDK's routes (at the root, beside `/v1`), open to every origin for `GET`.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route(
            SDK_JS_PATH,
            get(|headers: HeaderMap| async move { MODULE.serve(&headers) }),
        )
        .route(
            SDK_TYPES_PATH,
            get(|headers: HeaderMap| async move { TYPES.serve(&headers) }),
        )
        .layer(
            CorsLayer::new()
                .allow_origin(Any)
                .allow_methods([Method::GET, Method::HEAD])
                .expose_headers([header::ETAG]),
        )
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    use super::*;

    async fn get(path: &str, if_none_match: Option<&str>) -> Response {
        let mut request = Request::get(path).header(header::ORIGIN, "http://localhost:5173");
        if let Some(tag) = if_none_match {
            request = request.header(header::IF_NONE_MATCH, tag);
        }
        let request = request.body(Body::empty()).unwrap_or_default();
        match router::<()>().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    fn header_of(response: &Response, name: header::HeaderName) -> &str {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    #[tokio::test]
    async fn the_module_is_served_as_javascript_to_any_origin_and_revalidated() {
        let response = get(SDK_JS_PATH, None).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            header_of(&response, header::CONTENT_TYPE),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(
            header_of(&response, header::ACCESS_CONTROL_ALLOW_ORIGIN),
            "*"
        );
        assert_eq!(header_of(&response, header::CACHE_CONTROL), "no-cache");
        let etag = header_of(&response, header::ETAG).to_owned();
        assert!(etag.starts_with('"') && etag.len() == 26, "{etag}");

        let again = get(SDK_JS_PATH, Some(&etag)).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        let other = get(SDK_JS_PATH, Some("\"something-else\"")).await;
        assert_eq!(other.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn the_types_are_served_beside_the_module() {
        let response = get(SDK_TYPES_PATH, None).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            header_of(&response, header::CONTENT_TYPE),
            "text/plain; charset=utf-8"
        );
        assert!(SDK_TYPES.contains("export declare class SvcCall"));
    }

    #[test]
    fn the_module_exports_what_its_types_declare() {
        for name in ["SvcCall", "SvcUsageError", "SDK_VERSION", "EVENTS"] {
            assert!(
                SDK_JS.contains(&format!("export class {name}"))
                    || SDK_JS.contains(&format!("export const {name}")),
                "svc-sdk.js exports {name}"
            );
            assert!(SDK_TYPES.contains(name), "svc-sdk.d.ts declares {name}");
        }
        assert!(
            !SDK_JS.lines().any(|line| line.starts_with("import ")),
            "the module has no dependency"
        );
    }
}
