//! `POST /v1/session`: mint a single-use session token for a registered rep.
//!
//! The rep is named by `platformAgentId` or `agentId` (not both: `400`). The earlier contract
//! form's `externalUserId` / `externalAgencyId` are accepted as labels echoed on the call (and
//! filterable on GET /calls). How the forms combine: with `agentId` or `platformAgentId` the
//! labels are stored as sent; with neither, `externalUserId` names the rep as a
//! `platformAgentId` would (the earlier form) and is also kept as the label. An `npn` or `email`
//! alone is `404 AGENT_NOT_FOUND`; no identifier at all is `400 INVALID_REQUEST`.
//!
//! The monthly allowance (practice minutes of the current UTC calendar month, failed-score calls
//! included) is checked in the same transaction that stores the token: when it is spent the
//! answer is `403 TENANT_QUOTA_EXCEEDED` and no token exists.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Datelike, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::auth::Tenant;
use crate::db::{AgentRef, MintResult, NewMint};
use crate::domain::{PlatformId, text};
use crate::envelope::ErrorEnvelope;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::ids;
use crate::session_token::Claims;
use crate::state::AppState;
use crate::time::format_timestamp;

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/session", post(mint_session))
}

/// OpenAPI description of this resource.
#[derive(Debug, OpenApi)]
#[openapi(paths(mint_session), components(schemas(MintRequest, SessionToken)))]
pub struct SessionApi;

/// Body of `POST /session`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MintRequest {
    /// The rep by the tenant's id.
    pub platform_agent_id: Option<String>,
    /// The rep by the service id (`svc_agent_…`).
    pub agent_id: Option<String>,
    /// Earlier form: a rep label echoed on calls; names the rep when no other id is sent.
    pub external_user_id: Option<String>,
    /// Earlier form: an agency label echoed on calls (never an authorization boundary).
    pub external_agency_id: Option<String>,
    /// Not accepted as an identifier (`404 AGENT_NOT_FOUND` when it is the only one).
    pub npn: Option<String>,
    /// Not accepted as an identifier (`404 AGENT_NOT_FOUND` when it is the only one).
    pub email: Option<String>,
}

/// A minted session token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionToken {
    /// The JWT; single use, for POST /roleplay/session.
    pub token: String,
    /// When it expires (`YYYY-MM-DDTHH:MM:SS.sssZ`).
    pub expires_at: String,
}

fn optional_text(field: &str, raw: Option<&str>) -> Result<Option<String>, ApiError> {
    raw.map(|raw| text(field, raw)).transpose()
}

/// The first instant of the month of `now` and of the next month, in milliseconds.
pub fn month_bounds(now: DateTime<Utc>) -> (i64, i64) {
    let start = Utc
        .with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0)
        .single();
    let (year, month) = if now.month() == 12 {
        (now.year() + 1, 1)
    } else {
        (now.year(), now.month() + 1)
    };
    let end = Utc.with_ymd_and_hms(year, month, 1, 0, 0, 0).single();
    (
        start.map_or(i64::MIN, |t| t.timestamp_millis()),
        end.map_or(i64::MAX, |t| t.timestamp_millis()),
    )
}

fn agent_ref(body: &MintRequest, external_user_id: Option<&String>) -> Result<AgentRef, ApiError> {
    match (body.agent_id.as_deref(), body.platform_agent_id.as_deref()) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "name the rep by agentId or platformAgentId, not both",
        )),
        (Some(agent_id), None) => Ok(AgentRef::ServiceId(text("agentId", agent_id)?)),
        (None, Some(platform)) => Ok(AgentRef::PlatformId(
            PlatformId::parse("platformAgentId", platform)?.into_inner(),
        )),
        (None, None) => match external_user_id {
            Some(label) => Ok(AgentRef::PlatformId(label.clone())),
            None if body.npn.is_some() || body.email.is_some() => Err(ApiError::AgentNotFound),
            None => Err(ApiError::invalid("platformAgentId or agentId is required")),
        },
    }
}

/// Mint a session token.
#[utoipa::path(
    post,
    path = "/session",
    tag = "sessions",
    request_body = MintRequest,
    security(("apiKey" = [])),
    responses(
        (status = 200, description = "Token minted", body = SessionToken),
        (status = 400, description = "INVALID_REQUEST", body = ErrorEnvelope),
        (status = 401, description = "INVALID_API_KEY, API_KEY_REVOKED", body = ErrorEnvelope),
        (status = 403, description = "TENANT_INACTIVE, IP_NOT_ALLOWED, TENANT_QUOTA_EXCEEDED (no token issued)", body = ErrorEnvelope),
        (status = 404, description = "AGENT_NOT_FOUND (also for an NPN or email alone)", body = ErrorEnvelope),
    )
)]
async fn mint_session(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiJson(body): ApiJson<MintRequest>,
) -> Result<Json<SessionToken>, ApiError> {
    let external_user_id = optional_text("externalUserId", body.external_user_id.as_deref())?;
    let external_agency_id = optional_text("externalAgencyId", body.external_agency_id.as_deref())?;
    optional_text("npn", body.npn.as_deref())?;
    optional_text("email", body.email.as_deref())?;
    let agent = agent_ref(&body, external_user_id.as_ref())?;
    let agent = state
        .db
        .session_agent(&tenant.id, agent)
        .await?
        .ok_or(ApiError::AgentNotFound)?;

    let now = state.clock.now();
    let jti = ids::new_id("tok_");
    let claims = Claims::new(
        &tenant.id,
        &agent.agent_id,
        &jti,
        now,
        state.practice.token_ttl.as_secs(),
    );
    let token = state
        .practice
        .token_key
        .mint(&claims)
        .map_err(|e| ApiError::Internal(e.into()))?;
    let (month_start, month_end) = month_bounds(now);
    let minted = state
        .db
        .mint_session(
            NewMint {
                jti,
                call_id: ids::call_id(),
                tenant_id: tenant.id,
                agent_id: agent.agent_id,
                agency_id: agent.agency_id,
                platform_agent_id: agent.platform_agent_id,
                platform_agency_id: agent.platform_agency_id,
                external_user_id,
                external_agency_id,
                expires_at: claims.exp.saturating_mul(1000),
                now: now.timestamp_millis(),
            },
            month_start,
            month_end,
        )
        .await?;
    match minted {
        MintResult::QuotaExceeded => Err(ApiError::TenantQuotaExceeded),
        MintResult::Minted => Ok(Json(SessionToken {
            token,
            expires_at: format_timestamp(crate::time::from_millis(claims.exp.saturating_mul(1000))),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn month_bounds_cover_the_utc_calendar_month() {
        let at = Utc
            .with_ymd_and_hms(2026, 12, 31, 23, 59, 59)
            .single()
            .expect("date");
        let (start, end) = month_bounds(at);
        assert_eq!(
            crate::time::format_millis(start),
            "2026-12-01T00:00:00.000Z"
        );
        assert_eq!(crate::time::format_millis(end), "2027-01-01T00:00:00.000Z");
    }
}
