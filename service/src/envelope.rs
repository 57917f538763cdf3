//! The error envelope as the OpenAPI document describes it (documentation types; the envelope
//! itself is written by [`crate::error`] and [`crate::request_id`]). Every handler module names
//! these in its responses, and `api/openapi.rs` lists them: kept here, beside `error.rs`, so the
//! document sits on top of the handlers and imports only.

use serde::Serialize;
use utoipa::ToSchema;

use crate::error::AgentAlreadyExistsDetails;

/// The error envelope (documentation type).
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorEnvelope {
    /// The error.
    pub error: ErrorObject,
}

/// The `error` object of the envelope (documentation type).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorObject {
    /// Contract code; branch on it.
    pub code: String,
    /// Human-readable; may change.
    pub message: String,
    /// Equals the `X-Service-Request-Id` header.
    pub request_id: String,
    /// Only on codes that document it; absent otherwise. Today only `AGENT_ALREADY_EXISTS`,
    /// whose envelope (`AgentAlreadyExistsEnvelope`) gives its shape.
    #[schema(value_type = Object, required = false)]
    pub details: Option<serde_json::Value>,
}

/// The error envelope of `409 AGENT_ALREADY_EXISTS`, the one code that documents `details`
/// (documentation type).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentAlreadyExistsEnvelope {
    /// The error.
    pub error: AgentAlreadyExistsError,
}

/// The `error` object of `409 AGENT_ALREADY_EXISTS` (documentation type).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentAlreadyExistsError {
    /// `AGENT_ALREADY_EXISTS`.
    pub code: String,
    /// Human-readable; may change.
    pub message: String,
    /// Equals the `X-Service-Request-Id` header.
    pub request_id: String,
    /// The agent already registered under a sent handle.
    pub details: AgentAlreadyExistsDetails,
}
