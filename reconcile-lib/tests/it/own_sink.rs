//! A tenant's own sink that implements only the required methods of `Sink` (no ledger, no
//! runs, no failures), fed by its webhooks through `SinkHandler` and by reconcile, against
//! `svc-fixtures`' fake of the calls API: with `Options::webhooks_since` the run reports a
//! call whose webhook was lost as recovered (so the tenant can alert, as `svc-cli reconcile`
//! exits 3), a call still within the grace as awaiting, and history as backfilled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use svc_client::{CallId, CallSource, RawCallDetail};
use svc_fixtures::calls::{Calls, ROLEPLAY};
use svc_fixtures::webhooks::Event;
use svc_reconcile::{
    Arrival, Batch, KnownCall, LockError, Options, Outcome, Reconciler, RunId, RunReport, Sink,
    Stored, Version, WindowEnd,
};
use wiremock::MockServer;

/// The tenant's tables: calls and watermarks, nothing else.
#[derive(Debug, Default)]
pub(super) struct OwnSink {
    calls: Mutex<HashMap<CallId, RawCallDetail>>,
    watermarks: Mutex<HashMap<String, DateTime<Utc>>>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl OwnSink {
    fn held(&self) -> Vec<CallId> {
        let mut ids: Vec<CallId> = locked(&self.calls).keys().cloned().collect();
        ids.sort();
        ids
    }
}

impl Sink for OwnSink {
    type Error = std::convert::Infallible;
    type Lock = ();

    async fn lock(&self, _: Duration) -> Result<(), LockError<Self::Error>> {
        Ok(())
    }

    async fn watermark(&self, source: &CallSource) -> Result<Option<DateTime<Utc>>, Self::Error> {
        Ok(locked(&self.watermarks).get(source.as_str()).copied())
    }

    async fn known_calls(&self, ids: &[CallId]) -> Result<HashMap<CallId, KnownCall>, Self::Error> {
        let calls = locked(&self.calls);
        Ok(ids
            .iter()
            .filter_map(|id| {
                let scored_at = calls.get(id)?.detail.row.scored_at.clone();
                let known = KnownCall {
                    scored_at,
                    has_row: true,
                };
                Some((id.clone(), known))
            })
            .collect())
    }

    async fn store_batch(&self, batch: Batch) -> Result<Vec<Stored>, Self::Error> {
        let mut calls = locked(&self.calls);
        Ok(batch
            .calls
            .into_iter()
            .map(|call| {
                let id = call.detail.detail.row.id.clone();
                let outcome = match calls.get(&id) {
                    None => Stored::New(Arrival::Backfill),
                    Some(held) if Version::of(&call.detail).is_older_than(&Version::of(held)) => {
                        return Stored::Unchanged;
                    }
                    Some(held) if Version::of(held) == Version::of(&call.detail) => {
                        Stored::Unchanged
                    }
                    Some(_) => Stored::Changed,
                };
                calls.insert(id, call.detail);
                outcome
            })
            .collect())
    }

    async fn record_window(
        &self,
        source: &CallSource,
        _: Option<RunId>,
        _: DateTime<Utc>,
        end: WindowEnd<'_>,
    ) -> Result<(), Self::Error> {
        if let WindowEnd::Complete(Some(watermark)) = end {
            locked(&self.watermarks).insert(source.as_str().to_owned(), watermark);
        }
        Ok(())
    }
}

fn ago(minutes: i64) -> DateTime<Utc> {
    Utc::now() - chrono::Duration::minutes(minutes)
}

async fn run(server: &MockServer, sink: &Arc<OwnSink>, options: Options) -> RunReport {
    let client = super::engine::client(server, 0);
    let reconciler = Reconciler::new(client, sink.clone(), options);
    let guard = reconciler.lock(Duration::ZERO).await.expect("the lock");
    reconciler.run(&guard, &()).await.expect("a run")
}

fn ids(ids: &[&String]) -> Vec<CallId> {
    let mut ids: Vec<CallId> = ids.iter().map(|id| CallId::from_service(*id)).collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_sink_with_no_ledger_reports_a_lost_webhook_as_recovered_and_a_recent_one_as_awaiting() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let history = calls.add(ROLEPLAY, ago(5 * 60));
    let delivered = calls.add(ROLEPLAY, ago(60));
    let lost = calls.add(ROLEPLAY, ago(50));
    let recent_lost = calls.add(ROLEPLAY, ago(5));
    let recent_late = calls.add(ROLEPLAY, ago(4));
    let sink = Arc::new(OwnSink::default());
    let sender = super::webhook::receiver(&server, sink.clone()).await;
    let event = Event::scored(&calls, &delivered).expect("a listed call");
    assert_eq!(sender.deliver(&event).await.expect("delivered").status, 200);
    let options = Options {
        sources: vec![CallSource::Roleplay],
        webhooks_since: Some(ago(3 * 60)),
        ..Options::default()
    };

    let first = run(&server, &sink, options.clone()).await;
    assert_eq!(first.outcome, Outcome::Found, "{first:#?}");
    assert_eq!(first.totals.recovered, 1, "{first:#?}");
    assert_eq!(first.recovered_call_ids, ids(&[&lost]));
    assert_eq!(
        first.totals.backfilled, 1,
        "scored before webhooks: history"
    );
    assert_eq!(first.totals.new, 2);
    assert_eq!(first.totals.awaiting, 2, "scored within the grace");
    assert_eq!(sink.held(), ids(&[&history, &delivered, &lost]));
    let watermark = first.sources[0].watermark.expect("a watermark");
    assert!(
        watermark <= ago(5),
        "the watermark waits for the calls left for later: {watermark}"
    );

    // One of the recent calls' webhook comes late; the other's never does. Once the grace
    // has passed (none left, here), the next run recovers only the lost one.
    let late = Event::scored(&calls, &recent_late).expect("a listed call");
    assert_eq!(sender.deliver(&late).await.expect("delivered").status, 200);
    let after_grace = Options {
        delivery_grace: Duration::ZERO,
        ..options.clone()
    };
    let second = run(&server, &sink, after_grace.clone()).await;
    assert_eq!(second.outcome, Outcome::Found, "{second:#?}");
    assert_eq!(second.recovered_call_ids, ids(&[&recent_lost]));
    assert_eq!(second.totals.recovered, 1);
    assert_eq!(second.totals.awaiting, 0);
    assert_eq!(
        sink.held(),
        ids(&[&history, &delivered, &lost, &recent_lost, &recent_late])
    );

    let third = run(&server, &sink, after_grace).await;
    assert_eq!(third.outcome, Outcome::Clean, "{third:#?}");
    assert_eq!(third.totals.new, 0);
    assert!(third.sources[0].watermark > Some(watermark), "it moves on");
}

#[tokio::test]
async fn without_webhooks_since_a_sink_with_no_ledger_backfills_every_new_call_at_once() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let old = calls.add(ROLEPLAY, ago(60));
    let recent = calls.add(ROLEPLAY, ago(5));
    let sink = Arc::new(OwnSink::default());
    let options = Options {
        sources: vec![CallSource::Roleplay],
        ..Options::default()
    };
    let report = run(&server, &sink, options).await;
    assert_eq!(report.outcome, Outcome::Clean, "{report:#?}");
    assert_eq!(report.totals.backfilled, 2);
    assert_eq!(report.totals.recovered, 0);
    assert_eq!(report.totals.awaiting, 0);
    assert_eq!(sink.held(), ids(&[&old, &recent]));
}
