//! The console's own backend under `/console/api/`, doing for the page what a tenant's backend
//! does for its front end, with the sandbox's API key (which never leaves this process):
//!
//! - `GET /console/api/agents`: the registered agents for the picker (the first
//!   [`MAX_AGENTS`] registered, sorted by name);
//! - `POST /console/api/token` `{platformAgentId}` or `{agentId}`: a session token minted with
//!   `POST /v1/session`, answered as `{token, expiresAt}`;
//! - `GET /console/api/calls/{callId}`: `{state, call}`: the call's state in the sandbox
//!   (`live`, `ended`, `scoring`, `scored`, `not_scored`) and, once scored, its detail from
//!   `GET /v1/calls/{callId}`, as the service sent it.
//!
//! Errors are `{error: {code, message}}`: the service's code and message when the service
//! refused, else the console's own.

use std::str::FromStr as _;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::ConsoleBackend;
use svc_client::{AgentQuery, CallId, ClientError, MintFor};

/// The most agents the picker lists.
pub const MAX_AGENTS: usize = 500;

/// What a console request fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// Refused by the guard.
    #[error("{1}")]
    Refused(StatusCode, String),
    /// A request the console cannot act on.
    #[error("{0}")]
    BadRequest(String),
    /// The sandbox holds no such call.
    #[error("the sandbox holds no call {0}")]
    CallNotFound(String),
    /// The service refused, or could not be reached.
    #[error(transparent)]
    Service(#[from] ClientError),
    /// The sandbox's database failed.
    #[error("the sandbox's database: {0}")]
    Database(String),
    /// No such console route.
    #[error("the console has no {0}")]
    NotFound(String),
}

impl ConsoleError {
    fn status_and_code(&self) -> (StatusCode, String) {
        match self {
            Self::Refused(status, _) => (*status, "FORBIDDEN".into()),
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "INVALID_REQUEST".into()),
            Self::CallNotFound(_) => (StatusCode::NOT_FOUND, "CALL_NOT_FOUND".into()),
            Self::Service(ClientError::Api(error)) => (
                StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_GATEWAY),
                error.code.to_string(),
            ),
            Self::Service(_) => (StatusCode::BAD_GATEWAY, "SERVICE_UNAVAILABLE".into()),
            Self::Database(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR".into()),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "NOT_FOUND".into()),
        }
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let message = match &self {
            Self::Service(ClientError::Api(error)) => error.message.clone(),
            other => other.to_string(),
        };
        if status.is_server_error() {
            tracing::warn!(code, message, "a console request failed");
        }
        no_store((
            status,
            Json(json!({ "error": { "code": code, "message": message } })),
        ))
    }
}

/// A response the browser must not keep (tokens, call state).
fn no_store(response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// An agent as the picker shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PickerAgent {
    /// Service agent id.
    pub agent_id: String,
    /// The tenant's id for the agent, when registered with one.
    pub platform_agent_id: Option<String>,
    /// First and last name.
    pub name: String,
    /// Service id of the agent's agency.
    pub agency_id: String,
}

/// `GET /console/api/agents`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentList {
    /// The first [`MAX_AGENTS`] agents registered, by name.
    pub agents: Vec<PickerAgent>,
    /// Whether the roster holds more.
    pub truncated: bool,
}

/// Lists the roster for the picker.
///
/// # Errors
/// The service refused or could not be reached.
pub async fn agents(State(backend): State<ConsoleBackend>) -> Result<Response, ConsoleError> {
    let query = AgentQuery {
        limit: Some(100),
        ..AgentQuery::default()
    };
    let mut stream = Box::pin(backend.client.agents(query).take(MAX_AGENTS + 1));
    let mut agents = Vec::new();
    while let Some(agent) = stream.next().await {
        let agent = agent?;
        agents.push(PickerAgent {
            agent_id: agent.id.to_string(),
            platform_agent_id: agent.platform_agent_id,
            name: format!("{} {}", agent.first_name, agent.last_name)
                .trim()
                .to_owned(),
            agency_id: agent.agency_id.to_string(),
        });
    }
    let truncated = agents.len() > MAX_AGENTS;
    agents.truncate(MAX_AGENTS);
    agents.sort_by(|a, b| {
        a.name
            .to_lowercase()
            .cmp(&b.name.to_lowercase())
            .then_with(|| a.agent_id.cmp(&b.agent_id))
    });
    Ok(no_store(Json(AgentList { agents, truncated })))
}

/// `POST /console/api/token` body: one of the two ids `POST /v1/session` takes.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRequest {
    /// The tenant's id for the agent.
    pub platform_agent_id: Option<String>,
    /// The service's id for the agent.
    pub agent_id: Option<String>,
}

impl TokenRequest {
    fn mint_for(self) -> Result<MintFor, ConsoleError> {
        let given = |id: Option<String>| id.map(|i| i.trim().to_owned()).filter(|i| !i.is_empty());
        match (given(self.platform_agent_id), given(self.agent_id)) {
            (Some(id), None) => Ok(MintFor::PlatformAgentId(id)),
            (None, Some(id)) => svc_client::AgentId::from_str(&id)
                .map(MintFor::AgentId)
                .map_err(|e| ConsoleError::BadRequest(e.to_string())),
            _ => Err(ConsoleError::BadRequest(
                "name the agent by exactly one of platformAgentId and agentId".into(),
            )),
        }
    }
}

/// Mints a session token for the agent named, with the sandbox's key.
///
/// # Errors
/// A body that names no agent (or two), or the service's refusal (`AGENT_NOT_FOUND`, ...).
pub async fn token(
    State(backend): State<ConsoleBackend>,
    body: Result<Json<TokenRequest>, JsonRejection>,
) -> Result<Response, ConsoleError> {
    let Json(body) = body.map_err(|e| ConsoleError::BadRequest(e.body_text()))?;
    let token = backend.client.mint_session(&body.mint_for()?).await?;
    Ok(no_store(Json(json!({
        "token": token.token,
        "expiresAt": token.expires_at,
    }))))
}

/// `GET /console/api/calls/{callId}`.
#[derive(Debug, Clone, Serialize)]
pub struct CallView {
    /// The call's state in the sandbox.
    pub state: String,
    /// The call detail once scored, as the service sent it.
    pub call: Option<Value>,
}

/// The call's state, and its detail once scored.
///
/// # Errors
/// Not a call id, no such call, the database or the service failed.
pub async fn call(
    State(backend): State<ConsoleBackend>,
    Path(call_id): Path<String>,
) -> Result<Response, ConsoleError> {
    let call_id =
        CallId::from_str(&call_id).map_err(|e| ConsoleError::BadRequest(e.to_string()))?;
    let state = backend
        .db
        .call_state(call_id.as_str())
        .await
        .map_err(|e| ConsoleError::Database(e.to_string()))?
        .ok_or_else(|| ConsoleError::CallNotFound(call_id.to_string()))?;
    let call = if state == "scored" {
        let detail = backend.client.call_raw(&call_id).await?;
        Some(
            serde_json::from_str(&detail.json)
                .map_err(|e| ConsoleError::Service(ClientError::Decode(e.to_string())))?,
        )
    } else {
        None
    };
    Ok(no_store(Json(CallView { state, call })))
}

/// Any other path.
pub async fn not_found(uri: Uri) -> ConsoleError {
    ConsoleError::NotFound(uri.path().to_owned())
}
