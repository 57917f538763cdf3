//! The client's error type: the contract's REST error envelope (`code`, `message`, `requestId`,
//! `details`) or a transport failure, and how each is classified for retries and exit codes.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// An error response from the service, read from the contract's envelope when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Contract code (`AGENT_ALREADY_EXISTS`, …), or `HTTP_<status>` when the body had no
    /// envelope (a `429` from a proxy, for instance).
    pub code: String,
    /// Human-readable message; may change, never branch on it.
    pub message: String,
    /// `requestId` of the envelope, else the `X-Service-Request-Id` header.
    pub request_id: Option<String>,
    /// Code-specific details (today only `AGENT_ALREADY_EXISTS`).
    pub details: Option<Value>,
    /// The `Retry-After` delay the response asked for, if any.
    pub retry_after: Option<Duration>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (HTTP {}): {}", self.code, self.status, self.message)?;
        if let Some(id) = &self.request_id {
            write!(f, " [requestId {id}]")?;
        }
        if let Some(wait) = self.retry_after {
            write!(f, " (the service asks to retry after {} s)", wait.as_secs())?;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct Envelope {
    error: EnvelopeError,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvelopeError {
    code: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    details: Option<Value>,
}

impl ApiError {
    /// Reads an error response: the envelope when the body holds one, else the status alone.
    pub(crate) fn from_parts(
        status: u16,
        header_request_id: Option<String>,
        retry_after: Option<Duration>,
        body: &[u8],
    ) -> Self {
        match serde_json::from_slice::<Envelope>(body) {
            Ok(Envelope { error }) => Self {
                status,
                code: error.code,
                message: error.message,
                request_id: error.request_id.or(header_request_id),
                details: error.details,
                retry_after,
            },
            Err(_) => {
                let text = String::from_utf8_lossy(body);
                let text: String = text.trim().chars().take(200).collect();
                Self {
                    status,
                    code: format!("HTTP_{status}"),
                    message: if text.is_empty() {
                        "the service answered without an error body".into()
                    } else {
                        text
                    },
                    request_id: header_request_id,
                    details: None,
                    retry_after,
                }
            }
        }
    }

    /// A `details` string field (for example `agencyId` of `AGENT_ALREADY_EXISTS`).
    pub fn detail(&self, key: &str) -> Option<&str> {
        self.details.as_ref()?.get(key)?.as_str()
    }
}

/// Everything a client call can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The service answered with an error status.
    #[error("{0}")]
    Api(Box<ApiError>),
    /// The connection could not be made or broke before a response.
    #[error("could not reach the service: {0}")]
    Connect(String),
    /// No response within the configured timeout.
    #[error("the service did not answer within {0:?}")]
    Timeout(Duration),
    /// A success response whose body does not match the contract.
    #[error("unexpected response from the service: {0}")]
    Decode(String),
    /// The base URL is not an http(s) URL ending in `/v1`.
    #[error("invalid base URL {url:?}: {reason}")]
    BaseUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The call needs an API key and none was configured.
    #[error("no API key configured (use --api-key, SVC_API_KEY or a config profile)")]
    MissingApiKey,
    /// A plain-HTTP base URL to a host that is not loopback, not allowed
    /// ([`super::ClientBuilder::allow_insecure_http`]): the API key would travel in clear.
    #[error(
        "refusing the plain-HTTP base URL {url:?}: the API key would travel in clear to a host \
         that is not loopback (127.0.0.0/8, ::1, localhost); use https://, or allow it with \
         --insecure-http (or SVC_INSECURE_HTTP=1)"
    )]
    InsecureHttp {
        /// The URL given.
        url: String,
    },
    /// The service answered with a redirect, which is never followed: the request would go
    /// somewhere else, API key included. The contract has none, so the base URL is likely
    /// out of date (`http://` answered by a redirect to `https://`, a moved host).
    #[error(
        "the service answered HTTP {status} redirecting to {}; redirects are not followed (the \
         API key would go along): check the base URL",
        location.as_deref().unwrap_or("nowhere (no Location header)")
    )]
    Redirect {
        /// The 3xx status.
        status: u16,
        /// The `Location` header, when it is printable text (at most 200 characters).
        location: Option<String>,
    },
    /// A response body larger than the client's limit
    /// ([`super::ClientBuilder::max_body_bytes`]); it was not read further.
    #[error(
        "the service's response is larger than the {} limit; it was not read further",
        size(*limit)
    )]
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

/// `16 MiB`, or the exact number of bytes when it is not a whole number of MiB.
fn size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes}-byte")
    }
}

/// How an error should be treated by a caller (and mapped to an exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Bad or revoked credential, inactive tenant, IP not allowed, bad session token.
    Auth,
    /// Worth retrying later: 429, 5xx, connection errors, timeouts.
    Temporary,
    /// Anything else: fix the request or the data.
    Failure,
}

const AUTH_CODES: [&str; 7] = [
    "INVALID_API_KEY",
    "API_KEY_REVOKED",
    "TENANT_INACTIVE",
    "IP_NOT_ALLOWED",
    "INVALID_TOKEN",
    "TOKEN_EXPIRED",
    "TOKEN_ALREADY_USED",
];

impl ClientError {
    /// The contract code when the service sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api(e) => Some(&e.code),
            _ => None,
        }
    }

    /// The service's error, if this is one.
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            Self::Api(e) => Some(e.as_ref()),
            _ => None,
        }
    }

    /// Classifies the error. `TENANT_QUOTA_EXCEEDED` is a failure, not temporary: it clears only
    /// at the next month or when the allowance is raised.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Api(e) if AUTH_CODES.contains(&e.code.as_str()) => ErrorClass::Auth,
            Self::Api(e) if e.code == "TENANT_QUOTA_EXCEEDED" => ErrorClass::Failure,
            Self::Api(e) if e.status == 401 || e.status == 403 => ErrorClass::Auth,
            Self::Api(e) if e.status == 429 || e.status >= 500 => ErrorClass::Temporary,
            Self::Connect(_) | Self::Timeout(_) => ErrorClass::Temporary,
            Self::Api(_)
            | Self::Decode(_)
            | Self::BaseUrl { .. }
            | Self::MissingApiKey
            | Self::InsecureHttp { .. }
            | Self::Redirect { .. }
            | Self::BodyTooLarge { .. } => ErrorClass::Failure,
        }
    }
}
