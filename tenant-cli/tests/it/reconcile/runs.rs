//! Plain runs: a first run stores every listed call with its detail as served, a rerun reads
//! nothing again, the report's keys, the table on a pipe, dry runs, bounded detail reads.

use std::time::Duration;

use serde_json::{Value, json};
use svc_fixtures::calls::{REAL_CALL, ROLEPLAY};

use super::{
    assert_stored_as_served, days_ago, db, fake, hours_ago, mins_ago, number, report, sorted,
    source_report, stored_details, watermark,
};

#[tokio::test]
async fn a_first_run_stores_every_listed_call_once_with_its_detail_exactly_as_served() {
    let fake = fake().await;
    let mut ids = fake
        .calls
        .add_many(ROLEPLAY, [hours_ago(3), hours_ago(2), hours_ago(1)]);
    ids.extend(fake.calls.add_many(REAL_CALL, [days_ago(5), days_ago(2)]));
    let run = fake.reconcile(&[]).await;
    assert_eq!(run.code, 0, "nothing missed, nothing changed: {run:?}");
    let out = report(&run);
    assert_eq!(out["totals"]["new"], json!(5));
    assert_eq!(out["totals"]["detailsFetched"], json!(5));
    assert_eq!(
        out["totals"]["recovered"],
        json!(0),
        "no webhook was ever received: history, not missed deliveries"
    );
    assert_eq!(out["totals"]["backfilled"], json!(5));
    let stored = assert_stored_as_served(&fake);
    assert_eq!(stored.keys().cloned().collect::<Vec<_>>(), sorted(&ids));
    for id in &ids {
        assert_eq!(
            fake.calls.requests(&format!("/v1/calls/{id}")),
            1,
            "{id} is read once"
        );
    }
    for source in [ROLEPLAY, REAL_CALL] {
        let part = source_report(&out, source);
        assert_eq!(part["firstRun"], json!(true));
        assert_eq!(part["completed"], json!(true));
        let mark = watermark(&fake.store, source).expect("a watermark once the window is stored");
        assert_eq!(part["watermark"], json!(mark));
        assert_eq!(part["to"], json!(mark), "the watermark is the window's end");
    }
}

#[tokio::test]
async fn a_rerun_reads_no_detail_again_and_exits_0() {
    let fake = fake().await;
    // All within the overlap before the watermark, so the rerun lists them all again.
    fake.calls
        .add_many(ROLEPLAY, [mins_ago(90), mins_ago(50), mins_ago(10)]);
    fake.calls.add(REAL_CALL, days_ago(1));
    assert_eq!(fake.reconcile(&[]).await.code, 0);
    let details = fake.calls.detail_requests();
    assert_eq!(details, 4);
    let before = stored_details(&fake.store);
    let run = fake.reconcile(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        fake.calls.detail_requests(),
        details,
        "no detail read again"
    );
    let out = report(&run);
    assert_eq!(out["totals"]["new"], json!(0));
    assert_eq!(out["totals"]["known"], json!(4));
    assert_eq!(out["totals"]["detailsFetched"], json!(0));
    assert_eq!(stored_details(&fake.store), before);
}

#[tokio::test]
async fn the_json_report_has_the_documented_keys_and_is_kept_in_the_runs_table() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, hours_ago(1));
    let run = fake.reconcile(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let out = report(&run);
    let keys: Vec<&str> = out
        .as_object()
        .expect("one object")
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "runId",
        "dryRun",
        "startedAt",
        "finishedAt",
        "durationMs",
        "outcome",
        "error",
        "exitCode",
        "requests",
        "requestBoundMs",
        "sources",
        "totals",
        "recoveredCallIds",
        "changedCallIds",
        "failedCalls",
    ] {
        assert!(keys.contains(&key), "report key {key} in {keys:?}");
    }
    for key in [
        "pages",
        "listed",
        "new",
        "known",
        "recovered",
        "backfilled",
        "moved",
        "changedSilently",
        "failed",
        "detailsFetched",
    ] {
        assert!(out["totals"].get(key).is_some(), "count {key} in {out}");
    }
    assert_eq!(out["outcome"], json!("ok"));
    assert_eq!(out["exitCode"], json!(0));
    assert_eq!(
        out["requests"],
        json!(3),
        "one page of each source and one detail"
    );
    let stored: String = db(&fake.store)
        .query_row(
            "SELECT report FROM runs WHERE id = ?1",
            [out["runId"].as_i64().expect("a run id")],
            |r| r.get(0),
        )
        .expect("the run's row");
    let stored: Value = serde_json::from_str(&stored).expect("the stored report is JSON");
    assert_eq!(stored, out, "the runs table keeps the report printed");
}

#[tokio::test]
async fn a_run_on_a_pipe_prints_the_table_and_no_progress_bar() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, hours_ago(1));
    let store = fake.store.to_str().expect("utf-8 path");
    let run = fake
        .sandbox
        .run(&["reconcile", "--store", store, "--retry-base-ms", "1"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    for column in [
        "source",
        "listed",
        "new",
        "recovered",
        "changed",
        "watermark",
    ] {
        assert!(
            run.stdout.contains(column),
            "column {column}: {}",
            run.stdout
        );
    }
    assert!(
        !run.stderr.contains('\r') && !run.stderr.contains('\u{1b}'),
        "no spinner or escape codes on a pipe: {:?}",
        run.stderr
    );
}

#[tokio::test]
async fn a_dry_run_reads_no_detail_and_writes_nothing() {
    let fake = fake().await;
    fake.calls
        .add_many(ROLEPLAY, [hours_ago(3), hours_ago(2), hours_ago(1)]);
    let run = fake.reconcile(&["--dry-run"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let out = report(&run);
    assert_eq!(out["dryRun"], json!(true));
    assert_eq!(out["runId"], json!(null));
    assert_eq!(out["totals"]["new"], json!(3), "what a run would store");
    assert_eq!(fake.calls.detail_requests(), 0);
    assert!(!fake.store.exists(), "no store is created by a dry run");

    assert_eq!(fake.reconcile(&[]).await.code, 0);
    let mark = watermark(&fake.store, ROLEPLAY);
    let runs = number(&fake.store, "SELECT COUNT(*) FROM runs");
    let details = fake.calls.detail_requests();
    fake.calls.add_many(ROLEPLAY, [mins_ago(30), mins_ago(20)]);
    let run = fake.reconcile(&["--dry-run"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(report(&run)["totals"]["new"], json!(2));
    assert_eq!(fake.calls.detail_requests(), details, "no detail read");
    assert_eq!(stored_details(&fake.store).len(), 3, "no call stored");
    assert_eq!(number(&fake.store, "SELECT COUNT(*) FROM runs"), runs);
    assert_eq!(
        watermark(&fake.store, ROLEPLAY),
        mark,
        "watermark unchanged"
    );
}

/// Runs a reconcile of `calls` practice calls whose details each take 300 ms with `flags`,
/// and returns the most detail requests that were in flight at once.
async fn details_in_flight(calls: i64, flags: &[&str]) -> usize {
    let fake = fake().await;
    let ids = fake
        .calls
        .add_many(ROLEPLAY, (1..=calls).map(|n| mins_ago(2 * n)));
    fake.calls.delay_details(Some(Duration::from_millis(300)));
    let mut all = vec!["--source", "roleplay"];
    all.extend_from_slice(flags);
    let run = fake.reconcile(&all).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(stored_details(&fake.store).len(), ids.len());
    let arrivals: Vec<_> = fake
        .calls
        .seen()
        .into_iter()
        .filter(|s| s.path.starts_with("/v1/calls/"))
        .map(|s| s.at)
        .collect();
    // Each detail is answered 300 ms after it arrives, so the requests arriving within 250 ms
    // of one another were all in flight at once.
    arrivals
        .iter()
        .map(|first| {
            arrivals
                .iter()
                .filter(|a| **a >= *first && a.duration_since(*first) < Duration::from_millis(250))
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn details_are_read_at_most_concurrency_at_a_time() {
    let most = details_in_flight(12, &["--concurrency", "3"]).await;
    assert!(most <= 3, "{most} details in flight at once");
}

#[tokio::test]
async fn details_are_read_at_most_8_at_a_time_by_default() {
    let most = details_in_flight(24, &[]).await;
    assert!(most <= 8, "{most} details in flight at once");
}
