//! Storing calls: new, unchanged, changed (with the change logged), and failed ones retried.

use super::*;

#[test]
fn a_call_is_stored_once_then_unchanged_then_changed_with_its_change_logged() {
    on_each_backend(
        "a_call_is_stored_once_then_unchanged_then_changed_with_its_change_logged",
        |store| {
            let first = detail_json("svc_call_1", "real_call", "2026-03-01T10:05:00.000Z", 70.0);
            let stored = store
                .store_calls(&[(Some(row(&first)), detail(&first))], &writer(0, None))
                .expect("store");
            assert_eq!(stored, [Stored::New(Arrival::Backfill)]);
            assert_eq!(
                store.call_detail("svc_call_1").expect("read").as_deref(),
                Some(detail(&first).json.as_str()),
                "the detail is kept as the service sent it"
            );

            let again = store
                .store_calls(&[(None, detail(&first))], &writer(0, None))
                .expect("store");
            assert_eq!(again, [Stored::Unchanged]);

            let moved = detail_json("svc_call_1", "real_call", "2026-03-05T09:00:00.000Z", 85.0);
            let changed = store
                .store_calls(&[(Some(row(&moved)), detail(&moved))], &writer(0, None))
                .expect("store");
            assert_eq!(changed, [Stored::Changed]);
            let logged = texts(
                store,
                "SELECT before_json, after_json FROM score_changes WHERE call_id = 'svc_call_1'",
            );
            let (before, after) = (logged[0].clone(), logged[1].clone());
            let (before, after): (Value, Value) = (
                serde_json::from_str(&before).expect("json"),
                serde_json::from_str(&after).expect("json"),
            );
            assert_eq!(before["score"]["overallScore"], json!(70.0));
            assert_eq!(after["score"]["overallScore"], json!(85.0));
            assert_eq!(after["scoredAt"], json!("2026-03-05T09:00:00.000Z"));
            assert_eq!(
                before["score"]["newKey"],
                json!([1, 2]),
                "unknown score keys are kept"
            );

            // A detail read before the stored one (a late webhook worker's) does not bring the
            // older version back.
            let stale = store
                .store_calls(&[(None, detail(&first))], &writer(0, None))
                .expect("store");
            assert_eq!(stale, [Stored::Unchanged]);
            assert_eq!(
                store.call_detail("svc_call_1").expect("read").as_deref(),
                Some(detail(&moved).json.as_str()),
                "the newer version stays"
            );
            assert_eq!(
                texts(store, "SELECT CAST(COUNT(*) AS TEXT) FROM score_changes"),
                ["1"],
                "no change logged"
            );
        },
    );
}

#[test]
fn a_failed_call_is_retried_until_it_is_stored_or_has_failed_too_often() {
    on_each_backend(
        "a_failed_call_is_retried_until_it_is_stored_or_has_failed_too_often",
        |store| {
            let call = detail_json("svc_call_x", "real_call", "2026-03-01T10:05:00.000Z", 70.0);
            let listed = row(&call);
            for run in 1..=2 {
                store
                    .record_failure(&listed, "CALL_NOT_FOUND (HTTP 404)", Some(404), run, "now")
                    .expect("record");
            }
            let retry = store
                .failures_to_retry(&CallSource::RealCall, 5, 3)
                .expect("retry");
            assert_eq!(retry.len(), 1);
            assert_eq!(retry[0].json, listed.json, "the row is kept as listed");
            assert!(
                store
                    .failures_to_retry(&CallSource::RealCall, 5, 2)
                    .expect("retry")
                    .is_empty(),
                "the run that recorded the failure does not read the call again"
            );
            assert!(
                store
                    .failures_to_retry(&CallSource::RealCall, 2, 3)
                    .expect("retry")
                    .is_empty()
            );
            store
                .store_calls(&[(Some(listed), detail(&call))], &writer(0, None))
                .expect("store");
            assert!(
                store
                    .failures_to_retry(&CallSource::RealCall, 5, 3)
                    .expect("retry")
                    .is_empty(),
                "storing the call resolves its failure"
            );
        },
    );
}
