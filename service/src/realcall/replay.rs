//! Replaying a dialer file whose dates are past: each record's `startedAt` moved into the
//! last hours, so that a fixture file (the sandbox's `dialer-records.jsonl`, a tenant's own
//! test file) ingests as recent calls whenever it is run, within reconcile's windows and the
//! 30-day recording retention. `svc-cli demo` ingests its records so, and `calls ingest-real
//! --relative-to-now` (`svc-cli sandbox ingest-real --relative-to-now`) on request.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::time::format_millis;

/// The newest record starts this long before now plus one [`SPACING`] (so that a call of a
/// few minutes has ended by now).
const NEWEST_AGO: Duration = Duration::minutes(10);
/// The gap between two records' starts, at most.
const SPACING: Duration = Duration::minutes(5);
/// The span every record's start falls in, at most: a long file's starts are closer together.
const SPAN: Duration = Duration::hours(24);

/// Moves the `startedAt` of each record that has one to the last hours before `now`, in file
/// order, `SPACING` apart (closer for a file of more than 288 records, so that all start in
/// the last day), the last one starting 15 minutes before `now`. Records that did not parse,
/// are not objects or have no `startedAt` are left as they are (and stay invalid).
pub fn relative_to_now(records: &mut [Result<Value, String>], now: DateTime<Utc>) {
    let count = i32::try_from(records.len()).unwrap_or(i32::MAX).max(1);
    let spacing = SPACING.min(SPAN / count);
    for (n, record) in (0_i32..).zip(records.iter_mut()) {
        let Ok(Value::Object(record)) = record else {
            continue;
        };
        let Some(started_at) = record.get_mut("startedAt") else {
            continue;
        };
        let before = spacing * (count - n) + NEWEST_AGO;
        let start = now.checked_sub_signed(before).unwrap_or(now);
        *started_at = Value::from(format_millis(start.timestamp_millis()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn started(record: &Result<Value, String>) -> Option<&str> {
        record.as_ref().ok()?.get("startedAt")?.as_str()
    }

    #[test]
    fn records_move_to_the_last_hour_in_file_order_five_minutes_apart() {
        let now = DateTime::parse_from_rfc3339("2027-03-01T12:00:00Z")
            .expect("time")
            .with_timezone(&Utc);
        let mut records = vec![
            Ok(json!({"dialerCallId": "a", "startedAt": "2026-11-20T15:04:05.000Z"})),
            Err("line 2 is not JSON".to_owned()),
            Ok(json!({"dialerCallId": "c"})),
            Ok(json!({"dialerCallId": "d", "startedAt": "2026-11-22T09:00:00.000Z"})),
        ];
        relative_to_now(&mut records, now);
        assert_eq!(started(&records[0]), Some("2027-03-01T11:30:00.000Z"));
        assert_eq!(records[1], Err("line 2 is not JSON".to_owned()));
        assert_eq!(started(&records[2]), None, "no startedAt: still invalid");
        assert_eq!(started(&records[3]), Some("2027-03-01T11:45:00.000Z"));
    }

    #[test]
    fn a_long_file_starts_within_the_last_day() {
        let now = Utc::now();
        let mut records: Vec<Result<Value, String>> = (0..1_000)
            .map(|n| Ok(json!({"dialerCallId": n, "startedAt": "2020-01-01T00:00:00Z"})))
            .collect();
        relative_to_now(&mut records, now);
        let first = started(&records[0])
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .expect("a time");
        // To the millisecond the times are written with.
        let slack = Duration::milliseconds(1);
        assert!(now - first.with_timezone(&Utc) <= SPAN + NEWEST_AGO + slack);
    }
}
