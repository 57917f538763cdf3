//! Timestamps on the wire: `YYYY-MM-DDTHH:MM:SS.sssZ` in UTC, and the integer
//! milliseconds the database stores.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::{Serialize, Serializer};

/// Formats a time as the contract's `YYYY-MM-DDTHH:MM:SS.sssZ`.
pub fn format_timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Formats stored Unix milliseconds as the contract's timestamp.
pub fn format_millis(millis: i64) -> String {
    format_timestamp(from_millis(millis))
}

/// Serialises optional stored milliseconds as the contract's timestamp, or `null` (for
/// `#[serde(serialize_with)]` on a stored row that goes on the wire as it is).
///
/// # Errors
/// The serializer's.
pub fn serialize_opt_millis<S: Serializer>(
    millis: &Option<i64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    millis.map(format_millis).serialize(serializer)
}

/// Converts stored Unix milliseconds to a time (out-of-range values clamp to the epoch).
pub fn from_millis(millis: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(millis)
        .single()
        .unwrap_or(DateTime::UNIX_EPOCH)
}

/// Parses an ISO 8601 / RFC 3339 timestamp with an offset into UTC.
pub fn parse_timestamp(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|at| at.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_have_millisecond_precision_and_a_z_suffix() {
        let at = from_millis(1_767_225_600_123);
        assert_eq!(format_timestamp(at), "2026-01-01T00:00:00.123Z");
        assert_eq!(format_millis(1_767_225_600_000), "2026-01-01T00:00:00.000Z");
    }

    #[test]
    fn parsing_accepts_offsets_and_normalises_to_utc() {
        let at = parse_timestamp("2026-01-01T01:00:00+01:00");
        assert_eq!(
            at.map(format_timestamp).as_deref(),
            Some("2026-01-01T00:00:00.000Z")
        );
        assert!(parse_timestamp("yesterday").is_none());
    }
}
