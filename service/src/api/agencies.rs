//! `POST /v1/agencies`: create or rename an agency under the tenant's own id.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::auth::Tenant;
use crate::db::{AgencyRecord, UpsertAgency};
use crate::domain::{PlatformId, required_text};
use crate::envelope::ErrorEnvelope;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;
use crate::time::format_millis;

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/agencies", post(create_or_rename_agency))
}

/// OpenAPI description of this resource.
#[derive(Debug, OpenApi)]
#[openapi(
    paths(create_or_rename_agency),
    components(schemas(CreateAgencyRequest, Agency))
)]
pub struct AgenciesApi;

/// Body of `POST /agencies`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateAgencyRequest {
    /// The tenant's id for the agency (trimmed; may not begin with `svc_agent_`/`svc_agency_`).
    #[schema(value_type = String)]
    pub platform_agency_id: Option<String>,
    /// Display name (trimmed).
    #[schema(value_type = String)]
    pub name: Option<String>,
}

/// The Agency object.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Agency {
    /// Service agency id (`svc_agency_…`).
    pub id: String,
    /// Display name.
    pub name: String,
    /// The tenant's id for the agency.
    pub platform_agency_id: String,
    /// Creation time, `YYYY-MM-DDTHH:MM:SS.sssZ`.
    pub created_at: String,
}

impl From<AgencyRecord> for Agency {
    fn from(record: AgencyRecord) -> Self {
        Agency {
            id: record.id,
            name: record.name,
            platform_agency_id: record.platform_agency_id,
            created_at: format_millis(record.created_at_ms),
        }
    }
}

/// Create or rename an agency.
#[utoipa::path(
    post,
    path = "/agencies",
    tag = "roster",
    request_body = CreateAgencyRequest,
    security(("apiKey" = [])),
    responses(
        (status = 201, description = "Agency created", body = Agency),
        (status = 200, description = "Existing agency (renamed if the name differed)", body = Agency),
        (status = 400, description = "INVALID_REQUEST", body = ErrorEnvelope),
        (status = 401, description = "INVALID_API_KEY, API_KEY_REVOKED", body = ErrorEnvelope),
        (status = 403, description = "TENANT_INACTIVE, IP_NOT_ALLOWED", body = ErrorEnvelope),
    )
)]
async fn create_or_rename_agency(
    State(state): State<AppState>,
    tenant: Tenant,
    ApiJson(body): ApiJson<CreateAgencyRequest>,
) -> Result<(StatusCode, Json<Agency>), ApiError> {
    let platform_agency_id = match body.platform_agency_id.as_deref() {
        Some(raw) => PlatformId::parse("platformAgencyId", raw)?.into_inner(),
        None => return Err(ApiError::invalid("platformAgencyId is required")),
    };
    let name = required_text("name", body.name.as_deref())?;
    let (agency, created) = state
        .db
        .upsert_agency(UpsertAgency {
            tenant_id: tenant.id,
            platform_agency_id,
            name,
            now_ms: state.now_ms(),
        })
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(agency.into())))
}
