//! The client's error type: the contract's REST error envelope (`code`, `message`, `requestId`,
//! `details`) or a transport failure, and how each is classified for retries and for callers
//! that decide what to do next (stop, try later, fix the request).

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// An error response from the service, read from the contract's envelope when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Contract code ([`ErrorCode::AgentAlreadyExists`], …); a code this client does not know
    /// is kept as [`ErrorCode::Unknown`], and a body with no envelope (a `429` from a proxy,
    /// for instance) reads as `Unknown("HTTP_<status>")`.
    pub code: ErrorCode,
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
                code: ErrorCode::parse(&error.code),
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
                    code: ErrorCode::Unknown(format!("HTTP_{status}")),
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
    #[error("no API key configured")]
    MissingApiKey,
    /// The User-Agent suffix given to the builder is not printable ASCII.
    #[error("the User-Agent suffix must be printable ASCII")]
    UserAgent,
    /// A plain-HTTP base URL to a host that is not loopback, not allowed
    /// ([`super::ClientBuilder::allow_insecure_http`]): the API key would travel in clear.
    #[error(
        "refusing the plain-HTTP base URL {url:?}: the API key would travel in clear to a host \
         that is not loopback (127.0.0.0/8, ::1, localhost); use https://, or allow plain HTTP \
         explicitly"
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

/// How an error should be treated by a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Bad or revoked credential, inactive tenant, IP not allowed, bad session token.
    Auth,
    /// Worth retrying later: 429, 5xx, connection errors, timeouts.
    Temporary,
    /// Anything else: fix the request or the data.
    Failure,
}

/// The contract's error codes (its section on errors), and any other as [`ErrorCode::Unknown`]:
/// a code added to the service later still reads, and compares equal to its text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `INVALID_API_KEY`.
    InvalidApiKey,
    /// `API_KEY_REVOKED`.
    ApiKeyRevoked,
    /// `TENANT_INACTIVE`.
    TenantInactive,
    /// `IP_NOT_ALLOWED`.
    IpNotAllowed,
    /// `INVALID_REQUEST`.
    InvalidRequest,
    /// `AGENCY_NOT_FOUND`.
    AgencyNotFound,
    /// `AGENT_NOT_FOUND`.
    AgentNotFound,
    /// `AGENT_ALREADY_EXISTS` (its `details` name the existing agent).
    AgentAlreadyExists,
    /// `CALL_NOT_FOUND`.
    CallNotFound,
    /// `TENANT_QUOTA_EXCEEDED`.
    TenantQuotaExceeded,
    /// `INVALID_TOKEN`.
    InvalidToken,
    /// `TOKEN_EXPIRED`.
    TokenExpired,
    /// `TOKEN_ALREADY_USED`.
    TokenAlreadyUsed,
    /// `DRILL_NOT_FOUND`.
    DrillNotFound,
    /// `SERVICE_UNAVAILABLE`.
    ServiceUnavailable,
    /// `INTERNAL_ERROR`.
    InternalError,
    /// `RATE_LIMITED` (with `Retry-After`).
    RateLimited,
    /// Any other code, kept as sent.
    Unknown(String),
}

const CODES: [(ErrorCode, &str); 17] = [
    (ErrorCode::InvalidApiKey, "INVALID_API_KEY"),
    (ErrorCode::ApiKeyRevoked, "API_KEY_REVOKED"),
    (ErrorCode::TenantInactive, "TENANT_INACTIVE"),
    (ErrorCode::IpNotAllowed, "IP_NOT_ALLOWED"),
    (ErrorCode::InvalidRequest, "INVALID_REQUEST"),
    (ErrorCode::AgencyNotFound, "AGENCY_NOT_FOUND"),
    (ErrorCode::AgentNotFound, "AGENT_NOT_FOUND"),
    (ErrorCode::AgentAlreadyExists, "AGENT_ALREADY_EXISTS"),
    (ErrorCode::CallNotFound, "CALL_NOT_FOUND"),
    (ErrorCode::TenantQuotaExceeded, "TENANT_QUOTA_EXCEEDED"),
    (ErrorCode::InvalidToken, "INVALID_TOKEN"),
    (ErrorCode::TokenExpired, "TOKEN_EXPIRED"),
    (ErrorCode::TokenAlreadyUsed, "TOKEN_ALREADY_USED"),
    (ErrorCode::DrillNotFound, "DRILL_NOT_FOUND"),
    (ErrorCode::ServiceUnavailable, "SERVICE_UNAVAILABLE"),
    (ErrorCode::InternalError, "INTERNAL_ERROR"),
    (ErrorCode::RateLimited, "RATE_LIMITED"),
];

impl ErrorCode {
    /// The code for `text` (a known code, else [`ErrorCode::Unknown`]).
    pub fn parse(text: &str) -> Self {
        CODES
            .iter()
            .find(|(_, known)| *known == text)
            .map_or_else(|| Self::Unknown(text.to_owned()), |(code, _)| code.clone())
    }

    /// The code as the service writes it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Unknown(text) => text,
            known => CODES
                .iter()
                .find(|(code, _)| code == known)
                .map_or("", |(_, text)| text),
        }
    }

    /// Whether the code says the credential is refused (key, tenant, address or token).
    pub fn is_auth(&self) -> bool {
        matches!(
            self,
            Self::InvalidApiKey
                | Self::ApiKeyRevoked
                | Self::TenantInactive
                | Self::IpNotAllowed
                | Self::InvalidToken
                | Self::TokenExpired
                | Self::TokenAlreadyUsed
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl ClientError {
    /// The contract code when the service sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api(e) => Some(e.code.as_str()),
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
            Self::Api(e) if e.code.is_auth() => ErrorClass::Auth,
            Self::Api(e) if e.code == ErrorCode::TenantQuotaExceeded => ErrorClass::Failure,
            Self::Api(e) if e.status == 401 || e.status == 403 => ErrorClass::Auth,
            Self::Api(e) if e.status == 429 || e.status >= 500 => ErrorClass::Temporary,
            Self::Connect(_) | Self::Timeout(_) => ErrorClass::Temporary,
            Self::Api(_)
            | Self::Decode(_)
            | Self::BaseUrl { .. }
            | Self::MissingApiKey
            | Self::UserAgent
            | Self::InsecureHttp { .. }
            | Self::Redirect { .. }
            | Self::BodyTooLarge { .. } => ErrorClass::Failure,
        }
    }
}
