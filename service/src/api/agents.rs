//! `POST /v1/agents` (register an agent) and `GET /v1/agents` (look up by one handle, or
//! page the roster).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::api::agencies::Agency;
use crate::api::paging::parse_limit;
use crate::auth::Tenant;
use crate::cursor::CursorScope;
use crate::db::{AgencyRef, AgentFilter, AgentLookup, AgentRecord, NewAgent, RegisterAgent};
use crate::domain::{Email, Npn, PlatformId, optional, required_text, text};
use crate::envelope::{AgentAlreadyExistsEnvelope, ErrorEnvelope};
use crate::error::{AgentAlreadyExistsDetails, ApiError};
use crate::extract::{ApiJson, ApiQuery};
use crate::state::AppState;
use crate::time::format_millis;

const CURSOR_ENDPOINT: &str = "GET /agents";

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/agents", post(register_agent).get(list_agents))
}

/// OpenAPI description of this resource.
#[derive(Debug, OpenApi)]
#[openapi(
    paths(register_agent, list_agents),
    components(schemas(RegisterAgentRequest, Agent, RegisteredAgent, AgentList))
)]
pub struct AgentsApi;

/// Body of `POST /agents`. `null` counts as omitted everywhere.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterAgentRequest {
    /// Required.
    #[schema(value_type = String)]
    pub first_name: Option<String>,
    /// Required.
    #[schema(value_type = String)]
    pub last_name: Option<String>,
    /// Handle; compared case-insensitively.
    pub email: Option<String>,
    /// Handle; non-digits stripped, 4-10 digits stored.
    pub npn: Option<String>,
    /// Handle; the tenant's id for the agent.
    pub platform_agent_id: Option<String>,
    /// The agency by the tenant's id (exactly one of this and `agencyId`).
    pub platform_agency_id: Option<String>,
    /// The agency by service id (exactly one of this and `platformAgencyId`).
    pub agency_id: Option<String>,
}

/// The Agent object.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    /// Service agent id (`svc_agent_…`).
    pub id: String,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: String,
    /// Email as registered.
    #[schema(required = true)]
    pub email: Option<String>,
    /// NPN (digits only).
    #[schema(required = true)]
    pub npn: Option<String>,
    /// The tenant's id for the agent.
    #[schema(required = true)]
    pub platform_agent_id: Option<String>,
    /// Service agency id.
    pub agency_id: String,
    /// Creation time, `YYYY-MM-DDTHH:MM:SS.sssZ`.
    pub created_at: String,
}

impl From<AgentRecord> for Agent {
    fn from(record: AgentRecord) -> Self {
        Agent {
            id: record.id,
            first_name: record.first_name,
            last_name: record.last_name,
            email: record.email,
            npn: record.npn,
            platform_agent_id: record.platform_agent_id,
            agency_id: record.agency_id,
            created_at: format_millis(record.created_at_ms),
        }
    }
}

/// Response of `POST /agents`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RegisteredAgent {
    /// The new agent.
    pub agent: Agent,
    /// Its agency.
    pub agency: Agency,
}

/// A page of agents.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentList {
    /// The agents, in registration order.
    pub data: Vec<Agent>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// Query of `GET /agents`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListAgentsQuery {
    /// Service agent id (counts as the one handle).
    pub agent_id: Option<String>,
    /// The tenant's id as registered.
    pub platform_agent_id: Option<String>,
    /// Non-digits stripped; 4-10 digits must remain.
    pub npn: Option<String>,
    /// Matched case-insensitively.
    pub email: Option<String>,
    /// Restrict to one of the tenant's agencies; combines with a handle by AND.
    pub agency_id: Option<String>,
    /// 1-100, default 50; not clamped.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: Option<String>,
    /// Opaque token from a previous `nextCursor`.
    pub cursor: Option<String>,
}

/// Register an agent into an existing agency.
#[utoipa::path(
    post,
    path = "/agents",
    tag = "roster",
    request_body = RegisterAgentRequest,
    security(("apiKey" = [])),
    responses(
        (status = 201, description = "Registered", body = RegisteredAgent),
        (status = 400, description = "INVALID_REQUEST", body = ErrorEnvelope),
        (status = 401, description = "INVALID_API_KEY, API_KEY_REVOKED", body = ErrorEnvelope),
        (status = 403, description = "TENANT_INACTIVE, IP_NOT_ALLOWED", body = ErrorEnvelope),
        (status = 404, description = "AGENCY_NOT_FOUND", body = ErrorEnvelope),
        (status = 409, description = "AGENT_ALREADY_EXISTS with details { agentId, agencyId, matchedOn }", body = AgentAlreadyExistsEnvelope),
    )
)]
async fn register_agent(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiJson(body): ApiJson<RegisterAgentRequest>,
) -> Result<(StatusCode, Json<RegisteredAgent>), ApiError> {
    let new = validate_registration(body, tenant.id, state.now_ms())?;
    match state.db.register_agent(new).await? {
        RegisterAgent::Created { agent, agency } => Ok((
            StatusCode::CREATED,
            Json(RegisteredAgent {
                agent: agent.into(),
                agency: agency.into(),
            }),
        )),
        RegisterAgent::AgencyNotFound => Err(ApiError::AgencyNotFound),
        RegisterAgent::AlreadyExists { agent, matched_on } => {
            Err(ApiError::AgentAlreadyExists(AgentAlreadyExistsDetails {
                agent_id: agent.id,
                agency_id: agent.agency_id,
                matched_on,
            }))
        }
    }
}

fn validate_registration(
    body: RegisterAgentRequest,
    tenant_id: String,
    now_ms: i64,
) -> Result<NewAgent, ApiError> {
    let first_name = required_text("firstName", body.first_name.as_deref())?;
    let last_name = required_text("lastName", body.last_name.as_deref())?;
    let email = optional("email", body.email.as_deref(), Email::parse)?;
    let npn = optional("npn", body.npn.as_deref(), Npn::parse)?;
    let platform_agent_id = optional(
        "platformAgentId",
        body.platform_agent_id.as_deref(),
        PlatformId::parse,
    )?;
    if email.is_none() && npn.is_none() && platform_agent_id.is_none() {
        return Err(ApiError::invalid(
            "at least one of npn, email, platformAgentId is required",
        ));
    }
    let agency = match (
        body.platform_agency_id.as_deref(),
        body.agency_id.as_deref(),
    ) {
        (Some(raw), None) => {
            AgencyRef::PlatformId(PlatformId::parse("platformAgencyId", raw)?.into_inner())
        }
        (None, Some(raw)) => AgencyRef::Id(text("agencyId", raw)?),
        _ => {
            return Err(ApiError::invalid(
                "exactly one of platformAgencyId or agencyId is required",
            ));
        }
    };
    Ok(NewAgent {
        tenant_id,
        agency,
        first_name,
        last_name,
        email: email.map(Email::into_inner),
        npn: npn.map(Npn::into_inner),
        platform_agent_id: platform_agent_id.map(PlatformId::into_inner),
        now_ms,
    })
}

/// Look agents up by one handle, list one agency, or page the whole roster.
#[utoipa::path(
    get,
    path = "/agents",
    tag = "roster",
    params(ListAgentsQuery),
    security(("apiKey" = [])),
    responses(
        (status = 200, description = "A page of agents (empty when nothing matches)", body = AgentList),
        (status = 400, description = "INVALID_REQUEST", body = ErrorEnvelope),
        (status = 401, description = "INVALID_API_KEY, API_KEY_REVOKED", body = ErrorEnvelope),
        (status = 403, description = "TENANT_INACTIVE, IP_NOT_ALLOWED", body = ErrorEnvelope),
        (status = 404, description = "AGENCY_NOT_FOUND", body = ErrorEnvelope),
    )
)]
async fn list_agents(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiQuery(query): ApiQuery<ListAgentsQuery>,
) -> Result<Json<AgentList>, ApiError> {
    let lookup = parse_lookup(&query)?;
    let agency_id = optional("agencyId", query.agency_id.as_deref(), text)?;
    let limit = parse_limit(query.limit.as_deref())?;
    let filters = filter_fingerprint(lookup.as_ref(), agency_id.as_deref());
    let scope = CursorScope {
        endpoint: CURSOR_ENDPOINT,
        tenant_id: &tenant.id,
        filters: &filters,
    };
    let after_seq = match query.cursor.as_deref() {
        None => None,
        Some(cursor) => {
            let position = state.cursors.decode(scope, cursor)?;
            let seq = position
                .parse::<i64>()
                .map_err(|_| ApiError::invalid("cursor is not valid for this request"))?;
            Some(seq)
        }
    };
    let page = state
        .db
        .list_agents(AgentFilter {
            tenant_id: tenant.id.clone(),
            lookup,
            agency_id,
            after_seq,
            limit,
        })
        .await?
        .ok_or(ApiError::AgencyNotFound)?;
    let next_cursor = page
        .next_after_seq
        .map(|seq| state.cursors.encode(scope, &seq.to_string()));
    Ok(Json(AgentList {
        data: page.agents.into_iter().map(Agent::from).collect(),
        next_cursor,
    }))
}

fn parse_lookup(query: &ListAgentsQuery) -> Result<Option<AgentLookup>, ApiError> {
    let sent = [
        query.agent_id.is_some(),
        query.platform_agent_id.is_some(),
        query.npn.is_some(),
        query.email.is_some(),
    ];
    if sent.iter().filter(|sent| **sent).count() > 1 {
        return Err(ApiError::invalid(
            "use exactly one of agentId, platformAgentId, npn, email",
        ));
    }
    if let Some(raw) = &query.agent_id {
        return Ok(Some(AgentLookup::Id(text("agentId", raw)?)));
    }
    if let Some(raw) = &query.platform_agent_id {
        let id = PlatformId::parse("platformAgentId", raw)?.into_inner();
        return Ok(Some(AgentLookup::PlatformAgentId(id)));
    }
    if let Some(raw) = &query.npn {
        return Ok(Some(AgentLookup::Npn(Npn::parse("npn", raw)?.into_inner())));
    }
    if let Some(raw) = &query.email {
        // Looked up as sent (trimmed, lowercased); no shape check, an odd value just
        // matches nothing.
        return Ok(Some(AgentLookup::Email(text("email", raw)?.to_lowercase())));
    }
    Ok(None)
}

fn filter_fingerprint(lookup: Option<&AgentLookup>, agency_id: Option<&str>) -> String {
    let (kind, value) = match lookup {
        None => ("", ""),
        Some(AgentLookup::Id(v)) => ("agentId", v.as_str()),
        Some(AgentLookup::PlatformAgentId(v)) => ("platformAgentId", v.as_str()),
        Some(AgentLookup::Npn(v)) => ("npn", v.as_str()),
        Some(AgentLookup::Email(v)) => ("email", v.as_str()),
    };
    serde_json::json!([kind, value, agency_id]).to_string()
}
