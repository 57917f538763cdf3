//! The console's request guard. The console mints tokens with the sandbox's API key, so no
//! other site may use it through the visitor's browser:
//!
//! - the `Host` must be an IP address or `localhost`: a page on a domain that re-resolves to
//!   this machine (DNS rebinding) names its own domain there and is refused;
//! - a request that changes something (any method but `GET` and `HEAD`) must come from the
//!   console's own page: its `Origin`, when sent, must be `http://<Host>` (browsers always send
//!   one on a cross-origin `POST`; a command-line client sends none);
//! - no response carries a CORS header, so another origin cannot read what the console answers.
//!
//! Every response also gets `nosniff`, `no-referrer` and `frame-ancestors`-style framing denial.

use std::net::IpAddr;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::api::ConsoleError;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No usable `Host` header.
    NoHost,
    /// A `Host` that is a domain name other than `localhost`.
    ForeignHost(String),
    /// A state-changing request from another origin.
    ForeignOrigin(String),
}

impl Refusal {
    fn message(&self) -> String {
        match self {
            Self::NoHost => "the request has no Host header".to_owned(),
            Self::ForeignHost(host) => format!(
                "the console answers requests for an IP address or localhost only, not {host:?} \
                 (a guard against DNS rebinding)"
            ),
            Self::ForeignOrigin(origin) => {
                format!("the console accepts changes from its own page only, not from {origin:?}")
            }
        }
    }
}

/// Whether `host` (a `Host` header: name or address, optional port) names this machine by
/// address or as `localhost`.
pub fn host_is_local_name(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((inside, _)) => inside,
            None => return false,
        },
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok()
}

/// Checks one request's `Host` and, for a change, its `Origin`.
///
/// # Errors
/// The [`Refusal`] that applies.
pub fn inspect(method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .ok_or(Refusal::NoHost)?;
    if !host_is_local_name(host) {
        return Err(Refusal::ForeignHost(host.to_owned()));
    }
    if method == Method::GET || method == Method::HEAD {
        return Ok(());
    }
    match headers
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or(""))
    {
        None => Ok(()),
        Some(origin) if origin.eq_ignore_ascii_case(&format!("http://{host}")) => Ok(()),
        Some(origin) => Err(Refusal::ForeignOrigin(origin.to_owned())),
    }
}

/// The middleware: refuses what [`inspect`] refuses, and sets the common headers.
pub async fn check(request: Request, next: Next) -> Response {
    let mut response = match inspect(request.method(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            ConsoleError::Refused(StatusCode::FORBIDDEN, refusal.message()).into_response()
        }
    };
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            if let Ok(value) = HeaderValue::from_str(value) {
                map.insert(name.clone(), value);
            }
        }
        map
    }

    #[test]
    fn local_hosts_are_addresses_or_localhost() {
        for host in [
            "127.0.0.1:8788",
            "127.0.0.1",
            "[::1]:8788",
            "localhost:8788",
            "LOCALHOST",
            "192.168.1.20:8788",
        ] {
            assert!(host_is_local_name(host), "{host}");
        }
        for host in ["evil.example:8788", "localhost.evil.example", "[::1"] {
            assert!(!host_is_local_name(host), "{host}");
        }
    }

    #[test]
    fn a_rebound_domain_is_refused_even_for_the_page() {
        let refused = inspect(
            &Method::GET,
            &headers(&[(header::HOST, "rebind.example:8788")]),
        );
        assert_eq!(
            refused,
            Err(Refusal::ForeignHost("rebind.example:8788".into()))
        );
        assert_eq!(
            inspect(&Method::GET, &HeaderMap::new()),
            Err(Refusal::NoHost)
        );
    }

    #[test]
    fn a_post_from_another_origin_is_refused_and_from_its_own_page_accepted() {
        let own = headers(&[
            (header::HOST, "127.0.0.1:8788"),
            (header::ORIGIN, "http://127.0.0.1:8788"),
        ]);
        assert_eq!(inspect(&Method::POST, &own), Ok(()));
        let cli = headers(&[(header::HOST, "127.0.0.1:8788")]);
        assert_eq!(inspect(&Method::POST, &cli), Ok(()));
        for origin in ["http://127.0.0.1:8787", "https://attacker.example", "null"] {
            let foreign = headers(&[(header::HOST, "127.0.0.1:8788"), (header::ORIGIN, origin)]);
            assert_eq!(
                inspect(&Method::POST, &foreign),
                Err(Refusal::ForeignOrigin(origin.into())),
                "{origin}"
            );
        }
    }
}
