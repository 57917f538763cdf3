//! The console's page: `GET /console` (HTML, with the API's base URL written into it) and its
//! script, stylesheet and icon, embedded in the binary. The page's Content-Security-Policy lets it
//! load scripts from itself and the API (the SDK module), talk to itself and the API (redeem,
//! the live socket), and nothing else: no CDN, no inline script, no frame.

use crate::html_report::escape::escape as escape_html;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};

use super::ConsoleBackend;

const HTML: &str = include_str!("assets/console.html");
const SCRIPT: &str = include_str!("assets/console.js");
const STYLESHEET: &str = include_str!("assets/console.css");
const ICON: &str = include_str!("assets/favicon.svg");
/// Where the page template takes the API's base URL.
const BASE_URL_SLOT: &str = "{{SVC_BASE_URL}}";

/// `/` and `/console/`: to the page.
pub async fn to_console() -> Redirect {
    Redirect::to("/console")
}

/// `GET /console`.
pub async fn console(State(backend): State<ConsoleBackend>) -> Response {
    let base_url = backend.api_base_url();
    let html = HTML.replace(BASE_URL_SLOT, &escape_html(base_url));
    let mut response = (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        html,
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(policy) = HeaderValue::from_str(&content_security_policy(base_url)) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

/// `GET /console/console.js`.
pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /console/console.css`.
pub async fn stylesheet() -> Response {
    asset("text/css; charset=utf-8", STYLESHEET)
}

/// `GET /console/favicon.svg`.
pub async fn icon() -> Response {
    asset("image/svg+xml", ICON)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// The origin (`scheme://host:port`) of `url`, and the WebSocket origin beside it.
fn origins(url: &str) -> Option<(String, String)> {
    let url = reqwest::Url::parse(url).ok()?;
    let origin = url.origin().ascii_serialization();
    let socket = match url.scheme() {
        "https" => origin.replacen("https://", "wss://", 1),
        _ => origin.replacen("http://", "ws://", 1),
    };
    (origin != "null").then_some((origin, socket))
}

/// The page's policy, given the API's base URL.
pub fn content_security_policy(api_base_url: &str) -> String {
    let (api, socket) = origins(api_base_url).unwrap_or_default();
    format!(
        "default-src 'none'; script-src 'self' {api}; style-src 'self'; img-src 'self' data:; \
         connect-src 'self' {api} {socket}; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_the_api_and_its_socket_and_nothing_else() {
        let policy = content_security_policy("http://127.0.0.1:8787/v1");
        assert!(policy.contains("script-src 'self' http://127.0.0.1:8787;"));
        assert!(policy.contains("connect-src 'self' http://127.0.0.1:8787 ws://127.0.0.1:8787;"));
        assert!(policy.starts_with("default-src 'none';"));
        let tls = content_security_policy("https://api.example/v1");
        assert!(tls.contains("wss://api.example"), "{tls}");
    }

    #[test]
    fn the_template_has_its_slot_and_no_inline_script() {
        assert!(HTML.contains(BASE_URL_SLOT));
        assert!(HTML.contains(r#"<script type="module" src="/console/console.js"></script>"#));
        assert_eq!(HTML.matches("<script").count(), 1, "no inline script");
        assert_eq!(escape_html(r#"a"<b>&'"#), "a&quot;&lt;b&gt;&amp;&#39;");
    }
}
