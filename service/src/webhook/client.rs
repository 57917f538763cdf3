//! One delivery attempt of a webhook: the URL policy (HTTPS, and no internal address, see
//! [`super::address`]), a signature made at send time, a 3-second connect timeout within the
//! 10-second deadline, and no redirects followed. Retries and the delivery log live in the outbox; this
//! module only reports what happened (status, latency, error) so the caller can record it.

use std::fmt;
use std::time::{Duration, Instant};

use std::net::IpAddr;

use reqwest::Url;
use reqwest::redirect::Policy;

use super::address::{self, FilteringResolver};

/// The contract's webhook response deadline.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a webhook URL cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum UrlError {
    /// Not a URL at all.
    #[error("webhook URL is not a valid absolute URL")]
    Invalid,
    /// Not HTTPS (and plain HTTP was not allowed by `--allow-http-webhooks`).
    #[error("webhook URL must use https (http is allowed only with --allow-http-webhooks)")]
    NotHttps,
}

/// Parses a webhook URL and applies the scheme policy: `https` always, `http` only when allowed.
///
/// # Errors
/// [`UrlError::Invalid`] for anything that is not an absolute URL with a host,
/// [`UrlError::NotHttps`] for any other scheme.
pub fn check_url(url: &str, allow_http: bool) -> Result<Url, UrlError> {
    let parsed = Url::parse(url.trim()).map_err(|_| UrlError::Invalid)?;
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(UrlError::Invalid);
    }
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if allow_http => Ok(parsed),
        _ => Err(UrlError::NotHttps),
    }
}

/// Where and how to deliver: the tenant's current endpoint and signing secret, read at send time.
#[derive(Clone)]
pub struct Target {
    /// The endpoint URL.
    pub url: String,
    /// The whole `whsec_…` signing secret.
    pub secret: String,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.url)
            .field("secret", &"[redacted]")
            .finish()
    }
}

/// What one attempt did, for the delivery log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The HTTP status answered, if any response arrived.
    pub status: Option<u16>,
    /// Time from sending to the response (or the failure).
    pub latency: Duration,
    /// Why the attempt failed; `None` on a 2xx.
    pub error: Option<String>,
}

impl Attempt {
    /// True when the receiver answered 2xx in time.
    pub fn succeeded(&self) -> bool {
        answered_2xx(self.status, self.error.as_deref())
    }
}

/// Whether an attempt that got `status` (if an answer came) and failed with `error` (if it
/// did) delivered its webhook: a `2xx` in time.
pub fn answered_2xx(status: Option<u16>, error: Option<&str>) -> bool {
    error.is_none() && status.is_some_and(|s| (200..300).contains(&s))
}

/// How long connecting to an endpoint may take: an endpoint that does not even accept the
/// connection should not hold a delivery worker for the whole 10-second deadline.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Which endpoints a client delivers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlPolicy {
    /// Plain-HTTP URLs too (local testing only; also allows internal addresses).
    pub allow_http: bool,
    /// Internal addresses too (loopback, private, link-local, …; see [`super::address`]).
    pub allow_private: bool,
}

impl UrlPolicy {
    /// Whether internal addresses may be connected to.
    pub fn private_allowed(self) -> bool {
        self.allow_http || self.allow_private
    }
}

/// Makes delivery attempts. Cheap to clone (one connection pool).
#[derive(Debug, Clone)]
pub struct WebhookClient {
    http: reqwest::Client,
    policy: UrlPolicy,
}

impl WebhookClient {
    /// A client with the contract's 10-second deadline; `allow_http` is local testing (plain
    /// HTTP and internal addresses allowed).
    ///
    /// # Errors
    /// When the TLS backend cannot be initialised.
    pub fn new(allow_http: bool) -> Result<Self, reqwest::Error> {
        let policy = UrlPolicy {
            allow_http,
            allow_private: allow_http,
        };
        Self::with_policy(policy, DEFAULT_TIMEOUT)
    }

    /// A client with another deadline (tests use a short one).
    ///
    /// # Errors
    /// When the TLS backend cannot be initialised.
    pub fn with_timeout(allow_http: bool, timeout: Duration) -> Result<Self, reqwest::Error> {
        let policy = UrlPolicy {
            allow_http,
            allow_private: allow_http,
        };
        Self::with_policy(policy, timeout)
    }

    /// A client delivering under `policy` with a deadline of `timeout`.
    ///
    /// # Errors
    /// When the TLS backend cannot be initialised.
    pub fn with_policy(policy: UrlPolicy, timeout: Duration) -> Result<Self, reqwest::Error> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(timeout)
            .connect_timeout(CONNECT_TIMEOUT.min(timeout))
            .redirect(Policy::none())
            .user_agent(concat!("svc-service/", env!("CARGO_PKG_VERSION")));
        if !policy.private_allowed() {
            builder = builder.dns_resolver(std::sync::Arc::new(FilteringResolver));
        }
        Ok(Self {
            http: builder.build()?,
            policy,
        })
    }

    /// Sends one attempt: the body signed now (`timestamp`, unix seconds) with the target's
    /// current secret, and the delivery's stable `X-Service-Webhook-Id`. Never fails: every
    /// outcome, including a refused URL, is an [`Attempt`] to log.
    pub async fn attempt(
        &self,
        target: &Target,
        webhook_id: &str,
        body: &[u8],
        timestamp: i64,
    ) -> Attempt {
        let started = Instant::now();
        let refused = |error: String| Attempt {
            status: None,
            latency: started.elapsed(),
            error: Some(error),
        };
        let url = match check_url(&target.url, self.policy.allow_http) {
            Ok(url) => url,
            Err(err) => return refused(err.to_string()),
        };
        // Names are checked by the resolver on what they resolve to; literals are checked here.
        let literal = url
            .host_str()
            .map(|host| host.trim_start_matches('[').trim_end_matches(']'))
            .and_then(|host| host.parse::<IpAddr>().ok());
        if let Some(ip) = literal
            && !self.policy.private_allowed()
            && !address::allowed(ip)
        {
            return refused(format!(
                "{ip} is an address webhooks may not reach (private, loopback, link-local, …)"
            ));
        }
        let signature = svc_contract::sign(&target.secret, timestamp, body);
        let mut request = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("X-Service-Signature", signature)
            .header("X-Service-Webhook-Id", webhook_id);
        // The attempt's span (W3C Trace Context), when traced: not signed, so a receiver that
        // ignores it verifies the same bytes.
        if let Some(traceparent) = svc_ops::traces::traceparent(&tracing::Span::current()) {
            request = request.header(svc_ops::traces::TRACEPARENT_HEADER, traceparent);
        }
        let result = request.body(body.to_vec()).send().await;
        let latency = started.elapsed();
        match result {
            Ok(response) => {
                let status = response.status().as_u16();
                let error = if response.status().is_success() {
                    None
                } else if response.status().is_redirection() {
                    Some(format!("HTTP {status}: redirects are not followed"))
                } else {
                    Some(format!("HTTP {status}"))
                };
                Attempt {
                    status: Some(status),
                    latency,
                    error,
                }
            }
            Err(err) => Attempt {
                status: None,
                latency,
                error: Some(describe(&err)),
            },
        }
    }
}

fn describe(err: &reqwest::Error) -> String {
    // The innermost cause says what happened (connection refused, an address refused by the
    // resolver, a TLS failure).
    let mut cause = None;
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        cause = Some(inner.to_string());
        source = inner.source();
    }
    let what = if err.is_timeout() {
        return "timed out waiting for a response".to_string();
    } else if err.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    match cause {
        Some(cause) => format!("{what}: {cause}"),
        None => what.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use std::sync::{Arc, Mutex};

    type Seen = Arc<Mutex<Vec<(HeaderMap, Vec<u8>)>>>;

    async fn sink(status: StatusCode, delay: Duration) -> (String, Seen) {
        let seen: Seen = Arc::default();
        let record = seen.clone();
        let app = Router::new()
            .route(
                "/hook",
                post(move |headers: HeaderMap, body: axum::body::Bytes| {
                    let record = record.clone();
                    async move {
                        record.lock().expect("lock").push((headers, body.to_vec()));
                        tokio::time::sleep(delay).await;
                        status
                    }
                }),
            )
            .route(
                "/moved",
                post(|| async { (StatusCode::FOUND, [("location", "/hook")]) }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}"), seen)
    }

    fn target(url: String) -> Target {
        Target {
            url,
            secret: "whsec_test".to_string(),
        }
    }

    #[test]
    fn only_https_passes_unless_http_is_allowed() {
        assert!(check_url("https://example.test/hook", false).is_ok());
        assert_eq!(
            check_url("http://example.test/hook", false),
            Err(UrlError::NotHttps)
        );
        assert!(check_url("http://127.0.0.1:9/hook", true).is_ok());
        assert_eq!(
            check_url("ftp://example.test/", true),
            Err(UrlError::NotHttps)
        );
        assert_eq!(check_url("not a url", true), Err(UrlError::Invalid));
    }

    #[test]
    fn target_debug_hides_the_secret() {
        let text = format!("{:?}", target("https://x.test".into()));
        assert!(text.contains("[redacted]") && !text.contains("whsec_test"));
    }

    #[tokio::test]
    async fn a_2xx_succeeds_and_carries_a_verifiable_signature_and_the_id() {
        let (base, seen) = sink(StatusCode::NO_CONTENT, Duration::ZERO).await;
        let client = WebhookClient::new(true).expect("client");
        let attempt = client
            .attempt(
                &target(format!("{base}/hook")),
                "wh_1",
                b"{\"a\":1}",
                1_767_225_600,
            )
            .await;
        assert!(attempt.succeeded(), "{attempt:?}");
        let seen = seen.lock().expect("lock");
        let (headers, body) = &seen[0];
        assert_eq!(body, b"{\"a\":1}");
        assert_eq!(headers["x-service-webhook-id"], "wh_1");
        assert_eq!(headers["content-type"], "application/json");
        let expected = svc_contract::sign("whsec_test", 1_767_225_600, b"{\"a\":1}");
        assert_eq!(headers["x-service-signature"], expected.as_str());
    }

    #[tokio::test]
    async fn every_attempt_signs_like_the_shared_vectors() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/webhooks/vectors.json");
        let vectors: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("vectors file"))
                .expect("JSON");
        let (base, seen) = sink(StatusCode::OK, Duration::ZERO).await;
        let client = WebhookClient::new(true).expect("client");
        let mut checked = 0;
        for vector in vectors["valid"].as_array().expect("valid vectors") {
            let (Some(body), Some(secret), Some(t), Some(header)) = (
                vector["body"].as_str(),
                vector["secret"].as_str(),
                vector["t"].as_i64(),
                vector["header"].as_str(),
            ) else {
                continue;
            };
            if header.split(',').count() != 2 {
                continue; // a receiver-side vector with extra signatures, not a canonical header
            }
            let target = Target {
                url: format!("{base}/hook"),
                secret: secret.to_string(),
            };
            assert!(
                client
                    .attempt(&target, "wh_v", body.as_bytes(), t)
                    .await
                    .succeeded()
            );
            let seen = seen.lock().expect("lock");
            let (headers, sent) = seen.last().expect("delivered");
            assert_eq!(sent.as_slice(), body.as_bytes());
            assert_eq!(headers["x-service-signature"], header, "{}", vector["name"]);
            checked += 1;
        }
        assert!(checked > 0, "no vector checked");
    }

    #[tokio::test]
    async fn a_non_2xx_is_a_failed_attempt_with_its_status() {
        let (base, _) = sink(StatusCode::INTERNAL_SERVER_ERROR, Duration::ZERO).await;
        let client = WebhookClient::new(true).expect("client");
        let attempt = client
            .attempt(&target(format!("{base}/hook")), "wh_1", b"{}", 1)
            .await;
        assert!(!attempt.succeeded());
        assert_eq!(attempt.status, Some(500));
    }

    #[tokio::test]
    async fn redirects_are_not_followed() {
        let (base, seen) = sink(StatusCode::OK, Duration::ZERO).await;
        let client = WebhookClient::new(true).expect("client");
        let attempt = client
            .attempt(&target(format!("{base}/moved")), "wh_1", b"{}", 1)
            .await;
        assert!(!attempt.succeeded());
        assert_eq!(attempt.status, Some(302));
        assert!(seen.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn a_slow_receiver_times_out() {
        let (base, _) = sink(StatusCode::OK, Duration::from_secs(5)).await;
        let client = WebhookClient::with_timeout(true, Duration::from_millis(200)).expect("client");
        let attempt = client
            .attempt(&target(format!("{base}/hook")), "wh_1", b"{}", 1)
            .await;
        assert!(!attempt.succeeded());
        assert_eq!(attempt.status, None);
        assert!(
            attempt
                .error
                .as_deref()
                .is_some_and(|e| e.contains("timed out"))
        );
    }

    #[tokio::test]
    async fn plain_http_is_refused_without_the_flag() {
        let (base, seen) = sink(StatusCode::OK, Duration::ZERO).await;
        let client = WebhookClient::new(false).expect("client");
        let attempt = client
            .attempt(&target(format!("{base}/hook")), "wh_1", b"{}", 1)
            .await;
        assert!(!attempt.succeeded());
        assert!(seen.lock().expect("lock").is_empty());
    }
}

#[cfg(test)]
mod address_policy {
    use super::*;

    fn target(url: &str) -> Target {
        Target {
            url: url.into(),
            secret: "whsec_test".into(),
        }
    }

    fn strict() -> WebhookClient {
        let policy = UrlPolicy {
            allow_http: false,
            allow_private: false,
        };
        WebhookClient::with_policy(policy, Duration::from_secs(2)).expect("client")
    }

    #[tokio::test]
    async fn internal_addresses_are_refused_at_connect_time() {
        let client = strict();
        for url in [
            "https://127.0.0.1:9/hook",
            "https://169.254.169.254/latest/meta-data",
            "https://[::1]:9/hook",
            "https://10.0.0.1/hook",
            "https://localhost:9/hook",
        ] {
            let attempt = client.attempt(&target(url), "wh_1", b"{}", 0).await;
            let error = attempt.error.clone().unwrap_or_default();
            assert!(
                attempt.status.is_none() && error.contains("may not reach"),
                "{url}: {attempt:?}"
            );
        }
    }

    #[tokio::test]
    async fn allowing_private_webhooks_lets_loopback_through() {
        let policy = UrlPolicy {
            allow_http: false,
            allow_private: true,
        };
        let client = WebhookClient::with_policy(policy, Duration::from_secs(2)).expect("client");
        let attempt = client
            .attempt(&target("https://127.0.0.1:9/hook"), "wh_1", b"{}", 0)
            .await;
        let error = attempt.error.unwrap_or_default();
        assert!(!error.contains("may not reach"), "{error}");
    }
}
