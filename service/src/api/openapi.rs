//! `GET /v1/openapi.json`: the OpenAPI 3.1 description generated from the handlers and
//! types (utoipa), so it cannot drift. Each resource module has its own `OpenApi` struct;
//! [`api_doc`] merges them (later resources add theirs to the list there); [`served_doc`]
//! adds the `webhooks` section ([`super::webhook_doc`]).

use axum::routing::get;
use axum::{Json, Router};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::envelope::{
    AgentAlreadyExistsEnvelope, AgentAlreadyExistsError, ErrorEnvelope, ErrorObject,
};
use crate::error::AgentAlreadyExistsDetails;
use crate::state::AppState;

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/openapi.json", get(openapi_json))
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
    document_rate_limit(&mut doc);
    doc
}

/// Adds `429 RATE_LIMITED` to every API-key operation: off by default, answered only to a
/// tenant the operator gave a request rate limit (`tenant set-rate-limit`), with `Retry-After`.
fn document_rate_limit(doc: &mut utoipa::openapi::OpenApi) {
    let response = ResponseBuilder::new()
        .description(
            "RATE_LIMITED: over the tenant's request rate limit (only when the operator set \
             one); retry after the Retry-After header's seconds",
        )
        .header(
            "Retry-After",
            utoipa::openapi::HeaderBuilder::new()
                .schema(
                    utoipa::openapi::ObjectBuilder::new()
                        .schema_type(utoipa::openapi::schema::Type::Integer),
                )
                .description(Some("Seconds to wait"))
                .build(),
        )
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
            let with_key = operation.security.iter().flatten().any(|requirement| {
                serde_json::to_value(requirement)
                    .ok()
                    .and_then(|v| v.get("apiKey").cloned())
                    .is_some()
            });
            if with_key {
                operation
                    .responses
                    .responses
                    .entry("429".to_owned())
                    .or_insert_with(|| response.clone().into());
            }
        }
    }
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
        // "string or null" fields are always sent, as null when unset.
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

    #[test]
    fn api_key_operations_document_the_optional_rate_limit_and_redeem_does_not() {
        let doc = served_doc();
        for (path, method) in [("/agents", "get"), ("/calls", "get"), ("/session", "post")] {
            assert!(
                doc["paths"][path][method]["responses"]["429"].is_object(),
                "{method} {path}"
            );
        }
        assert!(doc["paths"]["/roleplay/session"]["post"]["responses"]["429"].is_null());
    }
}
