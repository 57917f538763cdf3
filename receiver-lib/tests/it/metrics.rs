//! Feature `metrics`: a known sequence of deliveries, handler runs and inbox states, and the
//! exact counters, histograms and gauges they leave in a recorder. Each test installs a
//! recorder for its own thread (a current-thread runtime runs the server and the client there),
//! so tests running side by side do not mix their figures.

use std::sync::Arc;

use axum::Router;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};
use svc_contract::{ManualClock, sign};
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, WebhookReceiver, inbox_route, webhook_route};
use svc_receiver::dedup::MemoryDedupStore;
use svc_receiver::inbox::{Inbox, InboxPolicy, process_next};
use svc_receiver::metrics::{
    DELIVERIES, HANDLER_RUNS, INBOX_ENTRIES, INBOX_OLDEST_PENDING_AGE_SECONDS,
    STORE_COMMIT_SECONDS, VERIFY_SECONDS,
};
use svc_receiver::sqlite::SqliteInbox;

use crate::helpers::{SECRET, T, client, event_body, post, spawn, verifier};

/// What a snapshot holds, by kind, name and labels (`k=v` sorted, comma-joined).
struct Figures(Vec<(CompositeKey, DebugValue)>);

impl Figures {
    fn of(snapshotter: &Snapshotter) -> Self {
        Self(
            snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .map(|(key, _, _, value)| (key, value))
                .collect(),
        )
    }

    fn find(&self, kind: MetricKind, name: &str, labels: &str) -> Option<&DebugValue> {
        self.0.iter().find_map(|(key, value)| {
            let mut have: Vec<String> = key
                .key()
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            have.sort();
            (key.kind() == kind && key.key().name() == name && have.join(",") == labels)
                .then_some(value)
        })
    }

    fn counter(&self, name: &str, labels: &str) -> u64 {
        match self.find(MetricKind::Counter, name, labels) {
            Some(DebugValue::Counter(n)) => *n,
            None => 0,
            Some(other) => panic!("{name} {labels} is {other:?}"),
        }
    }

    fn gauge(&self, name: &str, labels: &str) -> f64 {
        match self.find(MetricKind::Gauge, name, labels) {
            Some(DebugValue::Gauge(v)) => v.into_inner(),
            other => panic!("{name} {labels} is {other:?}"),
        }
    }

    fn samples(&self, name: &str, labels: &str) -> usize {
        match self.find(MetricKind::Histogram, name, labels) {
            Some(DebugValue::Histogram(v)) => v.len(),
            None => 0,
            Some(other) => panic!("{name} {labels} is {other:?}"),
        }
    }

    /// Every delivery counter of `mode`, as `outcome=n`, sorted.
    fn deliveries(&self, mode: &str) -> Vec<String> {
        let mut found: Vec<String> = self
            .0
            .iter()
            .filter(|(key, _)| key.key().name() == DELIVERIES)
            .filter(|(key, _)| {
                key.key()
                    .labels()
                    .any(|l| l.key() == "mode" && l.value() == mode)
            })
            .map(|(key, value)| {
                let outcome = key
                    .key()
                    .labels()
                    .find(|l| l.key() == "outcome")
                    .map(|l| l.value().to_owned())
                    .unwrap_or_default();
                match value {
                    DebugValue::Counter(n) => format!("{outcome}={n}"),
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        found.sort();
        found
    }
}

#[tokio::test]
async fn inbox_mode_counts_each_outcome_times_verify_and_commits_and_sets_the_gauges() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);

    let dir = tempfile::tempdir().expect("dir");
    let policy = InboxPolicy {
        max_attempts: 1,
        ..InboxPolicy::default()
    };
    let inbox = SqliteInbox::open(dir.path().join("inbox.db"), policy).expect("open");
    let clock = Arc::new(ManualClock::new(T));
    let receiver = InboxReceiver::new(verifier(), inbox.clone()).with_clock(Arc::clone(&clock));
    let addr = spawn(Router::new().route("/webhooks", inbox_route(receiver))).await;
    let client = client();
    let send = |id: Option<&'static str>, header: Option<String>, body: Vec<u8>| {
        let client = client.clone();
        async move { post(&client, addr, id, header.as_deref(), body).await.0 }
    };

    let (a, b, c) = (
        event_body("svc_a"),
        event_body("svc_b"),
        event_body("svc_c"),
    );
    let signed_a = sign(SECRET, T, &a);
    assert_eq!(
        send(Some("wh_a"), Some(signed_a.clone()), a.clone()).await,
        200
    );
    assert_eq!(send(Some("wh_b"), Some(sign(SECRET, T, &b)), b).await, 200);
    assert_eq!(
        send(Some("wh_c"), Some(sign(SECRET, T, &c)), c.clone()).await,
        200
    );
    // The sender's retry, the same signature under another id, a wrong secret, an old
    // timestamp, an oversized body, no id, no signature, a body that is not an event.
    assert_eq!(
        send(Some("wh_a"), Some(signed_a.clone()), a.clone()).await,
        200
    );
    assert_eq!(send(Some("wh_x"), Some(signed_a), a.clone()).await, 401);
    let wrong = sign("whsec_wrong", T, &c);
    assert_eq!(send(Some("wh_y"), Some(wrong), c.clone()).await, 401);
    assert_eq!(
        send(Some("wh_z"), Some(sign(SECRET, T - 600, &c)), c.clone()).await,
        401
    );
    let big = vec![b' '; 70_000];
    assert_eq!(
        send(Some("wh_big"), Some(sign(SECRET, T, &big)), big).await,
        413
    );
    assert_eq!(send(None, Some(sign(SECRET, T, &c)), c.clone()).await, 400);
    assert_eq!(send(Some("wh_n"), None, c).await, 400);
    let junk = b"{\"event\":\"call.scored\"}".to_vec();
    assert_eq!(
        send(Some("wh_j"), Some(sign(SECRET, T, &junk)), junk).await,
        400
    );

    let figures = Figures::of(&snapshotter);
    assert_eq!(
        figures.deliveries("inbox"),
        [
            "accepted=3",
            "bad_body=1",
            "bad_header=1",
            "bad_id=1",
            "bad_signature=1",
            "duplicate=1",
            "replayed=1",
            "stale=1",
            "too_large=1",
        ]
    );
    assert_eq!(
        figures.samples(VERIFY_SECONDS, "mode=inbox"),
        11,
        "every delivery is verified once"
    );
    // Three stored, one duplicate and one replay looked up: five inbox operations.
    assert_eq!(figures.samples(STORE_COMMIT_SECONDS, "store=inbox"), 5);

    // One entry processed, one failed for good (max_attempts 1), one left pending; and one
    // in hand while the gauges are read.
    clock.set(T + 40);
    process_next(
        &inbox,
        &|_: Received| async { Ok::<(), String>(()) },
        &ManualClock::new(T + 40),
    )
    .await
    .expect("a");
    process_next(
        &inbox,
        &|_: Received| async { Err::<(), _>("down") },
        &ManualClock::new(T + 40),
    )
    .await
    .expect("b");
    let stats = inbox.publish_metrics(T + 40).await.expect("stats");
    assert_eq!((stats.pending, stats.leased, stats.dead), (1, 0, 1));
    let figures = Figures::of(&snapshotter);
    assert_eq!(figures.counter(HANDLER_RUNS, "mode=inbox,outcome=ok"), 1);
    assert_eq!(figures.counter(HANDLER_RUNS, "mode=inbox,outcome=error"), 1);
    assert_eq!(figures.gauge(INBOX_ENTRIES, "state=pending"), 1.0);
    assert_eq!(figures.gauge(INBOX_ENTRIES, "state=leased"), 0.0);
    assert_eq!(figures.gauge(INBOX_ENTRIES, "state=dead"), 1.0);
    assert_eq!(figures.gauge(INBOX_OLDEST_PENDING_AGE_SECONDS, ""), 40.0);

    let held = inbox
        .next_due(T + 50)
        .await
        .expect("next")
        .expect("c is due");
    inbox.publish_metrics(T + 50).await.expect("stats");
    let figures = Figures::of(&snapshotter);
    assert_eq!(figures.gauge(INBOX_ENTRIES, "state=pending"), 0.0);
    assert_eq!(figures.gauge(INBOX_ENTRIES, "state=leased"), 1.0);
    assert_eq!(figures.gauge(INBOX_OLDEST_PENDING_AGE_SECONDS, ""), 50.0);

    inbox.settle(&held, Ok(()), T + 51).await.expect("settle");
    inbox.publish_metrics(T + 51).await.expect("stats");
    let figures = Figures::of(&snapshotter);
    assert_eq!(figures.gauge(INBOX_ENTRIES, "state=leased"), 0.0);
    assert_eq!(figures.gauge(INBOX_ENTRIES, "state=pending"), 0.0);
    assert_eq!(figures.gauge(INBOX_OLDEST_PENDING_AGE_SECONDS, ""), 0.0);
}

#[tokio::test]
async fn direct_mode_counts_accepted_duplicate_and_failed_deliveries_and_each_handler_run() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);

    let handler = |received: Received| async move {
        match received.event.call_id.as_str() {
            "svc_fail" => Err("refused".to_owned()),
            "svc_panic" => panic!("boom"),
            _ => Ok(()),
        }
    };
    let receiver = WebhookReceiver::new(verifier(), MemoryDedupStore::default(), handler)
        .with_clock(ManualClock::new(T));
    let addr = spawn(Router::new().route("/webhooks", webhook_route(receiver))).await;
    let client = client();
    for (id, call) in [
        ("wh_1", "svc_ok"),
        ("wh_1", "svc_ok"),
        ("wh_2", "svc_fail"),
        ("wh_3", "svc_panic"),
    ] {
        let body = event_body(call);
        let header = sign(SECRET, T, &body);
        post(&client, addr, Some(id), Some(&header), body).await;
    }
    let figures = Figures::of(&snapshotter);
    assert_eq!(
        figures.deliveries("direct"),
        ["accepted=1", "duplicate=1", "handler_failed=2"]
    );
    assert_eq!(figures.counter(HANDLER_RUNS, "mode=direct,outcome=ok"), 1);
    assert_eq!(
        figures.counter(HANDLER_RUNS, "mode=direct,outcome=error"),
        1
    );
    assert_eq!(
        figures.counter(HANDLER_RUNS, "mode=direct,outcome=panic"),
        1
    );
    assert_eq!(figures.samples(VERIFY_SECONDS, "mode=direct"), 4);
    assert_eq!(
        figures.samples(STORE_COMMIT_SECONDS, "store=inbox"),
        0,
        "the memory store is not a SQLite store"
    );
}
