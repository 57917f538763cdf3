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
//!
//! Each field has the bound the API gives its own fields of the same kind, so that a dialer
//! file cannot store what no API request could (a record past one is invalid):
//!
//! | field | bound | like the API's |
//! |---|---|---|
//! | `dialerCallId`, `agencyId`, `platformAgencyId`, `rep.*` | at most [`MAX_TEXT_LEN`] characters, no control characters (`dialerCallId` not blank) | names and ids ([`crate::domain::text`]) |
//! | a turn's `content` | at most [`MAX_TURN_CHARS`] characters | a live utterance ([`MAX_UTTERANCE_CHARS`]) |
//! | `transcript` | at most [`MAX_TURNS`] turns and [`MAX_TRANSCRIPT_BYTES`] of content | a live call (500 rep turns and the persona's replies, 512 KiB) |
//! | a turn's `startTime`, `endTime` | 0 to [`MAX_DURATION_SECS`] seconds | `durationSec` |
//! | `startedAt` | from [`EARLIEST_START`] to [`START_AHEAD`] past the ingestion's clock | a plausible call: no dialer predates 2000, and a call cannot start in the future (a day of slack for a dialer's clock or zone mistakes) |
//!
//! Duplicate keys (at any depth) are refused when the file is read
//! ([`super::ingest::read_records`]), as the API's JSON bodies refuse them.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

pub use crate::domain::MAX_TEXT_LEN;
pub use crate::live::session::MAX_UTTERANCE_CHARS;
use crate::practice::transcript::{Role, Turn};
use crate::scoring::real_call::{Disposition, ProductLine};
use crate::time::{format_timestamp, parse_timestamp};

/// The longest call a record may describe: a day. The contract sets no bound, but a longer
/// one is a dialer's mistake, and would bill the tenant's monthly allowance at once.
pub const MAX_DURATION_SECS: i64 = 24 * 3600;
/// The longest transcript turn, in characters: a live call's longest utterance.
pub const MAX_TURN_CHARS: usize = MAX_UTTERANCE_CHARS;
/// The most turns a transcript may have: a live call's 500 rep turns and as many replies.
pub const MAX_TURNS: usize = 1_000;
/// The most bytes of turn content a transcript may have: a live call's transcript limit.
pub const MAX_TRANSCRIPT_BYTES: usize = 512 * 1024;
/// The earliest plausible start of a call (`2000-01-01T00:00:00Z`, in Unix milliseconds).
pub const EARLIEST_START: i64 = 946_684_800_000;
/// How far past the ingestion's clock a start may be (a dialer clock or zone mistake): a day.
pub const START_AHEAD: Duration = Duration::days(1);

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
    /// Reads one record ingested at `now` (the ingestion's clock, which bounds `startedAt`).
    ///
    /// # Errors
    /// What is wrong with it, in a sentence.
    pub fn parse(value: Value, now: DateTime<Utc>) -> Result<Self, String> {
        // serde quotes a mistyped value whole: the message is cut, not the value echoed.
        let raw: Raw = serde_json::from_value(value).map_err(|e| clipped(&e.to_string()))?;
        let dialer_call_id = raw.dialer_call_id.trim().to_owned();
        if dialer_call_id.is_empty() {
            return Err("dialerCallId must not be empty".into());
        }
        bounded("dialerCallId", &dialer_call_id)?;
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
        let latest = (now + START_AHEAD).timestamp_millis();
        if !(EARLIEST_START..=latest).contains(&started_at) {
            return Err(format!(
                "startedAt must be between {} and {} (a day past the ingestion's clock; got {})",
                format_timestamp(
                    DateTime::from_timestamp_millis(EARLIEST_START).unwrap_or_default()
                ),
                format_timestamp(now + START_AHEAD),
                raw.started_at.trim()
            ));
        }
        let trimmed = |id: Option<String>| {
            id.map(|id| id.trim().to_owned())
                .filter(|id| !id.is_empty())
        };
        let (agency_id, platform_agency_id) =
            (trimmed(raw.agency_id), trimmed(raw.platform_agency_id));
        for (field, value) in [
            ("agencyId", &agency_id),
            ("platformAgencyId", &platform_agency_id),
        ] {
            if let Some(value) = value {
                bounded(field, value)?;
            }
        }
        for (field, value) in [
            ("rep.npn", &raw.rep.npn),
            ("rep.agentId", &raw.rep.agent_id),
            ("rep.email", &raw.rep.email),
            ("rep.name", &raw.rep.name),
        ] {
            if let Some(value) = value {
                bounded(field, value.trim())?;
            }
        }
        if let Some(turns) = &raw.transcript {
            check_transcript(turns)?;
        }
        let agency = match (agency_id, platform_agency_id) {
            (Some(id), None) => AgencyName::Id(id),
            (None, Some(id)) => AgencyName::Platform(id),
            (None, None) => return Err("agencyId is required".into()),
            (Some(_), Some(_)) => {
                return Err("name the agency by agencyId or platformAgencyId, not both".into());
            }
        };
        let disposition = Disposition::parse(&raw.disposition).ok_or_else(|| {
            format!(
                "disposition must be one of {} (got {})",
                Disposition::NAMES.join(", "),
                clipped(&format!("{:?}", raw.disposition))
            )
        })?;
        let product_line = ProductLine::parse(&raw.product_line).ok_or_else(|| {
            format!(
                "productLine must be one of {} (got {})",
                ProductLine::NAMES.join(", "),
                clipped(&format!("{:?}", raw.product_line))
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

/// The first key that appears twice in one object of a JSON value, anywhere in it, as a path
/// (`rep.name`, `transcript[2].role`); read from the text, since a [`Value`] keeps only the
/// last of two equal keys. The API's bodies refuse a duplicate field (serde refuses one when
/// it reads a body into its type); a dialer record, read as a [`Value`], is checked here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DuplicateKey(Option<String>);

impl DuplicateKey {
    /// The path of the first key found twice, if any.
    pub fn path(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// `record` when no key appears twice in it, else why it is invalid.
    ///
    /// # Errors
    /// The duplicate key's path, in a sentence.
    pub fn refuse(self, record: Value) -> Result<Value, String> {
        match self.0 {
            None => Ok(record),
            Some(path) => Err(format!(
                "duplicate field `{path}`: a key may appear only once in an object"
            )),
        }
    }

    /// The first duplicate of a child reached by `step` (`.key` or `[i]`).
    fn under(step: String, child: DuplicateKey) -> Option<String> {
        child.0.map(|path| {
            if path.starts_with('[') {
                format!("{step}{path}")
            } else {
                format!("{step}.{path}")
            }
        })
    }
}

impl<'de> Deserialize<'de> for DuplicateKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DuplicateKeyVisitor)
    }
}

struct DuplicateKeyVisitor;

impl<'de> serde::de::Visitor<'de> for DuplicateKeyVisitor {
    type Value = DuplicateKey;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<DuplicateKey, E> {
        Ok(DuplicateKey::default())
    }

    fn visit_i64<E>(self, _: i64) -> Result<DuplicateKey, E> {
        Ok(DuplicateKey::default())
    }

    fn visit_u64<E>(self, _: u64) -> Result<DuplicateKey, E> {
        Ok(DuplicateKey::default())
    }

    fn visit_f64<E>(self, _: f64) -> Result<DuplicateKey, E> {
        Ok(DuplicateKey::default())
    }

    fn visit_str<E>(self, _: &str) -> Result<DuplicateKey, E> {
        Ok(DuplicateKey::default())
    }

    fn visit_unit<E>(self) -> Result<DuplicateKey, E> {
        Ok(DuplicateKey::default())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<DuplicateKey, A::Error> {
        let mut found = None;
        let mut index = 0;
        while let Some(element) = seq.next_element::<DuplicateKey>()? {
            if found.is_none() {
                found = DuplicateKey::under(format!("[{index}]"), element);
            }
            index += 1;
        }
        Ok(DuplicateKey(found))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<DuplicateKey, A::Error> {
        let mut seen = std::collections::HashSet::new();
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value::<DuplicateKey>()?;
            if found.is_some() {
                continue;
            }
            if seen.contains(&key) {
                found = Some(key);
            } else {
                found = DuplicateKey::under(key.clone(), value);
                seen.insert(key);
            }
        }
        Ok(DuplicateKey(found))
    }
}

/// `text` cut to [`MAX_TEXT_LEN`] characters (with `…`), so that an error message never
/// echoes a huge value of the record.
fn clipped(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT_LEN) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A name or id within the API's text bounds: at most [`MAX_TEXT_LEN`] characters, no control
/// characters.
fn bounded(field: &str, value: &str) -> Result<(), String> {
    if value.chars().any(char::is_control) {
        return Err(format!("{field} must not contain control characters"));
    }
    let chars = value.chars().count();
    if chars > MAX_TEXT_LEN {
        return Err(format!(
            "{field} must be at most {MAX_TEXT_LEN} characters (got {chars})"
        ));
    }
    Ok(())
}

/// A transcript within a live call's bounds: [`MAX_TURNS`] turns, each at most
/// [`MAX_TURN_CHARS`] characters, [`MAX_TRANSCRIPT_BYTES`] in all, and times within a day.
fn check_transcript(turns: &[DialerTurn]) -> Result<(), String> {
    if turns.len() > MAX_TURNS {
        return Err(format!(
            "transcript must have at most {MAX_TURNS} turns (got {})",
            turns.len()
        ));
    }
    let mut bytes = 0;
    for (i, turn) in turns.iter().enumerate() {
        let chars = turn.content.chars().count();
        if chars > MAX_TURN_CHARS {
            return Err(format!(
                "transcript[{i}].content must be at most {MAX_TURN_CHARS} characters (got {chars})"
            ));
        }
        bytes += turn.content.len();
        for (name, time) in [("startTime", &turn.start_time), ("endTime", &turn.end_time)] {
            let seconds = time.as_ref().and_then(Number::as_f64);
            if time.is_some()
                && !seconds.is_some_and(|s| (0.0..=MAX_DURATION_SECS as f64).contains(&s))
            {
                return Err(format!(
                    "transcript[{i}].{name} must be between 0 and {MAX_DURATION_SECS} seconds"
                ));
            }
        }
    }
    if bytes > MAX_TRANSCRIPT_BYTES {
        return Err(format!(
            "transcript content must be at most {MAX_TRANSCRIPT_BYTES} bytes (512 KiB; got {bytes})"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// When the unit tests ingest: a few days after the template's call.
    fn now() -> DateTime<Utc> {
        parse_timestamp("2026-11-26T12:00:00Z").expect("a time")
    }

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
        let parsed = DialerRecord::parse(record(), now()).expect("valid");
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
            let error = DialerRecord::parse(bad, now()).expect_err(key);
            assert!(error.contains(says), "{key}: {error}");
        }
        let mut missing = record();
        missing.as_object_mut().expect("object").remove("agencyId");
        assert!(DialerRecord::parse(missing.clone(), now()).is_err());
        missing["platformAgencyId"] = json!("agency-1");
        let by_platform = DialerRecord::parse(missing.clone(), now()).expect("by the tenant's id");
        assert_eq!(by_platform.agency, AgencyName::Platform("agency-1".into()));
        missing["agencyId"] = json!("svc_agency_1");
        assert!(DialerRecord::parse(missing, now()).is_err(), "both");
    }

    #[test]
    fn each_field_has_the_bound_the_api_gives_its_own() {
        let turn = |content: String| json!([{"role": "agent", "content": content}]);
        let many = |n: usize| {
            Value::Array(
                (0..n)
                    .map(|_| json!({"role": "customer", "content": "Hm."}))
                    .collect(),
            )
        };
        let long = "x".repeat(MAX_TEXT_LEN + 1);
        let cases = [
            (
                "dialerCallId",
                json!("d".repeat(100_000)),
                "dialerCallId must be at most 256 characters",
            ),
            (
                "dialerCallId",
                json!("d-1\u{1b}]0;owned\u{7}"),
                "dialerCallId must not contain control",
            ),
            ("agencyId", json!(long), "agencyId must be at most 256"),
            ("rep", json!({"name": long}), "rep.name must be at most 256"),
            (
                "rep",
                json!({"email": long}),
                "rep.email must be at most 256",
            ),
            ("rep", json!({"npn": long}), "rep.npn must be at most 256"),
            (
                "rep",
                json!({"agentId": "a\u{0}b"}),
                "rep.agentId must not contain control",
            ),
            (
                "transcript",
                turn("y".repeat(2_000_000)),
                "transcript[0].content must be at most 4000 characters",
            ),
            ("transcript", many(MAX_TURNS + 1), "at most 1000 turns"),
            (
                "transcript",
                Value::Array(
                    (0..200)
                        .map(|_| json!({"role": "agent", "content": "z".repeat(3_000)}))
                        .collect(),
                ),
                "at most 524288 bytes",
            ),
            (
                "transcript",
                json!([{"role": "agent", "content": "Hi", "startTime": -1}]),
                "transcript[0].startTime must be between 0 and 86400",
            ),
            (
                "transcript",
                json!([{"role": "agent", "content": "Hi", "endTime": 1e300}]),
                "transcript[0].endTime must be between 0 and 86400",
            ),
            (
                "startedAt",
                json!("0001-01-01T00:00:00Z"),
                "startedAt must be between 2000-01-01T00:00:00.000Z and 2026-11-27T12:00:00.000Z",
            ),
            (
                "startedAt",
                json!("9999-12-31T23:59:59Z"),
                "startedAt must be between",
            ),
            (
                "startedAt",
                json!("1999-12-31T23:59:59.999Z"),
                "startedAt must be between",
            ),
            (
                "startedAt",
                json!("2026-11-27T12:00:00.001Z"),
                "startedAt must be between",
            ),
        ];
        for (key, value, says) in cases {
            let mut bad = record();
            bad[key] = value;
            let error = DialerRecord::parse(bad, now()).expect_err(says);
            assert!(error.contains(says), "{says}: {error}");
        }
        // At each bound, and a blank rep field (absent) still reads.
        let at_bounds = [
            ("dialerCallId", json!("d".repeat(MAX_TEXT_LEN))),
            (
                "rep",
                json!({"name": "é".repeat(MAX_TEXT_LEN), "email": ""}),
            ),
            ("transcript", turn("é".repeat(MAX_TURN_CHARS))),
            ("transcript", many(MAX_TURNS)),
            (
                "transcript",
                json!([{"role": "agent", "content": "Hi", "startTime": 0, "endTime": 86_400}]),
            ),
            ("startedAt", json!("2000-01-01T00:00:00Z")),
            ("startedAt", json!("2026-11-27T12:00:00Z")),
        ];
        for (key, value) in at_bounds {
            let mut ok = record();
            ok[key] = value;
            let parsed = DialerRecord::parse(ok, now());
            assert!(parsed.is_ok(), "{key}: {parsed:?}");
        }
    }

    #[test]
    fn an_error_never_echoes_a_huge_value() {
        for (key, value) in [
            ("disposition", json!("s".repeat(100_000))),
            ("productLine", json!("p".repeat(100_000))),
            ("durationSec", json!("9".repeat(100_000))),
        ] {
            let mut bad = record();
            bad[key] = value;
            let error = DialerRecord::parse(bad, now()).expect_err(key);
            assert!(
                error.chars().count() < 2 * MAX_TEXT_LEN,
                "{key}: {} chars",
                error.len()
            );
            assert!(
                error.contains(key) || error.contains("invalid type"),
                "{key}: {error}"
            );
        }
    }

    #[test]
    fn a_duplicate_key_is_found_at_any_depth_and_named_by_its_path() {
        let find = |text: &str| {
            serde_json::from_str::<DuplicateKey>(text)
                .expect("JSON")
                .path()
                .map(str::to_owned)
        };
        assert_eq!(find(r#"{"a": 1, "b": [1, {"c": 2}], "d": null}"#), None);
        assert_eq!(find(r#"{"a": 1, "a": 2}"#).as_deref(), Some("a"));
        assert_eq!(
            find(r#"{"rep": {"name": "A", "name": "B"}}"#).as_deref(),
            Some("rep.name")
        );
        assert_eq!(
            find(r#"{"transcript": [{"role": "agent"}, {"role": "agent", "role": "customer"}]}"#)
                .as_deref(),
            Some("transcript[1].role")
        );
        assert_eq!(
            find(r#"[[{}, {"x": 1, "x": 1}]]"#).as_deref(),
            Some("[0][1].x")
        );
        // The first one, in document order.
        assert_eq!(
            find(r#"{"a": {"b": 1, "b": 2}, "a": 3}"#).as_deref(),
            Some("a.b")
        );
        let error = DuplicateKey(Some("rep.name".into()))
            .refuse(json!({}))
            .expect_err("refused");
        assert!(error.contains("duplicate field `rep.name`"), "{error}");
    }
}
