//! The engine against `svc-fixtures`' stateful fake of `GET /calls` and `GET /calls/{callId}`,
//! into the memory sink: what a run stores and reports, the watermark, failed details (kept
//! or not), and a run that stops at the first exhausted retry instead of reading every
//! remaining detail.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use svc_client::{ApiKey, CallId, CallSource, Client, RetryPolicy};
use svc_fixtures::calls::{Calls, DetailFault, REAL_CALL, ROLEPLAY};
use svc_fixtures::{API_KEY, base_url, faults};
use svc_reconcile::{
    Batch, KnownCall, LockError, MemorySink, Options, Outcome, Reconciler, RunId, RunReport, Sink,
    StopReason, Stored, WindowEnd,
};
use wiremock::MockServer;

/// A client of the fake that retries `retries` times without waiting.
pub(super) fn client(server: &MockServer, retries: u32) -> Client {
    let policy = RetryPolicy {
        max_retries: retries,
        base_delay: Duration::ZERO,
        max_delay: Duration::ZERO,
        max_retry_after: Duration::from_secs(1),
        sleep: Arc::new(|_| Box::pin(async {})),
    };
    Client::builder(base_url(server))
        .api_key(ApiKey::new(API_KEY))
        .retry(policy)
        .build()
        .expect("client")
}

fn hours_ago(hours: i64) -> DateTime<Utc> {
    Utc::now() - chrono::Duration::hours(hours)
}

/// `count` times a minute apart from `start`.
fn minutes_from(start: DateTime<Utc>, count: i64) -> Vec<DateTime<Utc>> {
    (0..count)
        .map(|i| start + chrono::Duration::minutes(i))
        .collect()
}

async fn run<S: Sink>(
    client: &Client,
    sink: Arc<S>,
    options: Options,
) -> Result<RunReport, svc_reconcile::RunError<S::Error>> {
    let reconciler = Reconciler::new(client.clone(), sink, options);
    let guard = reconciler.lock(Duration::ZERO).await.map_err(|e| match e {
        LockError::Busy(who) => panic!("busy: {who}"),
        _ => panic!("the lock"),
    })?;
    reconciler.run(&guard, &()).await
}

#[tokio::test]
async fn a_run_stores_every_listed_call_once_and_moves_each_watermark() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let practice = calls.add_many(ROLEPLAY, minutes_from(hours_ago(5), 150));
    let real = calls.add(REAL_CALL, hours_ago(3));
    let sink = Arc::new(MemorySink::default());
    let client = client(&server, 0);

    let report = run(&client, sink.clone(), Options::default())
        .await
        .expect("a clean run");
    assert_eq!(report.outcome, Outcome::Clean);
    assert_eq!(report.totals.new, 151);
    assert_eq!(report.totals.backfilled, 151, "no ledger: history");
    let held = sink.calls();
    assert_eq!(held.len(), 151);
    for id in practice.iter().chain([&real]) {
        let call = &held[&CallId::from_service(id.as_str())];
        assert_eq!(
            call.detail.json,
            calls.detail_text(id).expect("served"),
            "the detail as served"
        );
    }
    for source in [CallSource::Roleplay, CallSource::RealCall] {
        let watermark = sink.watermark_of(&source).expect("moved");
        assert_eq!(
            Some(watermark),
            report
                .sources
                .iter()
                .find(|s| s.source == source)
                .and_then(|s| s.watermark)
        );
    }

    let details_before = calls.detail_requests();
    let again = run(&client, sink.clone(), Options::default())
        .await
        .expect("again");
    assert_eq!(again.totals.new, 0);
    assert_eq!(
        calls.detail_requests(),
        details_before,
        "known calls cost no detail"
    );
    assert_eq!(sink.runs().len(), 2);
    let second = sink.runs()[1].clone().expect("the second run's report");
    assert_eq!(second.totals.known, second.totals.listed, "{second:#?}");
}

#[tokio::test]
async fn a_call_rescored_with_no_webhook_is_reported_as_a_silent_change() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let id = calls.add(REAL_CALL, hours_ago(30));
    let sink = Arc::new(MemorySink::default());
    let client = client(&server, 0);
    run(&client, sink.clone(), Options::default())
        .await
        .expect("first");
    calls.redisposition(&id, 55.0).expect("redisposition");

    let report = run(&client, sink.clone(), Options::default())
        .await
        .expect("second");
    assert_eq!(report.outcome, Outcome::Found);
    assert_eq!(report.changed_call_ids, vec![id.clone()]);
    assert_eq!(sink.calls()[&CallId::from_service(id.as_str())].changes, 1);
}

#[tokio::test]
async fn a_failed_detail_is_kept_and_stored_by_the_next_run() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let ids = calls.add_many(ROLEPLAY, minutes_from(hours_ago(2), 3));
    calls.fail_detail(&ids[1], DetailFault::NotFound);
    let sink = Arc::new(MemorySink::default());
    let client = client(&server, 0);

    let report = run(&client, sink.clone(), Options::default())
        .await
        .expect("completes");
    assert_eq!(report.outcome, Outcome::CallsFailed);
    assert_eq!(report.totals.failed, 1);
    assert_eq!(report.failed_calls[0].call_id, ids[1]);
    assert!(
        report.sources.iter().all(|s| s.completed),
        "the window still completes"
    );
    assert_eq!(sink.calls().len(), 2);

    calls.heal_detail(&ids[1]);
    let next = run(&client, sink.clone(), Options::default())
        .await
        .expect("next");
    assert_eq!(next.totals.failed, 0);
    assert_eq!(sink.calls().len(), 3, "the failed call is stored now");
}

/// The memory sink, but keeping neither failures nor runs: what a tenant's smallest sink does.
#[derive(Debug, Default)]
struct Forgetful(MemorySink);

impl Sink for Forgetful {
    type Error = <MemorySink as Sink>::Error;
    type Lock = <MemorySink as Sink>::Lock;

    async fn lock(&self, wait: Duration) -> Result<Self::Lock, LockError<Self::Error>> {
        self.0.lock(wait).await
    }
    async fn watermark(&self, source: &CallSource) -> Result<Option<DateTime<Utc>>, Self::Error> {
        self.0.watermark(source).await
    }
    async fn known_calls(&self, ids: &[CallId]) -> Result<HashMap<CallId, KnownCall>, Self::Error> {
        self.0.known_calls(ids).await
    }
    async fn store_batch(&self, batch: Batch) -> Result<Vec<Stored>, Self::Error> {
        assert!(
            batch.failures.is_empty(),
            "failures go only to a sink that keeps them"
        );
        self.0.store_batch(batch).await
    }
    async fn record_window(
        &self,
        source: &CallSource,
        run_id: Option<RunId>,
        at: DateTime<Utc>,
        end: WindowEnd<'_>,
    ) -> Result<(), Self::Error> {
        self.0.record_window(source, run_id, at, end).await
    }
}

#[tokio::test]
async fn with_a_sink_that_keeps_no_failures_a_failed_detail_holds_the_watermark_back() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let ids = calls.add_many(ROLEPLAY, minutes_from(hours_ago(2), 2));
    calls.fail_detail(&ids[0], DetailFault::NotJson);
    let sink = Arc::new(Forgetful::default());
    let client = client(&server, 0);
    let options = Options {
        sources: vec![CallSource::Roleplay],
        ..Options::default()
    };

    let report = run(&client, sink.clone(), options.clone())
        .await
        .expect("runs");
    assert_eq!(report.totals.failed, 1);
    assert!(!report.sources[0].completed, "{report:#?}");
    assert_eq!(sink.0.watermark_of(&CallSource::Roleplay), None, "unmoved");

    calls.heal_detail(&ids[0]);
    let next = run(&client, sink.clone(), options).await.expect("next");
    assert!(next.sources[0].completed);
    assert!(sink.0.watermark_of(&CallSource::Roleplay).is_some());
    assert_eq!(sink.0.calls().len(), 2);
}

#[tokio::test]
async fn a_service_that_keeps_failing_stops_the_run_at_the_first_exhausted_retry() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let ids = calls.add_many(ROLEPLAY, minutes_from(hours_ago(6), 240));
    faults::error(&server, "INTERNAL_ERROR")
        .route("GET", "/calls/{callId}")
        .mount()
        .await;
    let sink = Arc::new(MemorySink::default());
    let client = client(&server, 3);
    let options = Options {
        sources: vec![CallSource::Roleplay],
        concurrency: 1,
        ..Options::default()
    };

    let stopped = run(&client, sink.clone(), options)
        .await
        .expect_err("stops");
    assert!(
        matches!(stopped.reason, StopReason::Client(_)),
        "{:?}",
        stopped.reason
    );
    assert_eq!(stopped.report.outcome, Outcome::Stopped);
    assert!(!stopped.report.sources[0].completed);
    assert_eq!(
        sink.watermark_of(&CallSource::Roleplay),
        None,
        "the watermark stays"
    );
    let detail_requests: usize = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path().starts_with("/v1/calls/"))
        .count();
    // One call's four attempts, not 240 calls × 4.
    assert!(
        detail_requests <= 4 + 1,
        "{detail_requests} detail requests for {} calls",
        ids.len()
    );
}

#[tokio::test]
async fn a_refused_key_stops_the_run_with_what_was_stored_kept() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    calls.add_many(ROLEPLAY, minutes_from(hours_ago(6), 250));
    calls.revoke_key_after(4);
    let sink = Arc::new(MemorySink::default());
    let client = client(&server, 0);
    let stopped = run(&client, sink.clone(), Options::default())
        .await
        .expect_err("stops");
    match &stopped.reason {
        StopReason::Client(e) => assert_eq!(e.code(), Some("API_KEY_REVOKED"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(sink.watermark_of(&CallSource::Roleplay), None);
    let error = stopped.report.error.as_deref().unwrap_or_default();
    assert!(error.contains("API_KEY_REVOKED"), "{error}");
}

#[tokio::test]
async fn a_dry_run_counts_what_a_run_would_store_and_writes_nothing() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    calls.add_many(ROLEPLAY, minutes_from(hours_ago(2), 5));
    let sink = Arc::new(MemorySink::default());
    let reconciler = Reconciler::new(client(&server, 0), sink.clone(), Options::default());
    let report = reconciler.dry_run(&()).await.expect("dry run");
    assert!(report.dry_run);
    assert_eq!(report.totals.new, 5);
    assert_eq!(calls.detail_requests(), 0);
    assert!(sink.calls().is_empty());
    assert!(sink.runs().is_empty());
    assert_eq!(sink.watermark_of(&CallSource::Roleplay), None);
}

#[tokio::test]
async fn progress_is_told_each_page_of_each_source() {
    #[derive(Default)]
    struct Seen(std::sync::Mutex<Vec<(String, u64)>>);
    impl svc_reconcile::Progress for Seen {
        fn update(&self, source: &CallSource, counts: &svc_reconcile::Counts) {
            if let Ok(mut seen) = self.0.lock() {
                seen.push((source.as_str().to_owned(), counts.pages));
            }
        }
    }
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    calls.add_many(ROLEPLAY, minutes_from(hours_ago(4), 120));
    let reconciler = Reconciler::new(
        client(&server, 0),
        Arc::new(MemorySink::default()),
        Options::default(),
    );
    let guard = reconciler.lock(Duration::ZERO).await.expect("lock");
    let seen = Seen::default();
    reconciler.run(&guard, &seen).await.expect("run");
    let seen = seen.0.lock().expect("seen").clone();
    assert!(seen.contains(&("roleplay".to_owned(), 2)), "{seen:?}");
    assert!(
        seen.iter().any(|(source, _)| source == "real_call"),
        "{seen:?}"
    );
}

/// A service whose `Date` is hostile (issue item 5): far in the future (year 262142, the latest
/// day chrono reads: a second later does not exist) or far in the past. Either is ignored,
/// never trusted: the run stores every call, the watermark follows the local clock, and no
/// service time or skew is reported.
#[tokio::test]
async fn a_date_implausibly_far_from_the_local_clock_is_ignored_not_trusted() {
    for date in [
        "31 Dec 262142 23:59:59 GMT",
        "Mon, 01 Jan 1990 00:00:00 GMT",
    ] {
        let server = MockServer::start().await;
        let calls = Calls::mount(&server).await;
        calls.date_header(Some(date));
        calls.add_many(ROLEPLAY, minutes_from(hours_ago(3), 5));
        let sink = Arc::new(MemorySink::default());
        let client = client(&server, 0);
        let before = Utc::now();
        let report = run(&client, sink.clone(), Options::default())
            .await
            .unwrap_or_else(|e| panic!("{date}: the run completes: {e:#}"));
        assert_eq!(report.outcome, Outcome::Clean, "{date}");
        assert_eq!(report.totals.new, 5, "{date}");
        assert_eq!(report.service_time, None, "{date}: {report:#?}");
        assert_eq!(report.clock_skew_ms, None, "{date}");
        let watermark = sink
            .watermark_of(&CallSource::Roleplay)
            .unwrap_or_else(|| panic!("{date}: the watermark moved"));
        assert!(
            (watermark - before).num_hours().abs() < 1,
            "{date}: the watermark {watermark} follows the local clock"
        );
        assert!(
            report.sources.iter().all(|s| s.to <= Utc::now()),
            "{date}: no window listed up to the hostile clock: {report:#?}"
        );
    }
}
