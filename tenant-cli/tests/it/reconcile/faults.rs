//! A failing or misbehaving service: 429 with `Retry-After`, 500s, a connection reset in the
//! middle of a listing, slow pages, a service still failing after the retries, a cursor handed
//! back twice, calls shifting between pages.

use std::time::{Duration, Instant};

use serde_json::json;
use svc_fixtures::calls::ROLEPLAY;
use svc_fixtures::faults;
use wiremock::ResponseTemplate;

use super::{
    assert_stored_as_served, fake, mins_ago, report, secs_ago, sorted, source_report,
    stored_details, watermark,
};

#[tokio::test]
async fn a_429_with_retry_after_is_waited_out_and_the_run_completes() {
    let fake = fake().await;
    let ids = fake
        .calls
        .add_many(ROLEPLAY, [mins_ago(40), mins_ago(50), mins_ago(60)]);
    faults::rate_limited(&fake.server)
        .route("GET", "/calls")
        .retry_after(1)
        .times(1)
        .mount()
        .await;
    let started = Instant::now();
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 is honoured (the backoff alone is 1 ms)"
    );
    assert_eq!(
        report(&run)["requests"],
        json!(5),
        "the 429, the page again, three details"
    );
    let stored: Vec<String> = assert_stored_as_served(&fake).into_keys().collect();
    assert_eq!(stored, sorted(&ids));
}

#[tokio::test]
async fn a_500_on_a_page_or_a_detail_is_retried_and_the_run_completes() {
    let fake = fake().await;
    let ids = fake
        .calls
        .add_many(ROLEPLAY, [mins_ago(40), mins_ago(50), mins_ago(60)]);
    faults::error(&fake.server, "INTERNAL_ERROR")
        .route("GET", "/calls")
        .times(2)
        .mount()
        .await;
    let detail = format!("/calls/{}", ids[1]);
    faults::error(&fake.server, "INTERNAL_ERROR")
        .route("GET", &detail)
        .times(1)
        .mount()
        .await;
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let out = report(&run);
    assert_eq!(
        out["requests"],
        json!(7),
        "two 500s, one page, a 500, three details"
    );
    assert_eq!(out["totals"]["failed"], json!(0));
    let stored: Vec<String> = assert_stored_as_served(&fake).into_keys().collect();
    assert_eq!(stored, sorted(&ids));
}

#[tokio::test]
async fn a_service_still_failing_after_the_retries_exits_75_and_leaves_the_watermark() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, mins_ago(90));
    assert_eq!(fake.reconcile(&["--source", "roleplay"]).await.code, 0);
    let mark = watermark(&fake.store, ROLEPLAY);
    fake.calls.add(ROLEPLAY, mins_ago(10));
    faults::error(&fake.server, "INTERNAL_ERROR")
        .route("GET", "/calls")
        .times(100)
        .mount()
        .await;
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 75, "temporary: run again later: {run:?}");
    let out = report(&run);
    assert_eq!(out["outcome"], json!("failed"));
    assert!(
        out["error"]
            .as_str()
            .is_some_and(|e| e.contains("INTERNAL_ERROR")),
        "{out}"
    );
    assert_eq!(source_report(&out, ROLEPLAY)["completed"], json!(false));
    assert_eq!(watermark(&fake.store, ROLEPLAY), mark);
    assert_eq!(stored_details(&fake.store).len(), 1);
}

#[tokio::test]
async fn a_connection_reset_in_the_middle_of_a_listing_is_retried() {
    let fake = fake().await;
    let ids = fake.calls.add_many(ROLEPLAY, (1..=150).map(mins_ago));
    faults::connection_reset(&fake.server)
        .route("GET", "/calls")
        .page(2)
        .times(1)
        .mount()
        .await;
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(source_report(&report(&run), ROLEPLAY)["pages"], json!(2));
    assert_eq!(fake.calls.list_requests().len(), 2);
    let stored: Vec<String> = stored_details(&fake.store).into_keys().collect();
    assert_eq!(stored, sorted(&ids));
}

#[tokio::test]
async fn a_page_slower_than_the_timeout_is_asked_again() {
    let fake = fake().await;
    let ids = fake.calls.add_many(ROLEPLAY, [mins_ago(20), mins_ago(30)]);
    let late = ResponseTemplate::new(500);
    faults::slow(&fake.server, Duration::from_secs(3))
        .route("GET", "/calls")
        .respond_with(late)
        .times(1)
        .mount()
        .await;
    let run = fake
        .reconcile(&["--source", "roleplay", "--timeout", "1"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let stored: Vec<String> = stored_details(&fake.store).into_keys().collect();
    assert_eq!(stored, sorted(&ids));
}

#[tokio::test]
async fn a_slow_page_only_slows_the_run() {
    let fake = fake().await;
    let ids = fake.calls.add_many(ROLEPLAY, (1..=150).map(mins_ago));
    fake.calls
        .delay_list_after(1, Some(Duration::from_millis(1500)));
    let started = Instant::now();
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(started.elapsed() >= Duration::from_millis(1500));
    let stored: Vec<String> = stored_details(&fake.store).into_keys().collect();
    assert_eq!(stored, sorted(&ids));
}

#[tokio::test]
async fn a_cursor_handed_back_twice_stops_the_run_instead_of_looping() {
    let fake = fake().await;
    fake.calls
        .add_many(ROLEPLAY, (1..=150).map(|n| secs_ago(30 * n)));
    assert_eq!(fake.reconcile(&["--source", "roleplay"]).await.code, 0);
    let mark = watermark(&fake.store, ROLEPLAY).expect("watermark");
    let before = fake.calls.list_requests().len();
    fake.calls.hand_back_cursors(true);
    let started = Instant::now();
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "it did not loop"
    );
    assert!(run.code != 0 && run.code != 3, "the run failed: {run:?}");
    assert_eq!(
        fake.calls.list_requests().len() - before,
        2,
        "the first page, and the page that handed its cursor back"
    );
    let out = report(&run);
    assert_eq!(out["outcome"], json!("failed"));
    assert!(
        out["error"].as_str().is_some_and(|e| e.contains("cursor")),
        "{out}"
    );
    assert_eq!(source_report(&out, ROLEPLAY)["completed"], json!(false));
    assert_eq!(watermark(&fake.store, ROLEPLAY), Some(mark));
}

#[tokio::test]
async fn calls_shifting_between_pages_are_each_stored_once_and_the_newcomer_by_the_next_run() {
    let fake = fake().await;
    let ids = fake
        .calls
        .add_many(ROLEPLAY, (1..=150).map(|n| mins_ago(2 * n)));
    // Scored between the first and the second page request, newer than every listed call:
    // the second page starts with the first page's last row.
    let newcomer = fake.calls.add_after_list_requests(1, ROLEPLAY, mins_ago(1));
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let out = report(&run);
    assert_eq!(out["totals"]["listed"], json!(150), "distinct calls listed");
    assert_eq!(out["totals"]["new"], json!(150));
    assert_eq!(fake.calls.detail_requests(), 150, "no detail read twice");
    for id in &ids {
        assert_eq!(fake.calls.requests(&format!("/v1/calls/{id}")), 1, "{id}");
    }
    let stored: Vec<String> = assert_stored_as_served(&fake).into_keys().collect();
    assert_eq!(stored, sorted(&ids));

    let rerun = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(rerun.code, 0, "{rerun:?}");
    assert_eq!(report(&rerun)["totals"]["new"], json!(1));
    let mut all = ids.clone();
    all.push(newcomer);
    let stored: Vec<String> = assert_stored_as_served(&fake).into_keys().collect();
    assert_eq!(stored, sorted(&all));
}
