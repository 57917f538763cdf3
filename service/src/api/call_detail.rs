//! The body of `GET /v1/calls/{callId}`: a stored call decoded into the contract's Call detail,
//! with its transcript turns and Score. Both are open objects in the contract (section 2), so
//! they keep every key they were stored with and the document says so (`additionalProperties`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};
use utoipa::ToSchema;

use crate::db::{CallDetailRecord, CallRow};
use crate::time::format_millis;

/// The full detail of a scored call.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallDetail {
    /// Every list-row field.
    #[serde(flatten)]
    pub row: CallRow,
    /// Always `scored`.
    pub status: String,
    /// Diarized turns, in the order spoken.
    pub transcript: Vec<TranscriptTurn>,
    /// The score.
    pub score: Score,
    /// Null for practice calls.
    #[schema(required = true)]
    pub audio_url: Option<String>,
    /// Null for practice calls.
    #[schema(required = true)]
    pub audio_url_expires_at: Option<String>,
    /// Reserved; null in v1.
    #[schema(required = true, value_type = Option<Object>)]
    pub waveform: Option<Value>,
    /// Creation.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
}

/// One diarized turn of a transcript. Turns accept extra keys and are read loosely.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptTurn {
    /// Who spoke: `agent` (the rep) or `customer` on the calls this service scores.
    pub role: String,
    /// What was said.
    pub content: String,
    /// Seconds from call start (real calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = f64, required = false)]
    pub start_time: Option<Number>,
    /// Seconds from call start (real calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = f64, required = false)]
    pub end_time: Option<Number>,
    /// Keys the contract does not name, kept as stored.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The contract's Score. The object accepts additional keys: new optional keys can be added, so
/// readers must not assume the key set is closed. Numbers keep the form they were stored in
/// (practice scores are whole numbers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    /// 0–100, higher is better. On a real call 60–100, or 0 when no headline score could be
    /// produced.
    #[schema(value_type = f64, minimum = 0, maximum = 100)]
    pub overall_score: Number,
    /// Short natural-language summary.
    pub summary: String,
    /// Coaching feedback.
    pub feedback: String,
    /// 0–100. On real calls present whenever the call was assessed for compliance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = f64, required = false, minimum = 0, maximum = 100)]
    pub compliance_percent: Option<Number>,
    /// Real calls only: present only on a default-rubric health-plan enrollment call that ended
    /// in a sale (inner shape not part of the contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object, required = false)]
    pub compliance_scorecard: Option<Map<String, Value>>,
    /// Keys the contract does not name, kept as stored.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CallDetail {
    /// The detail of a stored scored call.
    ///
    /// # Errors
    /// A stored transcript or score that is not the contract's shape.
    pub fn from_record(record: CallDetailRecord) -> Result<Self, serde_json::Error> {
        let transcript = match record.transcript.as_deref() {
            Some(json) => serde_json::from_str(json)?,
            None => Vec::new(),
        };
        // A scored call always has a score; a missing one fails like a malformed one.
        let score = serde_json::from_str(record.score.as_deref().unwrap_or("null"))?;
        Ok(CallDetail {
            row: record.row,
            status: "scored".to_string(),
            transcript,
            score,
            audio_url: None,
            audio_url_expires_at: None,
            waveform: None,
            created_at: format_millis(record.created_at),
            updated_at: format_millis(record.updated_at),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Score, TranscriptTurn};

    #[test]
    fn a_stored_score_goes_back_on_the_wire_unchanged_with_its_extra_keys() {
        for stored in [
            json!({"overallScore": 82, "summary": "s", "feedback": "f", "compliancePercent": 90}),
            json!({"overallScore": 88.5, "summary": "s", "feedback": "f", "compliancePercent": 96,
                   "complianceScorecard": {"recordingDisclosure": true}, "talkRatio": 0.55}),
            json!({"overallScore": 0, "summary": "s", "feedback": "f"}),
        ] {
            let score: Score = serde_json::from_value(stored.clone()).expect("score");
            assert_eq!(serde_json::to_value(&score).expect("json"), stored);
        }
    }

    #[test]
    fn a_stored_turn_goes_back_on_the_wire_unchanged_with_its_extra_keys() {
        for stored in [
            json!({"role": "agent", "content": "Hello"}),
            json!({"role": "customer", "content": "Hi", "startTime": 2.9, "endTime": 5,
                   "speakerConfidence": 0.97}),
        ] {
            let turn: TranscriptTurn = serde_json::from_value(stored.clone()).expect("turn");
            assert_eq!(serde_json::to_value(&turn).expect("json"), stored);
        }
    }
}
