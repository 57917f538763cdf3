//! The typed `call.scored` event (contract section 6). The service builds webhook bodies with
//! these types and the verifier decodes into them, so the two cannot drift.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The `event` value of every v1 webhook.
pub const CALL_SCORED: &str = "call.scored";

/// The body of a `call.scored` webhook.
///
/// Unknown fields are ignored when decoding (the contract may add fields). Decode it only from
/// a verified delivery: see [`crate::VerifiedDelivery::decode`].
///
/// Non-exhaustive, so that a field the contract adds is not a breaking change: outside this
/// crate, build one with [`CallScored::scored`] (and [`CallScored::not_scored`]), then set the
/// optional fields, as a test of your own handler would:
///
/// ```
/// use svc_contract::{CallScored, CallSource, FailureReason};
///
/// let mut event = CallScored::scored(
///     "svc_call_01JH0000000000000000000000",
///     CallSource::Roleplay,
///     "svc_agent_01JH0000000000000000000000",
///     "svc_agency_01JH0000000000000000000000",
///     "2026-01-01T00:05:00.000Z",
///     "req_01JH0000000000000000000000",
/// )
/// .not_scored(FailureReason::ScoringIncomplete, "The rep never spoke.");
/// event.platform_agent_id = Some("rep-1042".into());
/// assert!(!event.success);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CallScored {
    /// Always `call.scored` in v1.
    pub event: String,
    /// True if the call was scored.
    pub success: bool,
    /// Public call id (`svc_call_…`).
    pub call_id: String,
    /// Where the call came from; an open set.
    pub source: CallSource,
    /// The service's agent id; always present.
    pub agent_id: String,
    /// The service's agency id; always present.
    pub agency_id: String,
    /// The tenant's own agent id, if one was registered.
    pub platform_agent_id: Option<String>,
    /// The tenant's own agency id, if one was registered.
    pub platform_agency_id: Option<String>,
    /// The rep label of the earlier session-token form (`externalUserId`), echoed as the tenant
    /// sent it. Present only when the token was minted with it; the key is absent otherwise.
    /// A label only: never an authorization boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
    /// The agency label of the earlier session-token form (`externalAgencyId`), echoed as the
    /// tenant sent it. Present only when the token was minted with it; the key is absent
    /// otherwise. A label only: it names no agency of the roster and is never an authorization
    /// boundary (use `agency_id` for that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_agency_id: Option<String>,
    /// When the call reached its outcome, ISO 8601 UTC.
    pub occurred_at: String,
    /// Delivery support id.
    pub request_id: String,
    /// Why the call was not scored; only when `success` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<FailureReason>,
    /// Human-readable explanation of `reason`; only when `success` is false. Log it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_message: Option<String>,
}

impl CallScored {
    /// The event of a scored call: `success` true, no reason, and the optional ids and labels
    /// unset (they are public fields).
    pub fn scored(
        call_id: impl Into<String>,
        source: CallSource,
        agent_id: impl Into<String>,
        agency_id: impl Into<String>,
        occurred_at: impl Into<String>,
        request_id: impl Into<String>,
    ) -> Self {
        Self {
            event: CALL_SCORED.to_owned(),
            success: true,
            call_id: call_id.into(),
            source,
            agent_id: agent_id.into(),
            agency_id: agency_id.into(),
            platform_agent_id: None,
            platform_agency_id: None,
            external_user_id: None,
            external_agency_id: None,
            occurred_at: occurred_at.into(),
            request_id: request_id.into(),
            reason: None,
            reason_message: None,
        }
    }

    /// The same event for a call that could not be scored: `success` false, with the reason
    /// and its message (the contract sends both only then).
    #[must_use]
    pub fn not_scored(mut self, reason: FailureReason, message: impl Into<String>) -> Self {
        self.success = false;
        self.reason = Some(reason);
        self.reason_message = Some(message.into());
        self
    }
}

/// Where a call came from. Open set: an unknown value is kept as [`CallSource::Other`].
///
/// The contract advises treating an unknown source like `roleplay` when branching.
/// Non-exhaustive: a later version may name more values, so a match needs a wildcard arm, and
/// a value matched today as `Other("…")` may move to a variant of its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallSource {
    /// A practice call with a persona (`roleplay`).
    Roleplay,
    /// A real customer call (`real_call`).
    RealCall,
    /// A value this version does not know, kept as sent.
    Other(String),
}

impl CallSource {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Roleplay => "roleplay",
            Self::RealCall => "real_call",
            Self::Other(other) => other,
        }
    }
}

impl From<&str> for CallSource {
    fn from(value: &str) -> Self {
        match value {
            "roleplay" => Self::Roleplay,
            "real_call" => Self::RealCall,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// Why a call was not scored. Open set (append-only in the contract): an unknown code is kept as
/// [`FailureReason::Other`], never rejected. Log unknown codes. Non-exhaustive, as
/// [`CallSource`] is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureReason {
    /// `SCORING_INCOMPLETE`: processing did not finish.
    ScoringIncomplete,
    /// A code this version does not know, kept as sent.
    Other(String),
}

impl FailureReason {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            Self::ScoringIncomplete => "SCORING_INCOMPLETE",
            Self::Other(other) => other,
        }
    }
}

impl From<&str> for FailureReason {
    fn from(value: &str) -> Self {
        match value {
            "SCORING_INCOMPLETE" => Self::ScoringIncomplete,
            other => Self::Other(other.to_owned()),
        }
    }
}

macro_rules! string_serde {
    ($ty:ty) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
                Ok(Self::from(text.as_ref()))
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_serde!(CallSource);
string_serde!(FailureReason);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_enums_keep_unknown_values_and_round_trip() {
        let body = r#"{"event":"call.scored","success":false,"callId":"svc_call_1",
            "source":"video_call","agentId":"a","agencyId":"g","platformAgentId":null,
            "platformAgencyId":null,"occurredAt":"2026-01-01T00:00:00Z","requestId":"r",
            "reason":"NEW_CODE","reasonMessage":"m","extra":1}"#;
        let event: CallScored = serde_json::from_str(body).expect("decodes");
        assert_eq!(event.source, CallSource::Other("video_call".into()));
        assert_eq!(event.reason, Some(FailureReason::Other("NEW_CODE".into())));
        let back = serde_json::to_value(&event).expect("encodes");
        assert_eq!(back["source"], "video_call");
        assert_eq!(back["reason"], "NEW_CODE");
        assert!(back.get("extra").is_none());
    }

    #[test]
    fn success_event_omits_reason_fields() {
        let mut event = CallScored::scored(
            "svc_call_1",
            CallSource::RealCall,
            "a",
            "g",
            "2026-01-01T00:00:00Z",
            "r",
        );
        event.platform_agent_id = Some("p".into());
        let json = serde_json::to_value(&event).expect("encodes");
        assert_eq!(json["source"], "real_call");
        assert_eq!(json["platformAgencyId"], serde_json::Value::Null);
        assert!(json.get("reason").is_none() && json.get("reasonMessage").is_none());
        let decoded: CallScored = serde_json::from_value(json).expect("decodes");
        assert_eq!(decoded, event);
    }

    #[test]
    fn a_not_scored_event_carries_its_reason_and_message() {
        let event = CallScored::scored("svc_call_1", CallSource::Roleplay, "a", "g", "t", "r")
            .not_scored(FailureReason::ScoringIncomplete, "too short");
        let json = serde_json::to_value(&event).expect("encodes");
        assert_eq!(json["event"], CALL_SCORED);
        assert_eq!(json["success"], false);
        assert_eq!(json["reason"], "SCORING_INCOMPLETE");
        assert_eq!(json["reasonMessage"], "too short");
        let decoded: CallScored = serde_json::from_value(json).expect("decodes");
        assert_eq!(decoded, event);
    }

    #[test]
    fn earlier_form_labels_decode_when_present_and_stay_absent_otherwise() {
        let base = r#""event":"call.scored","success":true,"callId":"svc_call_1",
            "source":"roleplay","agentId":"a","agencyId":"g","platformAgentId":null,
            "platformAgencyId":null,"occurredAt":"2026-01-01T00:00:00Z","requestId":"r""#;
        let labelled: CallScored = serde_json::from_str(&format!(
            r#"{{{base},"externalUserId":"u-9","externalAgencyId":"a-9"}}"#
        ))
        .expect("decodes with labels");
        assert_eq!(labelled.external_user_id.as_deref(), Some("u-9"));
        assert_eq!(labelled.external_agency_id.as_deref(), Some("a-9"));
        let back = serde_json::to_value(&labelled).expect("encodes");
        assert_eq!(back["externalUserId"], "u-9");
        assert_eq!(back["externalAgencyId"], "a-9");

        for body in [
            format!("{{{base}}}"),
            format!(r#"{{{base},"externalUserId":null,"externalAgencyId":null}}"#),
        ] {
            let plain: CallScored = serde_json::from_str(&body).expect("decodes without labels");
            assert_eq!(plain.external_user_id, None);
            assert_eq!(plain.external_agency_id, None);
            let json = serde_json::to_value(&plain).expect("encodes");
            assert!(json.get("externalUserId").is_none(), "no key, not null");
            assert!(json.get("externalAgencyId").is_none(), "no key, not null");
        }
    }
}
