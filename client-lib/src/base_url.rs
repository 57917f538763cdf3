//! The base URL every request is built on: an http(s) URL whose path ends in `/v1`, and plain
//! HTTP only to a loopback host unless the caller allows more, since the API key (or a session
//! token) travels in every request's `Authorization` header.

use std::net::IpAddr;

use reqwest::Url;

use super::error::ClientError;

/// Checks that `url` is an http(s) URL whose path ends in `/v1`, and that a plain-HTTP one names
/// a loopback host (127.0.0.0/8, `::1`, `localhost`) unless `allow_insecure_http`.
pub(super) fn parse(url: &str, allow_insecure_http: bool) -> Result<Url, ClientError> {
    let bad = |reason| ClientError::BaseUrl {
        url: url.to_owned(),
        reason,
    };
    let parsed = Url::parse(url.trim()).map_err(|_| bad("not a URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if !parsed.path().trim_end_matches('/').ends_with("/v1") {
        return Err(bad("the base URL must end in /v1"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("the base URL must not carry a query or fragment"));
    }
    if parsed.scheme() == "http" && !allow_insecure_http && !is_loopback(&parsed) {
        return Err(ClientError::InsecureHttp {
            url: url.trim().to_owned(),
        });
    }
    Ok(parsed)
}

/// Whether the URL's host is the local machine by name or address: `localhost` (any case, with
/// or without the root's trailing dot), 127.0.0.0/8 or `::1`. Nothing else, not `0.0.0.0`, a
/// private range, nor a name that happens to resolve to loopback.
pub(crate) fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.trim_end_matches('.').eq_ignore_ascii_case("localhost"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_127_slash_8_the_ipv6_loopback_and_localhost() {
        let loopback = |url: &str| is_loopback(&Url::parse(url).expect("url"));
        for url in [
            "http://127.0.0.1/v1",
            "http://127.255.0.9:81/v1",
            "http://[::1]/v1",
            "http://localhost/v1",
            "http://LOCALHOST.:8080/v1",
        ] {
            assert!(loopback(url), "{url}");
        }
        for url in [
            "http://0.0.0.0/v1",
            "http://[::]/v1",
            "http://[::ffff:127.0.0.1]/v1",
            "http://192.168.1.1/v1",
            "http://localhost.example/v1",
            "http://mylocalhost/v1",
        ] {
            assert!(!loopback(url), "{url}");
        }
    }
}
