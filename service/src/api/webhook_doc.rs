//! The `call.scored` webhook (contract section 6) in the OpenAPI document: the body's schema
//! (documentation types; the body itself is built with `svc_contract::CallScored`, and the
//! end-to-end conformance test checks the service's real deliveries against this schema) and
//! the `webhooks` section, which utoipa does not write, added to the served document here.

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::api::calls::CallSource;

/// The body of a `call.scored` delivery, both outcomes: `reason` and `reasonMessage` appear
/// only when `success` is false. It never holds a score or transcript: read them with
/// `GET /calls/{callId}`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallScoredEvent {
    /// Always `call.scored` in v1.
    #[schema(pattern = "^call\\.scored$")]
    pub event: String,
    /// True if the call was scored.
    pub success: bool,
    /// Public call id.
    pub call_id: String,
    /// Where the call came from.
    #[schema(inline)]
    pub source: CallSource,
    /// Service agent id.
    pub agent_id: String,
    /// Service agency id.
    pub agency_id: String,
    /// The agent's tenant id; null if never registered (and possibly on a failure).
    #[schema(required = true)]
    pub platform_agent_id: Option<String>,
    /// The agency's tenant id; null if never registered.
    #[schema(required = true)]
    pub platform_agency_id: Option<String>,
    /// The earlier mint form's rep label; present only when the call has one.
    #[schema(required = false)]
    pub external_user_id: Option<String>,
    /// The earlier mint form's agency label; present only when the call has one.
    #[schema(required = false)]
    pub external_agency_id: Option<String>,
    /// When the call reached its outcome (ISO 8601 UTC).
    #[schema(format = DateTime)]
    pub occurred_at: String,
    /// Delivery support id (`req_…`).
    pub request_id: String,
    /// Only when `success` is false: `SCORING_INCOMPLETE` today; the list is append-only, so
    /// log unknown codes instead of rejecting them.
    #[schema(required = false)]
    pub reason: Option<String>,
    /// Only when `success` is false: human-readable; log it.
    #[schema(required = false)]
    pub reason_message: Option<String>,
}

/// The `webhooks` section of the document.
pub fn webhooks() -> Value {
    json!({
        "call.scored": {
            "post": {
                "summary": "A call reached its outcome (scored or not)",
                "description": "Sent once per call, for both sources, to the tenant's HTTPS endpoint. \
                    Headers: `X-Service-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<raw body>\" keyed with the signing secret>` \
                    and `X-Service-Webhook-Id` (the same on the single retry; the idempotency key). \
                    Answer 2xx within 10 seconds; a failed delivery is retried once after about 5 minutes, \
                    then the tenant reconciles with GET /calls.",
                "parameters": [
                    {"name": "X-Service-Signature", "in": "header", "required": true,
                     "schema": {"type": "string", "pattern": "^t=[0-9]+,v1=[0-9a-f]{64}$"}},
                    {"name": "X-Service-Webhook-Id", "in": "header", "required": true,
                     "schema": {"type": "string", "pattern": "^wh_"}}
                ],
                "requestBody": {
                    "required": true,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CallScoredEvent"}}}
                },
                "responses": {
                    "200": {"description": "Received (any 2xx)"}
                }
            }
        }
    })
}
