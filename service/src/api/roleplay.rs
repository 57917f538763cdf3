//! `POST /v1/roleplay/session`: redeem a session token and start a live practice call (the
//! SDK's endpoint, the only one that accepts cross-origin requests).
//!
//! Order (contract section 7): the token is checked first (`401 INVALID_TOKEN`, then
//! `401 TOKEN_EXPIRED`), then the body (`400 INVALID_REQUEST`: missing `drillKey`, a bad
//! `difficulty`, a `filters` that is not `{ state?, category? }` of strings); none of these
//! spends the token. Then the token is spent atomically (a replay, or the loser of a race, is
//! `401 TOKEN_ALREADY_USED`) and only then is the call set up, so `400 DRILL_NOT_FOUND`,
//! `503 SERVICE_UNAVAILABLE` (`fe-closing` and `hi-crosssell` have no personas in v1) and any
//! internal error leave it spent.

use axum::extract::{FromRequestParts, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::openapi::schema::SchemaType;
use utoipa::openapi::{Object, ObjectBuilder, Type};
use utoipa::{OpenApi, ToSchema};

use crate::auth::bearer_credential;
use crate::db::{GoLive, Spend};
use crate::domain::text;
use crate::envelope::ErrorEnvelope;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::ids;
use crate::practice::catalog::{Difficulty, Drill};
use crate::session_token::{Claims, TokenError};
use crate::state::AppState;

/// Routes of this resource (mount with the SDK CORS policy).
pub fn router() -> Router<AppState> {
    // OPTIONS is routed explicitly so the CORS layer answers the preflight (the server-wide
    // method-not-allowed fallback would otherwise take it, outside the layer).
    let route = post(redeem_session).options(|| async { axum::http::StatusCode::NO_CONTENT });
    crate::cors::with_sdk_cors(Router::new().route("/roleplay/session", route))
}

/// OpenAPI description of this resource.
#[derive(Debug, OpenApi)]
#[openapi(
    paths(redeem_session),
    components(schemas(RedeemRequest, PersonaFilters, LiveSession, PersonaName))
)]
pub struct RoleplayApi;

/// Body of `POST /roleplay/session`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedeemRequest {
    /// The drill; v1 supports `ma-full-sale`.
    #[schema(value_type = String)]
    pub drill_key: Option<String>,
    /// Best-effort persona filters.
    pub filters: Option<PersonaFilters>,
    /// `Beginner`, `Advanced` (default) or `Elite`.
    #[schema(schema_with = difficulty_schema)]
    pub difficulty: Option<String>,
}

/// `difficulty` as documented: one of the contract spellings, or `null` for the default.
fn difficulty_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .description(Some("`Beginner`, `Advanced` (default) or `Elite`."))
        .enum_values(Some([
            Some(Difficulty::Beginner.as_str()),
            Some(Difficulty::Advanced.as_str()),
            Some(Difficulty::Elite.as_str()),
            None,
        ]))
        .build()
}

/// Persona filters.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PersonaFilters {
    /// US state code; narrows the persona pool, falling back when nothing matches.
    pub state: Option<String>,
    /// Accepted, not applied in v1.
    pub category: Option<String>,
}

/// The persona as returned.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PersonaName {
    /// The persona's name.
    pub name: String,
}

/// Connection details of the started call.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveSession {
    /// Single-use ticket for the live socket's `auth` frame.
    pub connection_ticket: String,
    /// `ws://<public host>/v1/live/<sessionId>` (`wss://` when the public URL is HTTPS).
    pub connection_url: String,
    /// `ext_…` session id.
    pub session_id: String,
    /// Public call id.
    pub call_id: String,
    /// Who the rep will talk to.
    pub persona: PersonaName,
}

/// A session token that passed the signature and expiry checks (not yet spent).
#[derive(Debug)]
pub struct PresentedToken(pub Claims);

impl FromRequestParts<AppState> for PresentedToken {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer_credential(&parts.headers).ok_or_else(|| {
            ApiError::InvalidToken("a session token is required as the bearer credential".into())
        })?;
        match state.practice.token_key.verify(token, state.clock.now()) {
            Ok(claims) => Ok(PresentedToken(claims)),
            // A token spent before it expired was redeemed: replaying it is TOKEN_ALREADY_USED,
            // not "expired before redemption".
            Err(TokenError::Expired(claims)) => {
                if state.db.token_spent(&claims.jti, &claims.tid).await? {
                    Err(ApiError::TokenAlreadyUsed)
                } else {
                    Err(ApiError::TokenExpired)
                }
            }
            Err(_) => Err(ApiError::InvalidToken(
                "the session token is malformed or was not issued by this service".into(),
            )),
        }
    }
}

/// The SHA-256 hex stored for a connection ticket (the ticket itself is never stored).
pub fn ticket_hash(ticket: &str) -> String {
    hex::encode(Sha256::digest(ticket.as_bytes()))
}

struct Validated {
    drill_key: String,
    difficulty: Difficulty,
    state: Option<String>,
}

fn validate(body: RedeemRequest) -> Result<Validated, ApiError> {
    let drill_key = match body.drill_key.as_deref() {
        Some(raw) => text("drillKey", raw)?,
        None => return Err(ApiError::invalid("drillKey is required")),
    };
    let difficulty = match body.difficulty.as_deref() {
        None => Difficulty::default(),
        Some(raw) => Difficulty::parse(raw.trim())
            .ok_or_else(|| ApiError::invalid("difficulty must be Beginner, Advanced or Elite"))?,
    };
    let (state, _category) = match body.filters {
        None => (None, None),
        Some(filters) => (
            filters
                .state
                .map(|s| text("filters.state", &s))
                .transpose()?,
            filters
                .category
                .map(|c| text("filters.category", &c))
                .transpose()?,
        ),
    };
    Ok(Validated {
        drill_key,
        difficulty,
        state,
    })
}

/// Redeem a session token and start a call.
#[utoipa::path(
    post,
    path = "/roleplay/session",
    tag = "sessions",
    request_body = RedeemRequest,
    security(("sessionToken" = [])),
    responses(
        (status = 200, description = "Call started", body = LiveSession),
        (status = 400, description = "INVALID_REQUEST (token unspent); DRILL_NOT_FOUND (token spent)", body = ErrorEnvelope),
        (status = 401, description = "INVALID_TOKEN, TOKEN_EXPIRED (token unspent); TOKEN_ALREADY_USED", body = ErrorEnvelope),
        (status = 503, description = "SERVICE_UNAVAILABLE: no persona for the drill (token spent)", body = ErrorEnvelope),
    )
)]
async fn redeem_session(
    State(state): State<AppState>,
    PresentedToken(claims): PresentedToken,
    headers: HeaderMap,
    ApiJson(body): ApiJson<RedeemRequest>,
) -> Result<Json<LiveSession>, ApiError> {
    let request = validate(body)?;
    let now = state.now_ms();
    let call_id = match state
        .db
        .spend_session_token(&claims.jti, &claims.tid, &claims.sub, now)
        .await?
    {
        Spend::Spent { call_id } => call_id,
        Spend::AlreadyUsed => return Err(ApiError::TokenAlreadyUsed),
        Spend::Voided => {
            return Err(ApiError::InvalidToken(
                "the session token was voided: its tenant was deactivated or its API keys revoked"
                    .into(),
            ));
        }
        Spend::Unknown => {
            return Err(ApiError::InvalidToken(
                "the session token is not known to this service".into(),
            ));
        }
    };
    // Spent from here on: every failure below leaves it spent.
    let drill = Drill::find(&request.drill_key).ok_or(ApiError::DrillNotFound)?;
    let seed: u64 = rand::random();
    let persona = drill
        .pick_persona(request.difficulty, request.state.as_deref(), seed)
        .ok_or_else(|| {
            ApiError::ServiceUnavailable(format!(
                "no persona is available for the drill {} in v1",
                drill.key()
            ))
        })?;
    let ticket = ids::new_id("tkt_");
    let session_id = ids::session_id();
    let live = GoLive {
        call_id: call_id.clone(),
        drill_key: drill.key().to_string(),
        difficulty: request.difficulty.as_str().to_string(),
        persona_name: persona.name.to_string(),
        persona_seed: i64::try_from(seed >> 1).unwrap_or(0),
        session_id: session_id.clone(),
        ticket_hash: ticket_hash(&ticket),
        now,
    };
    if !state.db.go_live(live).await? {
        return Err(ApiError::Internal(anyhow::anyhow!(
            "call {call_id} was not waiting to go live"
        )));
    }
    crate::live::ceiling::watch_unconnected(&state, call_id.clone());
    // The live transport is reached where the API is: ws:// beside http://, wss:// beside
    // https://.
    let base = state.public_base(&headers);
    let socket_base = match base.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some((_, rest)) => format!("ws://{rest}"),
        None => format!("ws://{base}"),
    };
    Ok(Json(LiveSession {
        connection_ticket: ticket,
        connection_url: format!("{socket_base}/v1/live/{session_id}"),
        session_id,
        call_id,
        persona: PersonaName {
            name: persona.name.to_string(),
        },
    }))
}
