//! A listed call whose detail fails (404, a body that is not JSON) is recorded, not fatal: the
//! window completes, the watermark moves, the run exits 1 and the next run reads it again. A key
//! revoked in the middle of a run stops it (exit 4) with the watermark where it was.

use rusqlite::OptionalExtension;
use serde_json::json;
use svc_fixtures::calls::{DetailFault, ROLEPLAY};

use super::{
    assert_stored_as_served, db, fake, mins_ago, number, report, secs_ago, sorted, source_report,
    stored_details, watermark,
};

/// The recorded failure of a call: HTTP status and attempts.
fn failure(store: &std::path::Path, id: &str) -> Option<(Option<i64>, i64)> {
    db(store)
        .query_row(
            "SELECT http_status, attempts FROM call_failures WHERE call_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .expect("call_failures")
}

/// Runs the scenario of a listed call whose detail fails with `fault`, then heals it.
async fn a_failing_detail_is_recorded_and_read_by_the_next_run(
    fault: DetailFault,
    status: Option<i64>,
    error_mentions: &str,
) {
    let fake = fake().await;
    let ids = fake
        .calls
        .add_many(ROLEPLAY, (1..=5).map(|n| mins_ago(10 * n)));
    let broken = ids[2].clone();
    fake.calls.fail_detail(&broken, fault);
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 1, "a call could not be stored: {run:?}");
    let out = report(&run);
    assert_eq!(out["totals"]["failed"], json!(1));
    assert_eq!(out["totals"]["new"], json!(4));
    let failed = out["failedCalls"].as_array().expect("failedCalls");
    assert_eq!(failed.len(), 1, "{out}");
    assert_eq!(failed[0]["callId"], json!(broken));
    assert!(
        failed[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains(error_mentions)),
        "{out}"
    );
    let part = source_report(&out, ROLEPLAY);
    assert_eq!(part["completed"], json!(true), "the window still completes");
    let mark = watermark(&fake.store, ROLEPLAY).expect("the watermark moved");
    assert_eq!(part["watermark"], json!(mark));
    assert_eq!(failure(&fake.store, &broken), Some((status, 1)));
    let stored = assert_stored_as_served(&fake);
    assert_eq!(stored.len(), 4);
    assert!(!stored.contains_key(&broken));

    fake.calls.heal_detail(&broken);
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(fake.calls.requests(&format!("/v1/calls/{broken}")), 2);
    let stored: Vec<String> = assert_stored_as_served(&fake).into_keys().collect();
    assert_eq!(stored, sorted(&ids));
    assert_eq!(failure(&fake.store, &broken), None, "resolved");
}

#[tokio::test]
async fn a_listed_call_that_404s_is_recorded_the_window_completes_and_the_next_run_stores_it() {
    a_failing_detail_is_recorded_and_read_by_the_next_run(
        DetailFault::NotFound,
        Some(404),
        "CALL_NOT_FOUND",
    )
    .await;
}

#[tokio::test]
async fn a_detail_that_is_not_json_is_recorded_and_read_by_the_next_run() {
    a_failing_detail_is_recorded_and_read_by_the_next_run(
        DetailFault::NotJson,
        None,
        "call detail",
    )
    .await;
}

/// A 404 on a listed call is recorded, not fatal, and read again by later runs (up to 5): a
/// call that failed before and is listed again must not be read, counted and charged an
/// attempt twice in one run (once as a retried failure, once from the listing).
#[tokio::test]
async fn a_call_still_failing_is_read_and_counted_once_per_run() {
    let fake = fake().await;
    let ids = fake
        .calls
        .add_many(ROLEPLAY, (1..=3).map(|n| mins_ago(10 * n)));
    fake.calls.fail_detail(&ids[0], DetailFault::NotFound);
    assert_eq!(fake.reconcile(&["--source", "roleplay"]).await.code, 1);
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    let out = report(&run);
    assert_eq!(out["totals"]["failed"], json!(1), "one call failed: {out}");
    assert_eq!(
        out["failedCalls"].as_array().map(Vec::len),
        Some(1),
        "{out}"
    );
    assert_eq!(
        fake.calls.requests(&format!("/v1/calls/{}", ids[0])),
        2,
        "read once per run"
    );
    assert_eq!(failure(&fake.store, &ids[0]), Some((Some(404), 2)));
}

#[tokio::test]
async fn a_key_revoked_mid_run_exits_4_keeps_what_was_stored_and_leaves_the_watermark() {
    let fake = fake().await;
    fake.calls
        .add_many(ROLEPLAY, (1..=10).map(|n| mins_ago(200 + n)));
    assert_eq!(fake.reconcile(&["--source", "roleplay"]).await.code, 0);
    let mark = watermark(&fake.store, ROLEPLAY).expect("watermark");
    // Within the overlap before the watermark, so the next runs list them.
    fake.calls
        .add_many(ROLEPLAY, (1..=150).map(|n| secs_ago(30 * n)));
    fake.calls.revoke_key_after(20);
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 4, "{run:?}");
    let out = report(&run);
    assert_eq!(out["outcome"], json!("failed"));
    assert!(
        out["error"]
            .as_str()
            .is_some_and(|e| e.contains("API_KEY_REVOKED")),
        "{out}"
    );
    assert_eq!(watermark(&fake.store, ROLEPLAY), Some(mark.clone()));
    let kept = assert_stored_as_served(&fake).len();
    assert!(
        (11..160).contains(&kept),
        "the details read before the key was revoked stay stored: {kept}"
    );
    assert_eq!(
        number(&fake.store, "SELECT COUNT(*) FROM call_failures"),
        0,
        "a refused key is not a failure of the calls"
    );

    fake.calls.restore_key();
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(stored_details(&fake.store).len(), 160);
    assert_ne!(watermark(&fake.store, ROLEPLAY), Some(mark));
}

/// A detail over the client's 16 MiB body limit is that call's failure, not
/// the run's: recorded, the window completes, and the next run reads it again (stopping the run
/// on it would stop every later run at the same call).
#[tokio::test]
async fn a_detail_over_the_body_limit_is_recorded_and_the_window_completes() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, ResponseTemplate};

    let fake = fake().await;
    let ids = fake
        .calls
        .add_many(ROLEPLAY, (1..=3).map(|n| mins_ago(10 * n)));
    let broken = ids[1].clone();
    let too_large = vec![b' '; svc_client::MAX_BODY_BYTES + 1];
    Mock::given(method("GET"))
        .and(path(format!("/v1/calls/{broken}")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(too_large, "application/json"))
        .with_priority(1)
        .up_to_n_times(1)
        .mount(&fake.server)
        .await;
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 1, "a call could not be stored: {run:?}");
    let out = report(&run);
    assert_eq!(out["outcome"], json!("ok"), "{out}");
    assert_eq!(out["totals"]["failed"], json!(1), "{out}");
    assert_eq!(out["failedCalls"][0]["callId"], json!(broken));
    assert!(
        out["failedCalls"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("16 MiB")),
        "{out}"
    );
    assert_eq!(source_report(&out, ROLEPLAY)["completed"], json!(true));
    assert_eq!(failure(&fake.store, &broken), Some((None, 1)));

    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(failure(&fake.store, &broken), None, "resolved");
    assert_eq!(stored_details(&fake.store).len(), 3);
}
