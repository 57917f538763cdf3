//! A host whose clock runs ahead of the service's, or behind it: reconcile bounds
//! each watermark by both clocks (the service's `Date` on the window's first page), lists up to
//! the service's time when it is ahead, and reports the skew: every call scored between runs
//! is stored by the next one.

use chrono::Duration;
use svc_service::Clock;

use super::helpers::*;

#[tokio::test]
async fn a_host_clock_three_hours_ahead_of_the_service_loses_no_call() {
    let harness =
        Harness::start_with(|config| config.clock = Clock::Offset(Duration::hours(-3))).await;
    register_rep(&harness.client).await;
    let first_call = practice_call(&harness).await;
    let first = harness.reconcile(&options()).await;
    assert_eq!(first.exit_code, 0, "{first:#?}");
    assert_eq!(first.totals.new, 1);
    let skew = first.clock_skew_ms.expect("the skew is reported");
    assert!(
        (skew - 3 * 3_600_000).abs() < 10_000,
        "the host is 3 hours ahead: {skew} ms"
    );
    let service_time = first.service_time.expect("the service's time is reported");
    let roleplay = first
        .sources
        .iter()
        .find(|s| s.source.as_str() == "roleplay")
        .expect("roleplay");
    let watermark = roleplay.watermark.expect("a watermark");
    assert!(
        watermark <= service_time + Duration::seconds(1),
        "the watermark {watermark} passed the service's clock {service_time}"
    );

    // Scored after the first run, by the service's clock: three hours before the host's.
    let second_call = practice_call(&harness).await;
    let second = harness.reconcile(&options()).await;
    assert_eq!(second.exit_code, 0, "{second:#?}");
    assert_eq!(
        second.totals.new, 1,
        "the call scored between runs: {second:#?}"
    );
    let stored: Vec<String> = stored_calls(&harness.store_path)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert!(
        stored.contains(&first_call) && stored.contains(&second_call),
        "{stored:?}"
    );
}

#[tokio::test]
async fn a_service_clock_three_hours_ahead_of_the_host_loses_no_call_either() {
    let harness =
        Harness::start_with(|config| config.clock = Clock::Offset(Duration::hours(3))).await;
    register_rep(&harness.client).await;
    // Scored "three hours from now" by the host's clock: past the window's end at the host's now.
    let first_call = practice_call(&harness).await;
    let before = chrono::Utc::now();
    let first = harness.reconcile(&options()).await;
    assert_eq!(first.exit_code, 0, "{first:#?}");
    assert_eq!(
        first.totals.new, 1,
        "listed up to the service's time: {first:#?}"
    );
    let skew = first.clock_skew_ms.expect("the skew is reported");
    assert!(
        (skew + 3 * 3_600_000).abs() < 10_000,
        "the host is 3 hours behind: {skew} ms"
    );
    let roleplay = first
        .sources
        .iter()
        .find(|s| s.source.as_str() == "roleplay")
        .expect("roleplay");
    let watermark = roleplay.watermark.expect("a watermark");
    assert!(
        watermark <= chrono::Utc::now() && watermark >= before - Duration::seconds(5),
        "the watermark {watermark} follows this host's clock, never the service's future"
    );

    let second_call = practice_call(&harness).await;
    let second = harness.reconcile(&options()).await;
    assert_eq!(second.exit_code, 0, "{second:#?}");
    assert_eq!(second.totals.new, 1, "{second:#?}");
    let stored: Vec<String> = stored_calls(&harness.store_path)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert!(
        stored.contains(&first_call) && stored.contains(&second_call),
        "{stored:?}"
    );
}
