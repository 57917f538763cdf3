//! `svc-client`: the typed async client of the Roleplay and Call-Scoring Service v1 API: every
//! API-key endpoint (roster, session tokens, scored calls) plus the SDK's redeem call, with
//! retries ([`RetryPolicy`]), lenient reads, service ids that cannot be mixed up
//! ([`CallId`], [`AgentId`], …), the error envelope as a typed error ([`ClientError`],
//! [`ApiError`]) and pagination as a stream whose
//! cursors stay opaque. The credential goes only where it should: redirects are never followed,
//! plain HTTP is refused except to a loopback host (unless
//! [`ClientBuilder::allow_insecure_http`]), and a response body is read up to
//! [`MAX_BODY_BYTES`] at most.
//!
//! ```no_run
//! # async fn demo() -> Result<(), svc_client::ClientError> {
//! use futures_util::TryStreamExt;
//! use svc_client::{ApiKey, CallQuery, CallSource, Client};
//! let client = Client::builder("http://127.0.0.1:8080/v1")
//!     .api_key(ApiKey::new("svc_live_…"))
//!     .build()?;
//! let calls: Vec<_> = client.calls(CallQuery::new(CallSource::Roleplay, "2026-01-01T00:00:00Z")).try_collect().await?;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! Every type is at the crate's root (one path each); the modules are private:
//! - [`Client`] and [`ClientBuilder`] (this module): the endpoints, and what a caller sets:
//!   base URL, key, its own `reqwest::Client`, a User-Agent suffix, timeout, retry policy.
//! - `error`: the error envelope ([`ApiError`], [`ErrorCode`]) and transport failures.
//! - `retry`: when and how long to wait before trying again ([`RetryPolicy`]).
//! - `types`, `ids`: what the endpoints take and return; `raw`: call rows and details kept
//!   exactly as the service sent them ([`RawCallRow`], [`RawCallDetail`]: what a reconciler
//!   stores).
//! - `live` (feature `live`): a practice call over the compact service's live transport.

#![warn(missing_docs)]

/// The crate's README, whose examples are compiled as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[cfg(feature = "live")]
pub mod live;

mod base_url;
mod error;
mod ids;
mod pages;
mod raw;
mod retry;
mod transport;
mod types;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::Stream;

#[cfg(feature = "live")]
pub(crate) use base_url::is_loopback;
pub use error::{ApiError, ClientError, ErrorClass, ErrorCode};
pub use ids::{AgencyId, AgentId, CallId, IdError};
pub use raw::{RawCallDetail, RawCallRow};
pub use retry::{RetryPolicy, SleepFn};
pub use types::*;

use transport::{Auth, Call};

/// The largest response body the client reads by default: 16 MiB. The largest practice-call
/// detail the service produces is about 3.2 MiB (512 KiB of transcript utterances, even if every
/// byte needed a six-byte JSON escape, plus up to a thousand turns' keys); a real call's
/// transcript is the dialer's, about 50 KB for an hour of speech; a page of 100 call rows or
/// agents is far smaller. A bigger body is [`ClientError::BodyTooLarge`], read no further.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// An API key (`svc_live_…`). Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key (surrounding whitespace removed).
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into().trim().to_owned())
    }

    /// The key itself, for the `Authorization` header and the config file only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// The result of `POST /agencies`.
#[derive(Debug, Clone, PartialEq)]
pub struct Upserted {
    /// The agency as stored.
    pub agency: Agency,
    /// `true` on 201 (created), `false` on 200 (existing, renamed or unchanged).
    pub created: bool,
}

/// Builds a [`Client`].
#[derive(Debug)]
pub struct ClientBuilder {
    base_url: String,
    api_key: Option<ApiKey>,
    timeout: Duration,
    retry: RetryPolicy,
    allow_insecure_http: bool,
    max_body_bytes: usize,
    http: Option<reqwest::Client>,
    user_agent_suffix: Option<String>,
}

impl ClientBuilder {
    /// Sends through the caller's own `reqwest::Client` (its proxy, TLS roots, connection pool)
    /// instead of one of the builder's. Give it a redirect policy of `Policy::none()`: a
    /// redirect it follows is reported as [`ClientError::Redirect`], but the request (API key
    /// included) has gone to the other address by then. The builder's timeout still applies to
    /// each request; the User-Agent is set on each request.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Adds `suffix` (e.g. `my-crm/2.1`) after the client's own User-Agent,
    /// `svc-client/<version>`, so the service's operators can tell the caller's traffic.
    pub fn user_agent_suffix(mut self, suffix: impl Into<String>) -> Self {
        self.user_agent_suffix = Some(suffix.into());
        self
    }

    /// Sets the API key (needed by every endpoint but redeem).
    pub fn api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Per-request timeout (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Retry policy (default [`RetryPolicy::default`]).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Allows a plain-`http://` base URL to a host that is not loopback (default: refused,
    /// since the API key would travel in clear). Loopback hosts (127.0.0.0/8, `::1`,
    /// `localhost`) are always allowed over plain HTTP.
    pub fn allow_insecure_http(mut self, allow: bool) -> Self {
        self.allow_insecure_http = allow;
        self
    }

    /// The largest response body read (default [`MAX_BODY_BYTES`]); a bigger one is
    /// [`ClientError::BodyTooLarge`].
    pub fn max_body_bytes(mut self, limit: usize) -> Self {
        self.max_body_bytes = limit;
        self
    }

    /// Validates the base URL and builds the client.
    ///
    /// # Errors
    /// [`ClientError::BaseUrl`] when the URL is not http(s) or does not end in `/v1`;
    /// [`ClientError::InsecureHttp`] for plain HTTP to a host that is not loopback, unless
    /// allowed.
    /// [`ClientError::UserAgent`] when the User-Agent suffix is not printable ASCII.
    pub fn build(self) -> Result<Client, ClientError> {
        let base = base_url::parse(&self.base_url, self.allow_insecure_http)?;
        let own = concat!("svc-client/", env!("CARGO_PKG_VERSION"));
        let user_agent = match self.user_agent_suffix.as_deref().map(str::trim) {
            Some(suffix) if !suffix.is_empty() => format!("{own} {suffix}"),
            _ => own.to_owned(),
        };
        let user_agent = reqwest::header::HeaderValue::from_str(&user_agent)
            .ok()
            .filter(|_| user_agent.chars().all(|c| c.is_ascii_graphic() || c == ' '))
            .ok_or(ClientError::UserAgent)?;
        let http = match self.http {
            Some(http) => http,
            None => reqwest::Client::builder()
                .timeout(self.timeout)
                // Never: the request (its API key or token included) would go wherever the
                // answer points. A redirect is an error instead (`ClientError::Redirect`).
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| ClientError::Connect(e.to_string()))?,
        };
        Ok(Client {
            http,
            user_agent,
            base,
            api_key: self.api_key,
            timeout: self.timeout,
            retry: self.retry,
            max_body_bytes: self.max_body_bytes,
            requests: Arc::default(),
            service_date: Arc::default(),
        })
    }
}

/// The typed API client. Cheap to clone (the connection pool is shared).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    user_agent: reqwest::header::HeaderValue,
    base: reqwest::Url,
    api_key: Option<ApiKey>,
    timeout: Duration,
    retry: RetryPolicy,
    max_body_bytes: usize,
    /// HTTP requests sent by this client and its clones, retries included.
    requests: Arc<AtomicU64>,
    /// The `Date` of the latest response (unix seconds; 0: none yet).
    service_date: Arc<std::sync::atomic::AtomicI64>,
}

impl Client {
    /// Starts building a client for `base_url` (which must end in `/v1`).
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.into(),
            api_key: None,
            timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            allow_insecure_http: false,
            max_body_bytes: MAX_BODY_BYTES,
            http: None,
            user_agent_suffix: None,
        }
    }

    /// The validated base URL.
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// The service's clock as its latest response said (`Date`, whole seconds): what a
    /// caller bounds "now" by when the local clock may be skewed. `None` before any response.
    pub fn service_date(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        match self.service_date.load(Ordering::Relaxed) {
            0 => None,
            secs => chrono::DateTime::from_timestamp(secs, 0),
        }
    }

    /// The per-request timeout: each attempt (connecting, sending, the headers and the whole
    /// body) is cut when it runs longer.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The longest one call of this client can take, its retries and the waits between them
    /// included, however slow, silent or lossy the network: see [`RetryPolicy::request_bound`].
    /// A reconcile run that meets a fault which does not heal stops within this of meeting it.
    pub fn request_bound(&self) -> Duration {
        self.retry.request_bound(self.timeout)
    }

    /// How many HTTP requests this client and its clones have sent, retries included.
    pub fn requests_sent(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// `POST /agencies`: creates the agency or renames it. Retried like an idempotent request,
    /// since repeating an upsert leaves the same state.
    ///
    /// # Errors
    /// The service's error ([`ClientError::Api`]) or a transport error.
    pub async fn upsert_agency(&self, body: &UpsertAgency) -> Result<Upserted, ClientError> {
        let call = Call::post(&["agencies"], body)?.idempotent();
        let (status, agency) = self.send(call).await?;
        Ok(Upserted {
            agency,
            created: status == 201,
        })
    }

    /// `POST /agents`: registers an agent. Not retried on 5xx or connection loss (a repeat could
    /// answer `AGENT_ALREADY_EXISTS` for the agent the first attempt created).
    ///
    /// # Errors
    /// `AGENCY_NOT_FOUND`, `AGENT_ALREADY_EXISTS` (see [`ApiError::detail`]), `INVALID_REQUEST`, …
    pub async fn register_agent(&self, body: &RegisterAgent) -> Result<Registered, ClientError> {
        Ok(self.send(Call::post(&["agents"], body)?).await?.1)
    }

    /// `GET /agents`: one page.
    ///
    /// # Errors
    /// `INVALID_REQUEST`, `AGENCY_NOT_FOUND`, auth errors, transport errors.
    pub async fn agents_page(
        &self,
        query: &AgentQuery,
        cursor: Option<&str>,
    ) -> Result<Page<Agent>, ClientError> {
        let mut pairs = Vec::new();
        if let Some(handle) = &query.handle {
            let (k, v) = handle.query();
            pairs.push((k, v.to_owned()));
        }
        if let Some(agency) = &query.agency_id {
            pairs.push(("agencyId", agency.to_string()));
        }
        if let Some(limit) = query.limit {
            pairs.push(("limit", limit.to_string()));
        }
        if let Some(cursor) = cursor {
            pairs.push(("cursor", cursor.to_owned()));
        }
        Ok(self.send(Call::get(&["agents"], pairs)).await?.1)
    }

    /// `GET /agents` over every page, following `nextCursor` until it is `null`.
    pub fn agents(
        &self,
        query: AgentQuery,
    ) -> impl Stream<Item = Result<Agent, ClientError>> + Send + 'static {
        let client = self.clone();
        pages::paginate(move |cursor| {
            let (client, query) = (client.clone(), query.clone());
            async move { client.agents_page(&query, cursor.as_deref()).await }
        })
    }

    /// `POST /session`: mints a session token. Never retried on 5xx (each mint creates a call).
    ///
    /// # Errors
    /// `AGENT_NOT_FOUND`, `TENANT_QUOTA_EXCEEDED`, auth errors, …
    pub async fn mint_session(&self, who: &MintFor) -> Result<SessionToken, ClientError> {
        let body = match who {
            MintFor::PlatformAgentId(id) => serde_json::json!({ "platformAgentId": id }),
            MintFor::AgentId(id) => serde_json::json!({ "agentId": id }),
        };
        Ok(self.send(Call::post(&["session"], &body)?).await?.1)
    }

    /// `GET /calls`: one page.
    ///
    /// # Errors
    /// `INVALID_REQUEST`, `AGENT_NOT_FOUND`, `AGENCY_NOT_FOUND`, auth errors, …
    pub async fn calls_page(
        &self,
        query: &CallQuery,
        cursor: Option<&str>,
    ) -> Result<Page<CallRow>, ClientError> {
        let mut pairs = query.pairs();
        if let Some(cursor) = cursor {
            pairs.push(("cursor", cursor.to_owned()));
        }
        Ok(self.send(Call::get(&["calls"], pairs)).await?.1)
    }

    /// `GET /calls` over every page. A row a shifted page repeats is yielded once.
    pub fn calls(
        &self,
        query: CallQuery,
    ) -> impl Stream<Item = Result<CallRow, ClientError>> + Send + 'static {
        let client = self.clone();
        pages::paginate(move |cursor| {
            let (client, query) = (client.clone(), query.clone());
            async move { client.calls_page(&query, cursor.as_deref()).await }
        })
    }

    /// `GET /calls` over every page, one page at a time, each row kept exactly as the service
    /// sent it (see [`RawCallRow`]). A row a shifted page repeats from one of the four pages
    /// before is yielded once (memory stays flat however long the listing); a cursor handed
    /// back again ends the stream with an error instead of looping.
    pub fn calls_raw_pages(
        &self,
        query: CallQuery,
    ) -> impl Stream<Item = Result<Vec<RawCallRow>, ClientError>> + Send + 'static {
        let client = self.clone();
        let remember = pages::Remember::LastPages(4);
        pages::paginate_pages(
            move |cursor| {
                let (client, query) = (client.clone(), query.clone());
                async move {
                    let mut pairs = query.pairs();
                    if let Some(cursor) = cursor {
                        pairs.push(("cursor", cursor));
                    }
                    let (_, bytes) = client.send_bytes(Call::get(&["calls"], pairs)).await?;
                    raw::page(&bytes)
                }
            },
            remember,
        )
    }

    /// `GET /calls/{callId}`, keeping the body exactly as the service sent it (see
    /// [`RawCallDetail`]).
    ///
    /// # Errors
    /// `CALL_NOT_FOUND`, auth errors, transport errors, and [`ClientError::Decode`] when the body
    /// is not a call detail.
    pub async fn call_raw(&self, call_id: &CallId) -> Result<RawCallDetail, ClientError> {
        let (_, bytes) = self
            .send_bytes(Call::get(&["calls", call_id.as_str()], Vec::new()))
            .await?;
        RawCallDetail::parse(&bytes)
    }

    /// `GET /calls/{callId}`.
    ///
    /// # Errors
    /// `CALL_NOT_FOUND` (unknown, foreign, unscored or still scoring), auth errors, …
    pub async fn call(&self, call_id: &CallId) -> Result<CallDetail, ClientError> {
        Ok(self
            .send(Call::get(&["calls", call_id.as_str()], Vec::new()))
            .await?
            .1)
    }

    /// `POST /roleplay/session` with a session token (what the browser SDK does). Never
    /// retried: the token is spent as redemption starts.
    ///
    /// # Errors
    /// `INVALID_TOKEN`, `TOKEN_EXPIRED`, `TOKEN_ALREADY_USED`, `DRILL_NOT_FOUND`,
    /// `SERVICE_UNAVAILABLE`, `INVALID_REQUEST`, `INTERNAL_ERROR`.
    pub async fn redeem(
        &self,
        token: &str,
        body: &RedeemRequest,
    ) -> Result<LiveSession, ClientError> {
        let call = Call::post(&["roleplay", "session"], body)?.auth(Auth::Token(token.to_owned()));
        Ok(self.send(call).await?.1)
    }
}
