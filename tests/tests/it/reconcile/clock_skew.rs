//! A host whose clock runs ahead of the service's (issue 27): reconcile bounds each watermark
//! by the service's own clock (its `Date` on the window's first page), so calls the service
//! scores after a run are still listed by the next one, and the run reports the skew.

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
