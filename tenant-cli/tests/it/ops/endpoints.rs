//! `webhook serve`'s `/metrics` after a known sequence of deliveries, `/healthz`, and
//! `--metrics-listen`.

use std::time::Duration;

use rusqlite::Connection;
use svc_contract::sign;

use super::{SECRET, deliver, event, get, http, now, samples, serve, signed};
use crate::helpers::{Sandbox, WEBHOOK_SERVE};

/// One delivery of a sequence: the outcome it should count as, its webhook id, its signature
/// header, its body and the status it should get.
type Step<'a> = (&'a str, Option<&'a str>, Option<String>, &'a [u8], u16);

/// Scrapes until `ready` holds of the samples (the last deliveries are being recorded), for
/// up to 10 s; returns the last scrape.
async fn scrape_until(
    url: &str,
    ready: impl Fn(&std::collections::BTreeMap<String, f64>) -> bool,
) -> std::collections::BTreeMap<String, f64> {
    let mut last = Default::default();
    for _ in 0..100 {
        let (status, text) = get(url).await;
        assert_eq!(status, 200, "{text}");
        last = samples(&text);
        if ready(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the scrape never settled: {last:#?}");
}

#[tokio::test]
async fn metrics_count_each_delivery_outcome_handler_run_and_inbox_state() {
    let mut serving = serve(&[], &[]).await;
    let url = format!("{}/webhooks", serving.base);
    let (a, b, c) = (
        event("svc_call_a"),
        event("svc_call_b"),
        event("svc_call_c"),
    );
    let signed_a = signed(&a);
    let big = vec![b' '; 70 * 1024];
    let sequence: [Step<'_>; 11] = [
        ("accepted", Some("wh_a"), Some(signed_a.clone()), &a, 200),
        ("accepted", Some("wh_b"), Some(signed(&b)), &b, 200),
        ("duplicate", Some("wh_a"), Some(signed_a.clone()), &a, 200),
        ("replayed", Some("wh_a2"), Some(signed_a), &a, 401),
        (
            "bad_signature",
            Some("wh_c"),
            Some(sign("whsec_wrong", now(), &c)),
            &c,
            401,
        ),
        (
            "stale",
            Some("wh_c"),
            Some(sign(SECRET, now() - 3600, &c)),
            &c,
            401,
        ),
        ("too_large", Some("wh_big"), Some(signed(&big)), &big, 413),
        ("bad_id", None, Some(signed(&c)), &c, 400),
        ("bad_id", Some("wh c"), Some(signed(&c)), &c, 400),
        ("bad_header", Some("wh_c"), None, &c, 400),
        ("accepted", Some("wh_c"), Some(signed(&c)), &c, 200),
    ];
    for (outcome, id, signature, body, status) in &sequence {
        assert_eq!(
            deliver(&url, *id, signature.as_deref(), body).await,
            *status,
            "{outcome}"
        );
    }

    let scrape = format!("{}/metrics", serving.base);
    let figures = scrape_until(&scrape, |s| {
        s.get(r#"svc_receiver_handler_runs_total{mode="inbox",outcome="ok"}"#) == Some(&3.0)
            && s.get(r#"svc_receiver_inbox_entries{state="leased"}"#) == Some(&0.0)
            // The handler's run is counted before its entry is settled: under load a scrape
            // can fall in between.
            && s.get(r#"svc_receiver_inbox_entries{state="pending"}"#) == Some(&0.0)
    })
    .await;
    let deliveries: Vec<(String, f64)> = figures
        .iter()
        .filter(|(series, _)| series.starts_with("svc_receiver_deliveries_total{"))
        .map(|(series, value)| (series.clone(), *value))
        .collect();
    let expected: Vec<(String, f64)> = [
        ("accepted", 3.0),
        ("bad_header", 1.0),
        ("bad_id", 2.0),
        ("bad_signature", 1.0),
        ("duplicate", 1.0),
        ("replayed", 1.0),
        ("stale", 1.0),
        ("too_large", 1.0),
    ]
    .into_iter()
    .map(|(outcome, n)| {
        (
            format!(r#"svc_receiver_deliveries_total{{mode="inbox",outcome="{outcome}"}}"#),
            n,
        )
    })
    .collect();
    assert_eq!(
        deliveries, expected,
        "each outcome counted once per delivery"
    );
    let value = |series: &str| {
        *figures
            .get(series)
            .unwrap_or_else(|| panic!("no {series} in {figures:#?}"))
    };
    assert_eq!(
        value(r#"svc_receiver_verify_seconds_count{mode="inbox"}"#),
        11.0,
        "every delivery is verified once"
    );
    assert_eq!(
        value(r#"svc_receiver_verify_seconds_bucket{mode="inbox",le="+Inf"}"#),
        11.0,
        "a true histogram"
    );
    assert!(value(r#"svc_receiver_store_commit_seconds_count{store="inbox"}"#) >= 5.0);
    assert_eq!(value(r#"svc_receiver_inbox_entries{state="pending"}"#), 0.0);
    assert_eq!(value(r#"svc_receiver_inbox_entries{state="dead"}"#), 0.0);
    assert_eq!(value("svc_receiver_inbox_oldest_pending_age_seconds"), 0.0);
    assert!(
        !figures.contains_key(r#"svc_receiver_handler_runs_total{mode="inbox",outcome="error"}"#),
        "no handler run failed"
    );

    let response = http().get(&scrape).send().await.expect("scrape");
    let content_type = response.headers()["content-type"].to_str().expect("text");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    assert_eq!(
        get(&format!("{}/healthz", serving.base)).await,
        (200, "ok\n".into())
    );
    assert_eq!(
        get(&format!("{}/readyz", serving.base)).await,
        (200, "ready\n".into())
    );
    assert_eq!(serving.terminate().await, 0);
    let recorded: i64 = Connection::open(&serving.store)
        .expect("store")
        .query_row("SELECT COUNT(*) FROM deliveries", [], |r| r.get(0))
        .expect("count");
    assert_eq!(
        recorded, 3,
        "the three accepted deliveries are in the ledger"
    );
}

#[tokio::test]
async fn metrics_listen_moves_metrics_off_the_webhook_listener() {
    let mut serving = serve(&[], &["--metrics-listen", "127.0.0.1:0"]).await;
    assert_ne!(serving.base, serving.metrics_base);
    assert_eq!(get(&format!("{}/metrics", serving.base)).await.0, 404);
    let (status, text) = get(&format!("{}/metrics", serving.metrics_base)).await;
    assert_eq!(status, 200);
    assert!(
        text.contains("svc_receiver_inbox_entries{state=\"pending\"} 0"),
        "{text}"
    );
    for base in [&serving.base, &serving.metrics_base] {
        assert_eq!(get(&format!("{base}/healthz")).await.0, 200);
        assert_eq!(get(&format!("{base}/readyz")).await.0, 200);
    }
    // /metrics is free for deliveries on the webhook listener now.
    let body = event("svc_call_m");
    assert_eq!(
        deliver(
            &format!("{}/webhooks", serving.base),
            Some("wh_m"),
            Some(&signed(&body)),
            &body
        )
        .await,
        200
    );
    assert_eq!(serving.terminate().await, 0);
}

#[tokio::test]
async fn a_path_taken_by_the_operations_endpoints_is_a_usage_error() {
    let sandbox = Sandbox::new().env("WH", SECRET);
    let store = sandbox.path("store.db");
    let store = store.to_str().expect("utf-8");
    for path in ["/metrics", "/healthz", "/readyz"] {
        let run = sandbox
            .run(&[&WEBHOOK_SERVE[..], &["--store", store, "--path", path]].concat())
            .await;
        assert_eq!(run.code, 2, "{path}: {run:?}");
        assert!(run.stderr.contains("taken by the operations"), "{run:?}");
    }
}
