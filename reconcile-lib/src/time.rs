//! Times and durations as the command line and the store write them: the contract's timestamp
//! form (`YYYY-MM-DDTHH:MM:SS.sssZ`, UTC), unix milliseconds for indexed columns, and durations
//! such as `30m`, `48h` or `7d`.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

/// Formats `at` the way the contract writes timestamps: UTC with milliseconds.
pub fn format_ts(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Reads an ISO 8601 / RFC 3339 timestamp (any offset), as UTC.
pub fn parse_ts(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text.trim())
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Unix milliseconds of a timestamp text, when it is one.
pub fn ms(text: Option<&str>) -> Option<i64> {
    text.and_then(parse_ts).map(|t| t.timestamp_millis())
}

/// Parses a duration: a whole number followed by `s`, `m`, `h` or `d` (`90s`, `30m`, `48h`,
/// `7d`); `0` alone is zero.
///
/// # Errors
/// A message saying what form is expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = || format!("{text:?} is not a duration such as 90s, 30m, 48h or 7d");
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let split = text.len().checked_sub(1).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let unit_secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    number
        .checked_mul(unit_secs)
        .filter(|secs| *secs <= 100 * 365 * 86_400)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is longer than a hundred years"))
}

/// Writes a duration back in the largest unit that divides it (`48h`, `7d`, `90s`).
pub fn format_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0 => "0".into(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// `at` moved back by `by`, saturating at the earliest representable time.
pub fn before(at: DateTime<Utc>, by: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(by)
        .ok()
        .and_then(|by| at.checked_sub_signed(by))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_seconds_minutes_hours_and_days() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1_800)));
        assert_eq!(parse_duration("48h"), Ok(Duration::from_secs(172_800)));
        assert_eq!(format_duration(Duration::from_secs(172_800)), "2d");
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for bad in ["", "m", "30", "-5m", "1.5h", "3w", "99999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn durations_print_in_the_largest_whole_unit() {
        for text in ["90s", "30m", "36h", "7d", "0"] {
            let parsed = parse_duration(text).expect("parses");
            assert_eq!(format_duration(parsed), text);
        }
    }

    #[test]
    fn timestamps_print_in_the_contract_form() {
        let at = parse_ts("2026-01-15T10:00:00+02:00").expect("parses");
        assert_eq!(format_ts(at), "2026-01-15T08:00:00.000Z");
        assert_eq!(ms(Some("1970-01-01T00:00:01.5Z")), Some(1_500));
        assert_eq!(ms(Some("yesterday")), None);
    }
}
