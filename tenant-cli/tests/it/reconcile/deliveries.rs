//! Recovered or delivered: a call reconcile stores while the store's ledger holds no verified
//! webhook for it is *recovered* (exit 3) once its delivery grace has passed; a call whose
//! webhook is in the ledger is not.

use serde_json::json;
use svc_contract::CallSource;
use svc_fixtures::calls::ROLEPLAY;

use super::{
    days_ago, deliveries, fake, hours_ago, mins_ago, record_webhook, report, sorted, sorted_ids,
};

#[tokio::test]
async fn calls_without_a_webhook_in_the_ledger_are_recovered_and_the_run_exits_3() {
    let fake = fake().await;
    let ids = fake
        .calls
        .add_many(ROLEPLAY, [hours_ago(2), hours_ago(3), hours_ago(4)]);
    // The receiver has been writing the ledger for days; only the first call's webhook came.
    record_webhook(
        &fake.store,
        "svc_call_older",
        CallSource::Roleplay,
        days_ago(10),
    );
    record_webhook(&fake.store, &ids[0], CallSource::Roleplay, hours_ago(2));
    let run = fake
        .reconcile(&["--source", "roleplay", "--delivery-grace", "0s"])
        .await;
    assert_eq!(run.code, 3, "missed deliveries are worth an alert: {run:?}");
    let out = report(&run);
    assert_eq!(out["totals"]["new"], json!(3));
    assert_eq!(out["totals"]["recovered"], json!(2));
    assert_eq!(
        sorted_ids(&out["recoveredCallIds"]),
        sorted(&ids[1..]),
        "the delivered call is not recovered"
    );
    let how = deliveries(&fake.store);
    assert_eq!(how[&ids[0]], "webhook");
    assert_eq!(how[&ids[1]], "recovered");
    assert_eq!(how[&ids[2]], "recovered");

    let rerun = fake
        .reconcile(&["--source", "roleplay", "--delivery-grace", "0s"])
        .await;
    assert_eq!(rerun.code, 0, "recovered once, not again: {rerun:?}");
    assert_eq!(report(&rerun)["totals"]["recovered"], json!(0));
}

#[tokio::test]
async fn with_the_default_grace_a_freshly_scored_call_is_not_recovered_yet() {
    let fake = fake().await;
    record_webhook(
        &fake.store,
        "svc_call_older",
        CallSource::Roleplay,
        days_ago(10),
    );
    let fresh = fake.calls.add_many(ROLEPLAY, [mins_ago(5), mins_ago(6)]);
    let old = fake.calls.add(ROLEPLAY, hours_ago(3));
    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 3, "{run:?}");
    let out = report(&run);
    assert_eq!(out["totals"]["new"], json!(3));
    assert_eq!(
        sorted_ids(&out["recoveredCallIds"]),
        vec![old.clone()],
        "scored minutes ago: its webhook may still come"
    );
    let how = deliveries(&fake.store);
    assert_eq!(how[&fresh[0]], "awaiting");
    assert_eq!(how[&fresh[1]], "awaiting");

    // One webhook arrives late; the other never does.
    record_webhook(&fake.store, &fresh[0], CallSource::Roleplay, mins_ago(1));
    let run = fake
        .reconcile(&["--source", "roleplay", "--delivery-grace", "0s"])
        .await;
    assert_eq!(run.code, 3, "{run:?}");
    let out = report(&run);
    assert_eq!(out["totals"]["new"], json!(0));
    assert_eq!(sorted_ids(&out["recoveredCallIds"]), vec![fresh[1].clone()]);
    let how = deliveries(&fake.store);
    assert_eq!(how[&fresh[0]], "webhook");
    assert_eq!(how[&fresh[1]], "recovered");
    assert_eq!(how[&old], "recovered");
}

#[tokio::test]
async fn with_the_default_grace_fresh_calls_alone_leave_the_run_clean() {
    let fake = fake().await;
    record_webhook(
        &fake.store,
        "svc_call_older",
        CallSource::Roleplay,
        days_ago(10),
    );
    fake.calls.add_many(ROLEPLAY, [mins_ago(5), mins_ago(8)]);
    let metrics = fake.sandbox.path("reconcile.prom");
    let run = fake
        .reconcile(&[
            "--source",
            "roleplay",
            "--metrics-file",
            metrics.to_str().expect("utf-8 path"),
        ])
        .await;
    assert_eq!(run.code, 0, "nothing missed yet: {run:?}");
    let out = report(&run);
    assert_eq!(out["totals"]["new"], json!(2));
    assert_eq!(out["totals"]["recovered"], json!(0));
    // Clean, but not "nothing missed" for sure: two calls still wait for their webhook.
    assert_eq!(out["totals"]["awaiting"], json!(2), "{out:#}");
    assert_eq!(out["sources"][0]["awaiting"], json!(2), "{out:#}");
    let figures = std::fs::read_to_string(&metrics).expect("the metrics file");
    assert!(
        figures.contains(r#"svc_cli_reconcile_run_awaiting_calls{source="roleplay"} 2"#),
        "{figures}"
    );

    // The table says it too, with what it means.
    let store = fake.store.to_str().expect("utf-8 path");
    let table = fake
        .sandbox
        .run(&[
            "reconcile",
            "--store",
            store,
            "--source",
            "roleplay",
            "--retry-base-ms",
            "1",
        ])
        .await;
    assert_eq!(table.code, 0, "{table:?}");
    assert!(table.stdout.contains("awaiting"), "{}", table.stdout);
    assert!(
        table
            .stderr
            .contains("2 stored call(s) awaiting their webhook: scored within the last 30m"),
        "{table:?}"
    );

    // Once their grace has passed, they are settled and nothing awaits any more.
    let settled = fake
        .reconcile(&["--source", "roleplay", "--delivery-grace", "0s"])
        .await;
    assert_eq!(settled.code, 3, "{settled:?}");
    let out = report(&settled);
    assert_eq!(out["totals"]["recovered"], json!(2));
    assert_eq!(out["totals"]["new"], json!(0));
    assert_eq!(out["totals"]["awaiting"], json!(0));
}
