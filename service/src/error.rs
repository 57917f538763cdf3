//! The error contract (section 7): one enum that knows each code's HTTP status, and one
//! `IntoResponse` that writes the envelope `{ "error": { code, message, requestId, details? } }`.
//!
//! The request id is filled in by [`crate::request_id`], which owns it: an error response
//! carries its [`ErrorBody`] as a response extension and the middleware renders it.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::db::{DbError, Handle};

/// Every error the API can answer, one variant per contract code (plus routing errors).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: validation failure, bad cursor, bad limit, bad handle combination.
    #[error("{0}")]
    InvalidRequest(String),
    /// 400: unknown drillKey.
    #[error("unknown drillKey")]
    DrillNotFound,
    /// 401: missing or invalid API key.
    #[error("missing or invalid API key")]
    InvalidApiKey,
    /// 401: the API key was revoked.
    #[error("the API key was revoked")]
    ApiKeyRevoked,
    /// 401: session token malformed or rejected.
    #[error("{0}")]
    InvalidToken(String),
    /// 401: session token expired before redemption.
    #[error("the session token expired before redemption")]
    TokenExpired,
    /// 401: session token already redeemed.
    #[error("the session token was already redeemed")]
    TokenAlreadyUsed,
    /// 403: caller address not on the tenant's allowlist.
    #[error("the caller's IP address is not on the tenant's allowlist")]
    IpNotAllowed,
    /// 403: the tenant is inactive.
    #[error("the tenant is inactive")]
    TenantInactive,
    /// 403: the monthly usage allowance is spent.
    #[error("the monthly usage allowance is spent")]
    TenantQuotaExceeded,
    /// 404: no such call for the tenant.
    #[error("no such call")]
    CallNotFound,
    /// 404: no agent of the tenant under that id.
    #[error("no such agent")]
    AgentNotFound,
    /// 404: no such agency for the tenant.
    #[error("no such agency")]
    AgencyNotFound,
    /// 409: a rep is already registered under a sent handle.
    #[error("an agent is already registered under the {} sent", .0.matched_on.as_str())]
    AgentAlreadyExists(AgentAlreadyExistsDetails),
    /// 403 on an audio link that is expired, tampered with or for another call (the archive's
    /// links are this service's own; outside the contract's codes).
    #[error("{0}")]
    AudioLinkInvalid(String),
    /// 416 on an audio link asked for a `Range` outside the recording (answered with
    /// `Content-Range: bytes */<length>`, as HTTP asks; outside the contract's codes).
    #[error("the requested range is not within the recording")]
    RangeNotSatisfiable,
    /// 429: the tenant is over the request rate limit the operator set (off by default; the
    /// contract announces 429 with `Retry-After` should limits be introduced). Holds the wait.
    #[error("too many requests: retry after the Retry-After delay")]
    RateLimited(std::time::Duration),
    /// 404 on a path the API does not have (routing; outside the contract's codes).
    #[error("no such endpoint")]
    RouteNotFound,
    /// 405 on a known path with a method it does not accept (routing).
    #[error("method not allowed on this endpoint")]
    MethodNotAllowed,
    /// 500 `INTERNAL_ERROR` injected by the operator's faults (see [`crate::faults`]); not
    /// logged as an error.
    #[error("internal error (injected fault)")]
    InjectedFault,
    /// 500: unexpected; the cause is logged, never sent.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
    /// 503: no persona available for the drill.
    #[error("{0}")]
    ServiceUnavailable(String),
}

impl ApiError {
    /// A `400 INVALID_REQUEST` with a message.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::InvalidRequest(message.into())
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) | ApiError::DrillNotFound => StatusCode::BAD_REQUEST,
            ApiError::InvalidApiKey
            | ApiError::ApiKeyRevoked
            | ApiError::InvalidToken(_)
            | ApiError::TokenExpired
            | ApiError::TokenAlreadyUsed => StatusCode::UNAUTHORIZED,
            ApiError::IpNotAllowed
            | ApiError::TenantInactive
            | ApiError::TenantQuotaExceeded
            | ApiError::AudioLinkInvalid(_) => StatusCode::FORBIDDEN,
            ApiError::CallNotFound
            | ApiError::AgentNotFound
            | ApiError::AgencyNotFound
            | ApiError::RouteNotFound => StatusCode::NOT_FOUND,
            ApiError::AgentAlreadyExists(_) => StatusCode::CONFLICT,
            ApiError::RangeNotSatisfiable => StatusCode::RANGE_NOT_SATISFIABLE,
            ApiError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Internal(_) | ApiError::InjectedFault => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::ServiceUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The contract code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "INVALID_REQUEST",
            ApiError::DrillNotFound => "DRILL_NOT_FOUND",
            ApiError::InvalidApiKey => "INVALID_API_KEY",
            ApiError::ApiKeyRevoked => "API_KEY_REVOKED",
            ApiError::InvalidToken(_) => "INVALID_TOKEN",
            ApiError::TokenExpired => "TOKEN_EXPIRED",
            ApiError::TokenAlreadyUsed => "TOKEN_ALREADY_USED",
            ApiError::IpNotAllowed => "IP_NOT_ALLOWED",
            ApiError::TenantInactive => "TENANT_INACTIVE",
            ApiError::TenantQuotaExceeded => "TENANT_QUOTA_EXCEEDED",
            ApiError::CallNotFound => "CALL_NOT_FOUND",
            ApiError::AgentNotFound => "AGENT_NOT_FOUND",
            ApiError::AgencyNotFound => "AGENCY_NOT_FOUND",
            ApiError::AgentAlreadyExists(_) => "AGENT_ALREADY_EXISTS",
            ApiError::AudioLinkInvalid(_) => "AUDIO_LINK_INVALID",
            ApiError::RangeNotSatisfiable => "RANGE_NOT_SATISFIABLE",
            ApiError::RateLimited(_) => "RATE_LIMITED",
            ApiError::RouteNotFound => "NOT_FOUND",
            ApiError::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ApiError::Internal(_) | ApiError::InjectedFault => "INTERNAL_ERROR",
            ApiError::ServiceUnavailable(_) => "SERVICE_UNAVAILABLE",
        }
    }

    /// The `details` object, only on codes that document one.
    pub fn details(&self) -> Option<Value> {
        match self {
            ApiError::AgentAlreadyExists(details) => serde_json::to_value(details).ok(),
            _ => None,
        }
    }
}

/// The `details` of `409 AGENT_ALREADY_EXISTS`: the rep already registered under a sent handle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentAlreadyExistsDetails {
    /// The existing agent's service id.
    pub agent_id: String,
    /// The existing agent's service agency id.
    pub agency_id: String,
    /// The handle that matched (the first of `platformAgentId`, `npn`, `email` sent).
    pub matched_on: Handle,
}

/// The parts of an error envelope, waiting for the request id (a response extension).
#[derive(Clone, Debug, Serialize)]
pub struct ErrorBody {
    /// Contract code.
    pub code: &'static str,
    /// Human-readable message.
    pub message: String,
    /// Documented details, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ErrorBody {
    /// Renders the envelope with the request id.
    pub fn envelope(&self, request_id: &str) -> Value {
        let mut error = serde_json::json!({
            "code": self.code,
            "message": self.message,
            "requestId": request_id,
        });
        if let (Some(details), Some(map)) = (&self.details, error.as_object_mut()) {
            map.insert("details".to_owned(), details.clone());
        }
        serde_json::json!({ "error": error })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(cause) = &self {
            tracing::error!(error = format!("{cause:#}"), "internal error");
        }
        let body = ErrorBody {
            code: self.code(),
            message: self.to_string(),
            details: self.details(),
        };
        let mut response = self.status().into_response();
        if let ApiError::RateLimited(wait) = &self {
            // Whole seconds, at least one (Retry-After has no fraction).
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            if let Ok(value) = axum::http::HeaderValue::from_str(&secs.max(1).to_string()) {
                response
                    .headers_mut()
                    .insert(axum::http::header::RETRY_AFTER, value);
            }
        }
        response.extensions_mut().insert(body);
        response
    }
}

impl From<DbError> for ApiError {
    fn from(error: DbError) -> Self {
        ApiError::Internal(anyhow::Error::new(error))
    }
}
