//! The dialer record, as the operator ingests it (documented in `service/README.md`):
//!
//! ```text
//! { "dialerCallId": "d-10442", "agencyId": "svc_agency_…",
//!   "rep": { "npn": "…", "agentId": "…", "email": "…", "name": "Ada Lovelace" },
//!   "startedAt": "2026-11-20T15:04:05.000Z", "durationSec": 312,
//!   "recording": "relative/or/absolute/path.wav" | null,
//!   "transcript": [ { "role": "agent"|"customer", "content": "…", "startTime": 0.0, "endTime": 3.2 } ] | null,
//!   "disposition": "sale" | "no_sale" | "callback" | "not_interested",
//!   "productLine": "health_plan_enrollment" | "other" }
//! ```
//!
//! Instead of `agencyId`, a record may name its agency by the tenant's `platformAgencyId` (this
//! service's extension, so that a fixture file works against any database); exactly one of the
//! two. Unknown keys are ignored; a record that does not read, or has a negative duration or
//! one longer than [`MAX_DURATION_SECS`], is invalid (reported, nothing stored).

use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

use crate::practice::transcript::{Role, Turn};
use crate::scoring::real_call::{Disposition, ProductLine};
use crate::time::parse_timestamp;

/// The longest call a record may describe: a day. The contract sets no bound, but a longer
/// one is a dialer's mistake, and would bill the tenant's monthly allowance at once.
pub const MAX_DURATION_SECS: i64 = 24 * 3600;

/// Who the dialer says made the call; any field may be absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rep {
    /// National Producer Number (compared by its digits).
    #[serde(default)]
    pub npn: Option<String>,
    /// The dialer's agent id (the tenant's `platformAgentId`, unless a third-party dialer).
    #[serde(default)]
    pub agent_id: Option<String>,
    /// Email.
    #[serde(default)]
    pub email: Option<String>,
    /// Full name.
    #[serde(default)]
    pub name: Option<String>,
}

/// One transcript turn as stored and read back (`startTime`/`endTime` in seconds from the
/// call's start, kept as sent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DialerTurn {
    /// `agent` (the rep) or `customer`.
    pub role: Role,
    /// What was said.
    pub content: String,
    /// Seconds from the call's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Number>,
    /// Seconds from the call's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Number>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    dialer_call_id: String,
    #[serde(default)]
    agency_id: Option<String>,
    #[serde(default)]
    platform_agency_id: Option<String>,
    #[serde(default)]
    rep: Rep,
    started_at: String,
    duration_sec: i64,
    #[serde(default)]
    recording: Option<String>,
    #[serde(default)]
    transcript: Option<Vec<DialerTurn>>,
    disposition: String,
    product_line: String,
}

/// How a record names the agency its dialer connection belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AgencyName {
    /// The service agency id (`agencyId`).
    Id(String),
    /// The tenant's id for the agency (`platformAgencyId`).
    Platform(String),
}

impl std::fmt::Display for AgencyName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgencyName::Id(id) => write!(f, "agencyId {id:?}"),
            AgencyName::Platform(id) => write!(f, "platformAgencyId {id:?}"),
        }
    }
}

/// A dialer record that reads.
#[derive(Debug, Clone, PartialEq)]
pub struct DialerRecord {
    /// The dialer's id for the call, unique per agency.
    pub dialer_call_id: String,
    /// The agency the dialer connection belongs to.
    pub agency: AgencyName,
    /// Who made the call.
    pub rep: Rep,
    /// Start (ms).
    pub started_at: i64,
    /// Whole seconds, not negative.
    pub duration_sec: i64,
    /// Where the recording is (relative paths are read from the ingest file's directory).
    pub recording: Option<String>,
    /// The turns, when a transcript was produced.
    pub transcript: Option<Vec<DialerTurn>>,
    /// How it ended.
    pub disposition: Disposition,
    /// What it sold.
    pub product_line: ProductLine,
}

impl DialerRecord {
    /// Reads one record.
    ///
    /// # Errors
    /// What is wrong with it, in a sentence.
    pub fn parse(value: Value) -> Result<Self, String> {
        let raw: Raw = serde_json::from_value(value).map_err(|e| e.to_string())?;
        let dialer_call_id = raw.dialer_call_id.trim().to_owned();
        if dialer_call_id.is_empty() {
            return Err("dialerCallId must not be empty".into());
        }
        let started_at = parse_timestamp(raw.started_at.trim())
            .ok_or("startedAt must be an ISO 8601 date-time with an offset")?
            .timestamp_millis();
        if raw.duration_sec < 0 {
            return Err(format!(
                "durationSec must not be negative (got {})",
                raw.duration_sec
            ));
        }
        if raw.duration_sec > MAX_DURATION_SECS {
            return Err(format!(
                "durationSec must be at most {MAX_DURATION_SECS} (a day; got {})",
                raw.duration_sec
            ));
        }
        let trimmed = |id: Option<String>| {
            id.map(|id| id.trim().to_owned())
                .filter(|id| !id.is_empty())
        };
        let agency = match (trimmed(raw.agency_id), trimmed(raw.platform_agency_id)) {
            (Some(id), None) => AgencyName::Id(id),
            (None, Some(id)) => AgencyName::Platform(id),
            (None, None) => return Err("agencyId is required".into()),
            (Some(_), Some(_)) => {
                return Err("name the agency by agencyId or platformAgencyId, not both".into());
            }
        };
        let disposition = Disposition::parse(&raw.disposition).ok_or_else(|| {
            format!(
                "disposition must be one of {} (got {:?})",
                Disposition::NAMES.join(", "),
                raw.disposition
            )
        })?;
        let product_line = ProductLine::parse(&raw.product_line).ok_or_else(|| {
            format!(
                "productLine must be one of {} (got {:?})",
                ProductLine::NAMES.join(", "),
                raw.product_line
            )
        })?;
        Ok(Self {
            dialer_call_id,
            agency,
            rep: raw.rep,
            started_at,
            duration_sec: raw.duration_sec,
            recording: raw.recording.filter(|path| !path.trim().is_empty()),
            transcript: raw.transcript,
            disposition,
            product_line,
        })
    }

    /// The turns as the rubric reads them.
    pub fn turns(&self) -> Vec<Turn> {
        self.transcript
            .iter()
            .flatten()
            .map(|t| Turn {
                role: t.role,
                content: t.content.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record() -> Value {
        json!({
            "dialerCallId": " d-1 ", "agencyId": "svc_agency_1",
            "rep": {"name": "Ada Lovelace"}, "startedAt": "2026-11-20T15:04:05.000Z",
            "durationSec": 312, "recording": "a.wav",
            "transcript": [{"role": "agent", "content": "Hi", "startTime": 0.0, "endTime": 1.5}],
            "disposition": "sale", "productLine": "other", "dialerNotes": "ignored"
        })
    }

    #[test]
    fn a_record_reads_with_unknown_keys_ignored() {
        let parsed = DialerRecord::parse(record()).expect("valid");
        assert_eq!(parsed.dialer_call_id, "d-1");
        assert_eq!(parsed.duration_sec, 312);
        assert_eq!(parsed.disposition, Disposition::Sale);
        let turns = parsed.transcript.expect("turns");
        assert_eq!(
            serde_json::to_value(&turns).expect("json"),
            json!([{"role": "agent", "content": "Hi", "startTime": 0.0, "endTime": 1.5}])
        );
    }

    #[test]
    fn bad_records_say_what_is_wrong() {
        for (key, value, says) in [
            ("durationSec", json!(-1), "negative"),
            ("durationSec", json!(86_401), "at most 86400"),
            ("durationSec", json!(i64::MAX), "at most 86400"),
            ("startedAt", json!("yesterday"), "startedAt"),
            ("disposition", json!("maybe"), "disposition"),
            ("productLine", json!("cars"), "productLine"),
            ("dialerCallId", json!("  "), "dialerCallId"),
            (
                "transcript",
                json!([{"role": "robot", "content": "x"}]),
                "robot",
            ),
        ] {
            let mut bad = record();
            bad[key] = value;
            let error = DialerRecord::parse(bad).expect_err(key);
            assert!(error.contains(says), "{key}: {error}");
        }
        let mut missing = record();
        missing.as_object_mut().expect("object").remove("agencyId");
        assert!(DialerRecord::parse(missing.clone()).is_err());
        missing["platformAgencyId"] = json!("agency-1");
        let by_platform = DialerRecord::parse(missing.clone()).expect("by the tenant's id");
        assert_eq!(by_platform.agency, AgencyName::Platform("agency-1".into()));
        missing["agencyId"] = json!("svc_agency_1");
        assert!(DialerRecord::parse(missing).is_err(), "both");
    }
}
