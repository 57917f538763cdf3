//! Silent changes: a real call re-dispositioned (new score, `scoredAt` and `updatedAt`, no
//! webhook) is found by listing real calls back `--refresh-real`, read again alone, logged in
//! the change log, and the run exits 3.

use serde_json::{Value, json};
use svc_fixtures::calls::{REAL_CALL, ROLEPLAY};

use super::{days_ago, db, fake, hours_ago, minus, number, report, source_report, watermark};

#[tokio::test]
async fn a_redispositioned_real_call_is_read_again_alone_and_logged_as_a_silent_change() {
    let fake = fake().await;
    let recent = fake.calls.add(REAL_CALL, days_ago(3));
    let changed = fake.calls.add(REAL_CALL, days_ago(10));
    let practice = fake.calls.add(ROLEPLAY, hours_ago(1));
    assert_eq!(fake.reconcile(&[]).await.code, 0);
    let scored_at = fake
        .calls
        .redisposition(&changed, 61.0)
        .expect("a known call");

    let run = fake.reconcile(&[]).await;
    assert_eq!(run.code, 3, "a silent change is worth an alert: {run:?}");
    let out = report(&run);
    assert_eq!(out["totals"]["changedSilently"], json!(1));
    assert_eq!(out["changedCallIds"], json!([changed]));
    assert_eq!(source_report(&out, REAL_CALL)["moved"], json!(1));
    assert_eq!(out["totals"]["detailsFetched"], json!(1));
    let reads = |id: &str| fake.calls.requests(&format!("/v1/calls/{id}"));
    assert_eq!(reads(&changed), 2, "the moved call is read again");
    assert_eq!(reads(&recent), 1, "an unchanged real call is not");
    assert_eq!(reads(&practice), 1);

    let (call_id, run_id, before, after): (String, i64, String, String) = db(&fake.store)
        .query_row(
            "SELECT call_id, run_id, before_json, after_json FROM score_changes",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .expect("one change logged");
    assert_eq!(call_id, changed);
    assert_eq!(json!(run_id), out["runId"]);
    let before: Value = serde_json::from_str(&before).expect("JSON");
    let after: Value = serde_json::from_str(&after).expect("JSON");
    assert_eq!(before["score"]["overallScore"], json!(88));
    assert_eq!(after["score"]["overallScore"], json!(61.0));
    assert_eq!(after["scoredAt"], json!(scored_at));
    assert_eq!(after["updatedAt"], json!(scored_at));
    let (detail, score): (String, f64) = db(&fake.store)
        .query_row(
            "SELECT detail_json, overall_score FROM calls WHERE id = ?1",
            [&changed],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the call");
    assert_eq!(Some(detail), fake.calls.detail_text(&changed));
    assert!((score - 61.0).abs() < f64::EPSILON);

    let rerun = fake.reconcile(&[]).await;
    assert_eq!(rerun.code, 0, "found once: {rerun:?}");
    assert_eq!(report(&rerun)["totals"]["changedSilently"], json!(0));
    assert_eq!(number(&fake.store, "SELECT COUNT(*) FROM score_changes"), 1);
}

#[tokio::test]
async fn refresh_real_0_does_not_list_real_calls_back_30_days() {
    let fake = fake().await;
    let changed = fake.calls.add(REAL_CALL, days_ago(10));
    assert_eq!(fake.reconcile(&["--source", "real_call"]).await.code, 0);
    let mark = watermark(&fake.store, REAL_CALL).expect("watermark");
    fake.calls.redisposition(&changed, 70.0);

    let run = fake
        .reconcile(&["--source", "real_call", "--refresh-real", "0"])
        .await;
    assert_eq!(run.code, 0, "the changed call is not listed: {run:?}");
    let last = fake.calls.list_requests().pop().expect("listed");
    assert_eq!(
        last.param("from"),
        Some(minus(&mark, chrono::Duration::hours(24)).as_str()),
        "only the overlap before the watermark"
    );
    assert_eq!(report(&run)["totals"]["changedSilently"], json!(0));
    assert_eq!(fake.calls.requests(&format!("/v1/calls/{changed}")), 1);

    let run = fake.reconcile(&["--source", "real_call"]).await;
    assert_eq!(run.code, 3, "the default 30 days find it: {run:?}");
    let last = fake.calls.list_requests().pop().expect("listed");
    let to = last.param("to").expect("to");
    assert_eq!(
        last.param("from"),
        Some(minus(to, chrono::Duration::days(30)).as_str())
    );
    assert_eq!(report(&run)["changedCallIds"], json!([changed]));
}

/// A real call's `call.scored` goes out when it is first scored; a re-disposition moves its
/// `scoredAt` but sends nothing. A call first scored before the ledger opened is history,
/// even when it was re-dispositioned after.
#[tokio::test]
async fn a_call_scored_before_the_ledger_and_re_dispositioned_after_is_backfilled() {
    use svc_contract::CallSource;
    let fake = fake().await;
    let call = fake.calls.add(REAL_CALL, days_ago(10));
    // The ledger opens (webhook serve's first delivery) two days ago.
    super::record_webhook(
        &fake.store,
        "svc_call_other",
        CallSource::RealCall,
        days_ago(2),
    );
    fake.calls.redisposition(&call, 61.0).expect("a known call");
    let run = fake
        .reconcile(&["--source", "real_call", "--delivery-grace", "0s"])
        .await;
    assert_eq!(
        super::deliveries(&fake.store)[&call],
        "backfill",
        "its webhook was sent before the ledger opened: {}",
        report(&run)
    );
    assert_eq!(run.code, 0, "{}", report(&run));
}
