//! `GET /v1/openapi.json`: the OpenAPI 3.1 description generated from the handlers and
//! types (utoipa), so it cannot drift. Each resource module has its own `OpenApi` struct;
//! [`api_doc`] merges them (later resources add theirs to the list there); [`served_doc`]
//! adds the `webhooks` section ([`super::webhook_doc`]).

use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi, ToSchema};

use crate::error::AgentAlreadyExistsDetails;
use crate::state::AppState;

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/openapi.json", get(openapi_json))
}

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

#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "Roleplay and Call-Scoring Service",
        version = "1",
        description = "v1 API. Every response carries X-Service-Request-Id; errors use the envelope."
    ),
    servers((url = "/v1")),
    components(schemas(
        ErrorEnvelope,
        ErrorObject,
        AgentAlreadyExistsEnvelope,
        AgentAlreadyExistsError,
        AgentAlreadyExistsDetails,
        crate::api::webhook_doc::CallScoredEvent
    )),
    modifiers(&BearerSchemes)
)]
struct BaseApi;

#[derive(Debug)]
struct BearerSchemes;

impl Modify for BearerSchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "apiKey",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("API key `svc_live_…`"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "sessionToken",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some("Session token from POST /session"))
                    .build(),
            ),
        );
    }
}

/// The whole API description.
pub fn api_doc() -> utoipa::openapi::OpenApi {
    let mut doc = BaseApi::openapi();
    doc.merge(super::agencies::AgenciesApi::openapi());
    doc.merge(super::agents::AgentsApi::openapi());
    doc.merge(super::session::SessionApi::openapi());
    doc.merge(super::roleplay::RoleplayApi::openapi());
    doc.merge(super::calls::CallsApi::openapi());
    doc.merge(super::audio::AudioApi::openapi());
    document_internal_error(&mut doc);
    doc
}

/// Adds `500 INTERNAL_ERROR` to every operation: the contract lets every endpoint return it, so
/// it is documented here once instead of on each handler.
fn document_internal_error(doc: &mut utoipa::openapi::OpenApi) {
    let response = ResponseBuilder::new()
        .description("INTERNAL_ERROR: unexpected; retry")
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorEnvelope")))
                .build(),
        )
        .build();
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            operation
                .responses
                .responses
                .entry("500".to_owned())
                .or_insert_with(|| response.clone().into());
        }
    }
}

/// The document as served: [`api_doc`] with the `webhooks` section utoipa does not write.
pub fn served_doc() -> serde_json::Value {
    let mut doc = serde_json::to_value(api_doc()).unwrap_or_default();
    if let Some(map) = doc.as_object_mut() {
        map.insert("webhooks".to_owned(), super::webhook_doc::webhooks());
    }
    doc
}

async fn openapi_json() -> Json<serde_json::Value> {
    Json(served_doc())
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::served_doc;

    /// The `required` list of a component schema, following the `allOf` utoipa writes for a
    /// flattened struct.
    fn required(doc: &Value, schema: &str) -> Vec<String> {
        let schema = &doc["components"]["schemas"][schema];
        let mut names: Vec<String> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        for part in schema["allOf"].as_array().into_iter().flatten() {
            let part = match part["$ref"].as_str() {
                Some(target) => {
                    let name = target.rsplit('/').next().unwrap_or_default();
                    required(doc, name)
                }
                None => part["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
            };
            names.extend(part);
        }
        names
    }

    #[test]
    fn the_contracts_always_present_nullable_fields_are_required() {
        // Issue 12, item 14: "string or null" fields are always sent, as null when unset.
        let doc = served_doc();
        for (schema, fields) in [
            ("Agent", &["email", "npn", "platformAgentId"][..]),
            ("AgentList", &["nextCursor"][..]),
            (
                "CallListRow",
                &[
                    "platformAgentId",
                    "platformAgencyId",
                    "externalUserId",
                    "externalAgencyId",
                    "drillKey",
                    "startedAt",
                    "endedAt",
                    "scoredAt",
                ][..],
            ),
            ("CallList", &["nextCursor"][..]),
            (
                "CallDetail",
                &["audioUrl", "audioUrlExpiresAt", "waveform", "scoredAt"][..],
            ),
            (
                "CallScoredEvent",
                &["platformAgentId", "platformAgencyId"][..],
            ),
        ] {
            let required = required(&doc, schema);
            for field in fields {
                assert!(
                    required.iter().any(|r| r == field),
                    "{schema}.{field} is not required: {required:?}"
                );
            }
        }
    }

    #[test]
    fn the_document_describes_the_call_scored_webhook_and_the_audio_link() {
        let doc = served_doc();
        assert_eq!(
            doc["webhooks"]["call.scored"]["post"]["requestBody"]["content"]["application/json"]["schema"]
                ["$ref"],
            "#/components/schemas/CallScoredEvent"
        );
        assert!(doc["paths"]["/audio/{callId}"]["get"].is_object());
    }
}
