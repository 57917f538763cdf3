//! What each run lists: from the watermark minus the overlap up to the run's start, `--since`
//! and `--until`, a first run's 30 days, `limit=100` on every page, cursors followed to the end.

use serde_json::json;
use svc_fixtures::calls::{REAL_CALL, ROLEPLAY};

use super::{
    days_ago, fake, hours_ago, mins_ago, minus, report, sorted, source_report, stored_details, ts,
    watermark,
};

/// The `GET /calls` requests of one source, in order.
fn list_requests_of(
    calls: &svc_fixtures::calls::Calls,
    source: &str,
) -> Vec<svc_fixtures::calls::Seen> {
    calls
        .list_requests()
        .into_iter()
        .filter(|s| s.param("source") == Some(source))
        .collect()
}

#[tokio::test]
async fn the_second_run_lists_from_the_watermark_minus_the_overlap_up_to_the_run_start() {
    let fake = fake().await;
    fake.calls.add_many(ROLEPLAY, [hours_ago(5), hours_ago(1)]);
    assert_eq!(fake.reconcile(&["--source", "roleplay"]).await.code, 0);
    let mark = watermark(&fake.store, ROLEPLAY).expect("watermark");
    let before_second = svc_reconcile::time::format_ts(chrono::Utc::now());
    let run = fake
        .reconcile(&["--source", "roleplay", "--overlap", "30m"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let second = list_requests_of(&fake.calls, ROLEPLAY)
        .pop()
        .expect("a list request");
    let from = minus(&mark, chrono::Duration::minutes(30));
    assert_eq!(second.param("from"), Some(from.as_str()));
    let to = second.param("to").expect("a `to` bound").to_owned();
    assert!(
        to >= before_second,
        "the window ends at the run's start: {to}"
    );
    let part = source_report(&report(&run), ROLEPLAY);
    assert_eq!(part["from"], json!(from));
    assert_eq!(part["to"], json!(to));
    assert_eq!(part["firstRun"], json!(false));
    assert_eq!(
        watermark(&fake.store, ROLEPLAY),
        Some(to),
        "the watermark moves to the end of the window"
    );
}

#[tokio::test]
async fn the_default_overlaps_are_two_hours_for_practice_calls_and_a_day_for_real_calls() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, hours_ago(1));
    fake.calls.add(REAL_CALL, days_ago(1));
    assert_eq!(fake.reconcile(&["--refresh-real", "0"]).await.code, 0);
    let marks = [ROLEPLAY, REAL_CALL].map(|s| watermark(&fake.store, s).expect("watermark"));
    let run = fake.reconcile(&["--refresh-real", "0"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let roleplay = list_requests_of(&fake.calls, ROLEPLAY)
        .pop()
        .expect("listed");
    let real = list_requests_of(&fake.calls, REAL_CALL)
        .pop()
        .expect("listed");
    assert_eq!(
        roleplay.param("from"),
        Some(minus(&marks[0], chrono::Duration::hours(2)).as_str())
    );
    assert_eq!(
        real.param("from"),
        Some(minus(&marks[1], chrono::Duration::hours(24)).as_str())
    );
}

#[tokio::test]
async fn a_first_run_lists_the_last_30_days() {
    let fake = fake().await;
    let old = fake.calls.add(ROLEPLAY, days_ago(31));
    let recent = fake.calls.add(ROLEPLAY, days_ago(29));
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let first = list_requests_of(&fake.calls, ROLEPLAY)
        .pop()
        .expect("listed");
    let to = first.param("to").expect("to");
    assert_eq!(
        first.param("from"),
        Some(minus(to, chrono::Duration::days(30)).as_str())
    );
    let stored = stored_details(&fake.store);
    assert!(stored.contains_key(&recent));
    assert!(
        !stored.contains_key(&old),
        "older than 30 days: pass --since"
    );
}

#[tokio::test]
async fn every_page_is_asked_with_limit_100_and_next_cursor_is_followed_to_the_end() {
    let fake = fake().await;
    let ids = fake
        .calls
        .add_many(ROLEPLAY, (1..=250).map(|n| mins_ago(2 * n)));
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let pages = list_requests_of(&fake.calls, ROLEPLAY);
    assert_eq!(pages.len(), 3, "250 calls are three pages of 100");
    for page in &pages {
        assert_eq!(page.param("limit"), Some("100"));
    }
    assert_eq!(pages[0].param("cursor"), None);
    assert!(pages[1].param("cursor").is_some() && pages[2].param("cursor").is_some());
    let part = source_report(&report(&run), ROLEPLAY);
    assert_eq!(part["pages"], json!(3));
    assert_eq!(part["listed"], json!(250));
    let stored: Vec<String> = stored_details(&fake.store).into_keys().collect();
    assert_eq!(stored, sorted(&ids));
}

#[tokio::test]
async fn since_and_until_bound_the_window_of_every_source() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, days_ago(12));
    let inside = fake.calls.add(ROLEPLAY, days_ago(7));
    fake.calls.add(ROLEPLAY, days_ago(2));
    let real_inside = fake.calls.add(REAL_CALL, days_ago(6));
    fake.calls.add(REAL_CALL, days_ago(1));
    let (since, until) = (ts(days_ago(10)), ts(days_ago(5)));
    let run = fake
        .reconcile(&["--since", &since, "--until", &until, "--refresh-real", "0"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    for source in [ROLEPLAY, REAL_CALL] {
        let request = list_requests_of(&fake.calls, source).pop().expect("listed");
        assert_eq!(request.param("from"), Some(since.as_str()), "{source}");
        assert_eq!(request.param("to"), Some(until.as_str()), "{source}");
    }
    let stored: Vec<String> = stored_details(&fake.store).into_keys().collect();
    assert_eq!(stored, sorted(&[inside, real_inside]));
}

#[tokio::test]
async fn since_after_until_is_a_usage_error() {
    let fake = fake().await;
    let (since, until) = (ts(days_ago(1)), ts(days_ago(2)));
    let run = fake
        .reconcile(&["--since", &since, "--until", &until])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--since"), "{}", run.stderr);
    assert!(fake.calls.seen().is_empty(), "nothing asked");
}

#[tokio::test]
async fn calls_listed_late_behind_the_watermark_are_caught_by_the_default_overlaps() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, hours_ago(1));
    fake.calls.add(REAL_CALL, days_ago(3));
    assert_eq!(fake.reconcile(&["--refresh-real", "0"]).await.code, 0);
    // Listed only now: a practice call that ended 90 minutes ago and was scored late, and a
    // real call that started 20 hours ago and was ingested from the dialer late.
    let practice = fake.calls.add(ROLEPLAY, mins_ago(90));
    let real = fake.calls.add(REAL_CALL, hours_ago(20));
    let run = fake.reconcile(&["--refresh-real", "0"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(report(&run)["totals"]["new"], json!(2));
    let stored = stored_details(&fake.store);
    assert!(stored.contains_key(&practice) && stored.contains_key(&real));
}

#[tokio::test]
async fn a_since_after_the_watermark_leaves_the_watermark_where_it_was() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, hours_ago(1));
    assert_eq!(fake.reconcile(&["--source", "roleplay"]).await.code, 0);
    let mark = watermark(&fake.store, ROLEPLAY).expect("watermark");
    let since = ts(svc_reconcile::time::parse_ts(&mark).expect("timestamp")
        + chrono::Duration::milliseconds(1));
    let run = fake
        .reconcile(&["--source", "roleplay", "--since", &since])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        watermark(&fake.store, ROLEPLAY),
        Some(mark),
        "the calls between the watermark and --since were not listed"
    );
}
