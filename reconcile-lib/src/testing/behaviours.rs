//! The behaviours of the conformance suite, each an async function over any sink that panics
//! when the sink does otherwise.

use std::time::Duration;

use svc_client::{CallSource, RawCallDetail};

use super::calls::{at, batch, detail, id, no_ledger, row_of};
use crate::{
    Arrival, Batch, BatchContext, CallFailure, Delivered, LockError, Sink, Stored, WindowEnd,
};

/// A new sink holds no call and no watermark.
///
/// # Panics
/// When the sink does otherwise, or fails.
pub async fn a_new_sink_knows_no_call_and_has_no_watermark<S: Sink>(sink: S) {
    assert_eq!(
        sink.watermark(&CallSource::Roleplay)
            .await
            .expect("watermark"),
        None
    );
    let known = sink.known_calls(&[id("svc_call_a")]).await.expect("known");
    assert!(known.is_empty(), "{known:?}");
}

/// New calls are stored once (`Stored::New`), then known by their `scoredAt`; the same detail
/// again is `Stored::Unchanged`.
///
/// # Panics
/// When the sink does otherwise, or fails.
pub async fn new_calls_are_stored_once_and_known_by_their_scored_at<S: Sink>(sink: S) {
    let a = detail(
        "svc_call_a",
        "2026-01-15T10:00:00.000Z",
        "2026-01-15T10:00:00.000Z",
        80,
    );
    let b = detail(
        "svc_call_b",
        "2026-01-15T11:00:00.000Z",
        "2026-01-15T11:00:00.000Z",
        70,
    );
    let stored = sink
        .store_batch(batch(vec![a.clone(), b], no_ledger()))
        .await
        .expect("store");
    assert_eq!(stored, vec![Stored::New(Arrival::Backfill); 2]);
    let known = sink
        .known_calls(&[id("svc_call_a"), id("svc_call_b"), id("svc_call_c")])
        .await
        .expect("known");
    assert_eq!(known.len(), 2);
    let a_known = &known[&id("svc_call_a")];
    assert_eq!(
        a_known.scored_at.as_deref(),
        Some("2026-01-15T10:00:00.000Z")
    );
    assert!(a_known.has_row);
    let again = sink
        .store_batch(batch(vec![a], no_ledger()))
        .await
        .expect("again");
    assert_eq!(
        again,
        vec![Stored::Unchanged],
        "the same detail twice changes nothing"
    );
}

/// A changed score is `Stored::Changed` (a silent change); a detail older than the one held
/// (by `updatedAt`) is `Stored::Unchanged` and never replaces it.
///
/// # Panics
/// When the sink does otherwise, or fails.
pub async fn a_changed_score_is_a_silent_change_and_an_older_detail_never_replaces_a_newer<
    S: Sink,
>(
    sink: S,
) {
    let first = detail(
        "svc_call_a",
        "2026-01-15T10:00:00.000Z",
        "2026-01-15T10:00:00.000Z",
        80,
    );
    let rescored = detail(
        "svc_call_a",
        "2026-01-16T09:00:00.000Z",
        "2026-01-16T09:00:00.000Z",
        60,
    );
    sink.store_batch(batch(vec![first.clone()], no_ledger()))
        .await
        .expect("first");
    let changed = sink
        .store_batch(batch(vec![rescored], no_ledger()))
        .await
        .expect("rescored");
    assert_eq!(changed, vec![Stored::Changed]);
    let late = sink
        .store_batch(batch(vec![first], no_ledger()))
        .await
        .expect("late read");
    assert_eq!(
        late,
        vec![Stored::Unchanged],
        "an older version is not a change"
    );
    let known = sink.known_calls(&[id("svc_call_a")]).await.expect("known");
    assert_eq!(
        known[&id("svc_call_a")].scored_at.as_deref(),
        Some("2026-01-16T09:00:00.000Z"),
        "the newer version stays"
    );
}

/// Only a complete window moves a source's watermark, and each source has its own.
///
/// # Panics
/// When the sink does otherwise, or fails.
pub async fn only_a_complete_window_moves_the_watermark<S: Sink>(sink: S) {
    let source = CallSource::Roleplay;
    let run_at = at("2026-01-20T00:00:00Z");
    sink.record_window(
        &source,
        None,
        run_at,
        WindowEnd::Complete(Some(at("2026-01-19T00:00:00Z"))),
    )
    .await
    .expect("complete");
    assert_eq!(
        sink.watermark(&source).await.expect("watermark"),
        Some(at("2026-01-19T00:00:00Z"))
    );
    sink.record_window(
        &source,
        None,
        run_at,
        WindowEnd::Stopped("the service kept failing"),
    )
    .await
    .expect("stopped");
    sink.record_window(&source, None, run_at, WindowEnd::Complete(None))
        .await
        .expect("complete, no move");
    assert_eq!(
        sink.watermark(&source).await.expect("watermark"),
        Some(at("2026-01-19T00:00:00Z")),
        "a stopped pass, or one that may not advance, leaves it"
    );
    assert_eq!(
        sink.watermark(&CallSource::RealCall)
            .await
            .expect("other source"),
        None,
        "watermarks are per source"
    );
}

/// A kept failure is handed back by later runs (not the one that recorded it), per source,
/// until stored or out of attempts. Group `kept_failures`.
///
/// # Panics
/// When the sink does otherwise, or fails.
pub async fn a_kept_failure_is_retried_by_later_runs_until_stored_or_out_of_attempts<S: Sink>(
    sink: S,
) {
    assert!(sink.keeps_failures());
    let run_1 = sink
        .start_run(at("2026-01-20T00:00:00Z"), &crate::Options::default())
        .await
        .expect("run 1");
    let failed = detail(
        "svc_call_f",
        "2026-01-15T10:00:00.000Z",
        "2026-01-15T10:00:00.000Z",
        50,
    );
    let mut context = no_ledger();
    context.run_id = run_1;
    let failure = Batch {
        calls: Vec::new(),
        failures: vec![CallFailure {
            row: row_of(&failed),
            error: "CALL_NOT_FOUND".into(),
            http_status: Some(404),
        }],
        rows_to_fill: Vec::new(),
        context,
    };
    sink.store_batch(failure.clone())
        .await
        .expect("record the failure");
    let source = CallSource::Roleplay;
    let same_run = sink
        .failures_to_retry(&source, 5, run_1)
        .await
        .expect("same run");
    assert!(same_run.is_empty(), "not again in the run that recorded it");
    let run_2 = sink
        .start_run(at("2026-01-20T01:00:00Z"), &crate::Options::default())
        .await
        .expect("run 2");
    assert_ne!(run_1, run_2);
    let retry = sink
        .failures_to_retry(&source, 5, run_2)
        .await
        .expect("retry");
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0].row.id.as_str(), "svc_call_f");
    assert!(
        sink.failures_to_retry(&CallSource::RealCall, 5, run_2)
            .await
            .expect("other source")
            .is_empty()
    );
    assert!(
        sink.failures_to_retry(&source, 1, run_2)
            .await
            .expect("out of attempts")
            .is_empty(),
        "one attempt made, one allowed"
    );
    let mut stored = batch(vec![failed], no_ledger());
    stored.context.run_id = run_2;
    sink.store_batch(stored).await.expect("stored at last");
    assert!(
        sink.failures_to_retry(&source, 5, None)
            .await
            .expect("after")
            .is_empty(),
        "a stored call is no longer a failure"
    );
}

/// With a ledger, a call stored with no webhook is backfilled (scored before the ledger),
/// recovered (scored long ago) or awaiting (recent), and an awaiting one is settled as
/// recovered once, per source. Group `ledger`.
///
/// # Panics
/// When the sink does otherwise, or fails.
pub async fn with_a_ledger_a_call_without_webhook_awaits_then_is_recovered<S: Sink>(sink: S) {
    let context = BatchContext {
        run_id: None,
        now: at("2026-01-20T00:00:00Z"),
        ledger_since: Some(at("2026-01-10T00:00:00Z")),
        missed_before: at("2026-01-19T23:30:00Z"),
    };
    let history = detail(
        "svc_call_h",
        "2026-01-05T10:00:00.000Z",
        "2026-01-05T10:00:00.000Z",
        80,
    );
    let missed = detail(
        "svc_call_m",
        "2026-01-15T10:00:00.000Z",
        "2026-01-15T10:00:00.000Z",
        80,
    );
    let recent = detail(
        "svc_call_r",
        "2026-01-19T23:50:00.000Z",
        "2026-01-19T23:50:00.000Z",
        80,
    );
    let mut run = batch(vec![history, missed, recent], context);
    run.context.run_id = sink
        .start_run(context.now, &crate::Options::default())
        .await
        .expect("run");
    let stored = sink.store_batch(run.clone()).await.expect("store");
    assert_eq!(
        stored,
        vec![
            Stored::New(Arrival::Backfill),
            Stored::New(Arrival::Recovered),
            Stored::New(Arrival::Awaiting),
        ]
    );
    let counts = |n: u64| vec![(CallSource::Roleplay, n), (CallSource::RealCall, 0)];
    let both = [CallSource::Roleplay, CallSource::RealCall];
    assert_eq!(
        sink.awaiting(&both).await.expect("awaiting"),
        counts(1),
        "the recent call awaits its webhook"
    );
    let later = at("2026-01-21T00:00:00Z");
    let recovered = sink
        .settle_awaiting(later, run.context.run_id, later, &[CallSource::RealCall])
        .await
        .expect("settle, other source");
    assert!(
        recovered.is_empty(),
        "a run over another source leaves them"
    );
    let recovered = sink
        .settle_awaiting(later, run.context.run_id, later, &[CallSource::Roleplay])
        .await
        .expect("settle");
    assert_eq!(recovered, vec![(id("svc_call_r"), CallSource::Roleplay)]);
    let again = sink
        .settle_awaiting(later, run.context.run_id, later, &[CallSource::Roleplay])
        .await
        .expect("settle again");
    assert!(again.is_empty(), "recovered once");
    assert_eq!(
        sink.awaiting(&both).await.expect("awaiting"),
        counts(0),
        "settled: nothing awaits"
    );
}

/// A call is new once, whichever path (its webhook or reconcile) brings it first, and the
/// inbox handing an event over twice changes nothing.
///
/// # Panics
/// When the sink does otherwise, or fails.
pub async fn a_call_is_new_once_whichever_path_brings_it_first<S: Sink>(sink: S) {
    let a = detail(
        "svc_call_a",
        "2026-01-15T10:00:00.000Z",
        "2026-01-15T10:00:00.000Z",
        80,
    );
    let b = detail(
        "svc_call_b",
        "2026-01-15T11:00:00.000Z",
        "2026-01-15T11:00:00.000Z",
        70,
    );
    let delivered = |webhook_id: &str, detail: &RawCallDetail| {
        let event = svc_contract::CallScored::scored(
            detail.detail.row.id.as_str(),
            svc_contract::CallSource::Roleplay,
            "svc_agent_01JH0000000000000000000000",
            "svc_agency_01JH0000000000000000000000",
            "2026-01-15T10:00:00.000Z",
            "req_01JH0000000000000000000000",
        );
        let body: std::sync::Arc<[u8]> = serde_json::to_vec(&event).expect("JSON").into();
        let received = at("2026-01-15T10:00:05Z");
        Delivered::new(webhook_id, event, body, received, detail.clone())
    };
    let first = sink
        .store_delivered(delivered("wh_a", &a))
        .await
        .expect("delivered");
    assert!(matches!(first, Stored::New(_)), "{first:?}");
    let again = sink
        .store_delivered(delivered("wh_a", &a))
        .await
        .expect("delivered again");
    assert_eq!(
        again,
        Stored::Unchanged,
        "the inbox handed the event over twice"
    );
    let known = sink.known_calls(&[id("svc_call_a")]).await.expect("known");
    assert_eq!(
        known
            .get(&id("svc_call_a"))
            .and_then(|k| k.scored_at.clone()),
        Some("2026-01-15T10:00:00.000Z".to_owned())
    );
    let listed = sink
        .store_batch(batch(vec![a, b.clone()], no_ledger()))
        .await
        .expect("reconcile's batch");
    assert_eq!(listed[0], Stored::Unchanged, "reconcile after the webhook");
    assert!(matches!(listed[1], Stored::New(_)), "{listed:?}");
    let late = sink
        .store_delivered(delivered("wh_b", &b))
        .await
        .expect("a late webhook");
    assert_eq!(late, Stored::Unchanged, "the webhook after reconcile");
}

/// A second run cannot take the lock while the first holds it, and can once it is dropped.
/// Group `lock`.
///
/// # Panics
/// When the sink does otherwise, or fails.
pub async fn a_second_run_cannot_take_the_lock_while_the_first_holds_it<S: Sink>(sink: S) {
    let first = sink.lock(Duration::ZERO).await.expect("first lock");
    match sink.lock(Duration::from_millis(50)).await {
        Err(LockError::Busy(_)) => {}
        Err(other) => panic!("expected busy, got {other:?}"),
        Ok(_) => panic!("two runs held the lock"),
    }
    drop(first);
    sink.lock(Duration::ZERO).await.expect("free again");
}
