//! `GET /v1/calls` and `GET /v1/calls/{callId}`: the tenant's scored calls.
//!
//! The list is newest first by `endedAt` for practice calls (by `startedAt` for real calls),
//! bounded by inclusive `from` (required) and `to`, paged with keyset cursors on
//! (list time, id): a page never shifts when newer calls arrive. Cursors are bound to this
//! endpoint, the tenant and the filters. Only `scored` calls exist for these reads; any other
//! call, another tenant's included, is `404 CALL_NOT_FOUND`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::api::call_detail::{CallDetail, Score, TranscriptTurn};
use crate::api::paging::parse_limit;
use crate::auth::Tenant;
use crate::cursor::CursorScope;
use crate::db::{AgentRef, CallFilter, CallRow};
use crate::domain::{PlatformId, optional, text};
use crate::envelope::ErrorEnvelope;
use crate::error::ApiError;
use crate::extract::{ApiPath, ApiQuery};
use crate::realcall::audio::LINK_TTL;
use crate::state::AppState;
use crate::time::{format_timestamp, parse_timestamp};

const CURSOR_ENDPOINT: &str = "GET /calls";

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/calls", get(list_calls))
        .route("/calls/{call_id}", get(call_detail))
}

/// OpenAPI description of this resource.
#[derive(Debug, OpenApi)]
#[openapi(
    paths(list_calls, call_detail),
    components(schemas(CallRow, CallList, CallDetail, Score, TranscriptTurn))
)]
pub struct CallsApi;

/// Query of `GET /calls` (all strings, validated by the handler).
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListCallsQuery {
    /// Inclusive lower bound (ISO 8601); required.
    #[param(required = true, format = DateTime)]
    pub from: Option<String>,
    /// Inclusive upper bound (ISO 8601).
    #[param(format = DateTime)]
    pub to: Option<String>,
    /// `roleplay` or `real_call`; required.
    #[param(value_type = CallSource, inline, required = true)]
    pub source: Option<String>,
    /// Service agent id; another tenant's is `404 AGENT_NOT_FOUND`.
    pub agent_id: Option<String>,
    /// Service agency id; another tenant's is `404 AGENCY_NOT_FOUND`.
    pub agency_id: Option<String>,
    /// Tenant agent id; unknown gives an empty page.
    pub platform_agent_id: Option<String>,
    /// Tenant agency id; unknown gives an empty page.
    pub platform_agency_id: Option<String>,
    /// Earlier-form rep label.
    pub external_user_id: Option<String>,
    /// Earlier-form agency label.
    pub external_agency_id: Option<String>,
    /// 1–100, default 50.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: Option<String>,
    /// Opaque cursor from `nextCursor`.
    pub cursor: Option<String>,
}

// Documentation type: the handler reads `source` as a string and checks it itself.
/// Where a call came from.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CallSource {
    /// A practice call run through the SDK.
    Roleplay,
    /// A real call made on an agency's dialer.
    RealCall,
}

/// A page of calls.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallList {
    /// The rows, newest first.
    pub data: Vec<CallRow>,
    /// Cursor of the next page; null on the last.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// Which end of the window a bound is: times are stored in milliseconds, so a bound with a
/// finer fraction is moved inward to the next whole millisecond (a lower bound up, an upper
/// bound down), and the inclusive bounds hold exactly.
#[derive(Clone, Copy)]
enum End {
    From,
    To,
}

/// A window bound as given, and as the store's whole milliseconds.
struct Bound {
    /// The instant as given: seconds and nanoseconds since the epoch.
    exact: (i64, u32),
    /// The whole millisecond the query uses: `from` rounded up, `to` down, so that a bound
    /// finer than a millisecond holds exactly against times kept in milliseconds.
    millis: i64,
}

fn time_bound(end: End, raw: &str) -> Result<Bound, ApiError> {
    let field = match end {
        End::From => "from",
        End::To => "to",
    };
    let at = parse_timestamp(raw.trim()).ok_or_else(|| {
        ApiError::invalid(format!(
            "{field} must be an ISO 8601 date-time with an offset"
        ))
    })?;
    let millis = at.timestamp_millis();
    let finer = at.timestamp_subsec_nanos() % 1_000_000 != 0;
    Ok(Bound {
        exact: (at.timestamp(), at.timestamp_subsec_nanos()),
        millis: match end {
            End::From if finer => millis.saturating_add(1),
            _ => millis,
        },
    })
}

async fn build_filter(
    state: &AppState,
    tenant_id: &str,
    query: &ListCallsQuery,
) -> Result<CallFilter, ApiError> {
    let from = match query.from.as_deref() {
        Some(raw) => time_bound(End::From, raw)?,
        None => return Err(ApiError::invalid("from is required")),
    };
    let to = optional("to", query.to.as_deref(), |_, raw| time_bound(End::To, raw))?;
    // Compared as given: within one millisecond, rounding can put `to` before `from` in a
    // valid window, which then holds no call.
    if to.as_ref().is_some_and(|to| to.exact < from.exact) {
        return Err(ApiError::invalid("to must not be before from"));
    }
    let (from, to) = (from.millis, to.map(|to| to.millis));
    let source = match query.source.as_deref().map(str::trim) {
        Some(source @ ("roleplay" | "real_call")) => source.to_string(),
        Some(_) => return Err(ApiError::invalid("source must be roleplay or real_call")),
        None => return Err(ApiError::invalid("source is required")),
    };
    if query.agent_id.is_some() && query.platform_agent_id.is_some() {
        return Err(ApiError::invalid(
            "name the rep by agentId or platformAgentId, not both",
        ));
    }
    if query.agency_id.is_some() && query.platform_agency_id.is_some() {
        return Err(ApiError::invalid(
            "name the agency by agencyId or platformAgencyId, not both",
        ));
    }
    let agent_id = optional("agentId", query.agent_id.as_deref(), text)?;
    let agency_id = optional("agencyId", query.agency_id.as_deref(), text)?;
    let platform_agent_id = optional(
        "platformAgentId",
        query.platform_agent_id.as_deref(),
        PlatformId::parse,
    )?;
    let platform_agency_id = optional(
        "platformAgencyId",
        query.platform_agency_id.as_deref(),
        PlatformId::parse,
    )?;
    let external_user_id = optional("externalUserId", query.external_user_id.as_deref(), text)?;
    let external_agency_id = optional(
        "externalAgencyId",
        query.external_agency_id.as_deref(),
        text,
    )?;
    let limit = parse_limit(query.limit.as_deref())?;
    if let Some(agent_id) = &agent_id {
        state
            .db
            .session_agent(tenant_id, AgentRef::ServiceId(agent_id.clone()))
            .await?
            .ok_or(ApiError::AgentNotFound)?;
    }
    if let Some(agency_id) = &agency_id {
        state
            .db
            .agency(tenant_id, agency_id)
            .await?
            .ok_or(ApiError::AgencyNotFound)?;
    }
    Ok(CallFilter {
        tenant_id: tenant_id.to_string(),
        source,
        from,
        to,
        agent_id,
        agency_id,
        platform_agent_id: platform_agent_id.map(PlatformId::into_inner),
        platform_agency_id: platform_agency_id.map(PlatformId::into_inner),
        external_user_id,
        external_agency_id,
        after: None,
        limit,
    })
}

fn fingerprint(filter: &CallFilter) -> String {
    serde_json::json!([
        filter.source,
        filter.from,
        filter.to,
        filter.agent_id,
        filter.agency_id,
        filter.platform_agent_id,
        filter.platform_agency_id,
        filter.external_user_id,
        filter.external_agency_id,
    ])
    .to_string()
}

/// List scored calls.
#[utoipa::path(
    get,
    path = "/calls",
    tag = "calls",
    params(ListCallsQuery),
    security(("apiKey" = [])),
    responses(
        (status = 200, description = "A page of scored calls, newest first", body = CallList),
        (status = 400, description = "INVALID_REQUEST", body = ErrorEnvelope),
        (status = 401, description = "INVALID_API_KEY, API_KEY_REVOKED", body = ErrorEnvelope),
        (status = 403, description = "TENANT_INACTIVE, IP_NOT_ALLOWED", body = ErrorEnvelope),
        (status = 404, description = "AGENT_NOT_FOUND, AGENCY_NOT_FOUND", body = ErrorEnvelope),
    )
)]
async fn list_calls(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiQuery(query): ApiQuery<ListCallsQuery>,
) -> Result<Json<CallList>, ApiError> {
    let mut filter = build_filter(&state, &tenant.id, &query).await?;
    let filters = fingerprint(&filter);
    let scope = CursorScope {
        endpoint: CURSOR_ENDPOINT,
        tenant_id: &tenant.id,
        filters: &filters,
    };
    if let Some(cursor) = query.cursor.as_deref() {
        let position = state.cursors.decode(scope, cursor)?;
        let invalid = || ApiError::invalid("cursor is not valid for this request");
        let (at, id) = position.split_once(':').ok_or_else(invalid)?;
        filter.after = Some((at.parse::<i64>().map_err(|_| invalid())?, id.to_string()));
    }
    let limit = filter.limit as usize;
    let mut rows = state.db.list_calls(filter).await?;
    let next_cursor = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|last| {
            state
                .cursors
                .encode(scope, &format!("{}:{}", last.list_at, last.row.id))
        })
    } else {
        None
    };
    Ok(Json(CallList {
        data: rows.into_iter().map(|listed| listed.row).collect(),
        next_cursor,
    }))
}

/// The full detail of a scored call.
#[utoipa::path(
    get,
    path = "/calls/{callId}",
    tag = "calls",
    params(("callId" = String, Path, description = "Public call id")),
    security(("apiKey" = [])),
    responses(
        (status = 200, description = "The scored call", body = CallDetail),
        (status = 401, description = "INVALID_API_KEY, API_KEY_REVOKED", body = ErrorEnvelope),
        (status = 403, description = "TENANT_INACTIVE, IP_NOT_ALLOWED", body = ErrorEnvelope),
        (status = 404, description = "CALL_NOT_FOUND (unknown, another tenant's, not scored, or still scoring)", body = ErrorEnvelope),
    )
)]
async fn call_detail(
    State(state): State<AppState>,
    tenant: Tenant,
    headers: HeaderMap,
    call_id: Result<ApiPath<String>, ApiError>,
) -> Result<Json<CallDetail>, ApiError> {
    // A path that does not decode (not UTF-8) names no call.
    let Ok(ApiPath(call_id)) = call_id else {
        return Err(ApiError::CallNotFound);
    };
    let record = state
        .db
        .scored_call(&tenant.id, call_id.trim())
        .await?
        .ok_or(ApiError::CallNotFound)?;
    let archived = record
        .audio_file
        .as_deref()
        .is_some_and(|name| state.archive.holds(name));
    let mut detail = CallDetail::from_record(record).map_err(|e| ApiError::Internal(e.into()))?;
    // Real calls with an archive get a short-lived signed link (contract section 2).
    if archived {
        let expires = state.clock.now()
            + chrono::Duration::from_std(LINK_TTL).unwrap_or(chrono::Duration::zero());
        let base = state.public_base(&headers);
        detail.audio_url = Some(
            state
                .audio_links
                .url(&base, &detail.row.id, expires.timestamp()),
        );
        detail.audio_url_expires_at = Some(format_timestamp(
            chrono::DateTime::from_timestamp(expires.timestamp(), 0).unwrap_or(expires),
        ));
    }
    Ok(Json(detail))
}
