//! `svc-cli reconcile`, `webhook serve` and `store export` end to end against the real service:
//! lost webhooks recovered, signed deliveries recorded once, silent re-dispositions of real calls
//! found, and the export equal to what the service serves.

mod clock_skew;
pub(crate) mod helpers;
mod own_table;
mod webhooks;

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode};
use serde_json::{Value, json};
use svc_reconcile::Options;

use helpers::*;

const DAY_MS: i64 = 86_400_000;

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

/// The fields of a call whose change the store's change log keeps.
fn tracked(detail: &Value) -> Value {
    json!({
        "score": detail["score"],
        "scoredAt": detail["scoredAt"],
        "updatedAt": detail["updatedAt"],
    })
}

#[tokio::test]
async fn webhooks_lost_on_both_attempts_are_recovered_once_and_a_rerun_finds_nothing() {
    let harness = Harness::start().await;
    let proxy = harness.webhooks().await;
    register_rep(&harness.client).await;
    let mut delivered = Vec::new();
    for _ in 0..2 {
        delivered.push(practice_call(&harness).await);
    }
    wait_recorded(&harness.store_path, &delivered).await;

    proxy.set_down(true);
    let mut lost = Vec::new();
    for _ in 0..2 {
        lost.push(practice_call(&harness).await);
    }
    for id in &lost {
        wait_delivery(&harness.service, id, "failed", 2).await;
    }
    proxy.set_down(false);
    delivered.push(practice_call(&harness).await);
    wait_recorded(&harness.store_path, &delivered).await;
    let ledger_calls: Vec<String> = ledger(&harness.store_path)
        .await
        .into_iter()
        .map(|row| row.call_id)
        .collect();
    assert_eq!(sorted(ledger_calls), sorted(delivered.clone()));

    let report = harness.reconcile(&options()).await;
    assert_eq!(report.outcome.as_str(), "ok", "{report:#?}");
    assert_eq!(report.exit_code, 3, "missed deliveries were recovered");
    assert_eq!(report.totals.recovered, lost.len() as u64, "{report:#?}");
    assert_eq!(
        sorted(
            report
                .recovered_call_ids
                .iter()
                .map(|id| id.to_string())
                .collect()
        ),
        sorted(lost.clone())
    );
    assert_eq!(report.totals.new, 5);
    assert_eq!(report.totals.backfilled, 0);
    assert_eq!(report.totals.failed, 0);

    let listed = sorted(listed_ids(&harness.service, "roleplay").await);
    assert_eq!(listed, sorted([delivered.clone(), lost.clone()].concat()));
    let stored = stored_calls(&harness.store_path).await;
    let stored_ids: Vec<String> = stored.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(stored_ids, listed, "every scored call, each once");
    for (id, delivery) in &stored {
        let expected = if lost.contains(id) {
            "recovered"
        } else {
            "webhook"
        };
        assert_eq!(delivery, expected, "call {id}");
    }

    let rerun = harness.reconcile(&options()).await;
    assert_eq!(rerun.exit_code, 0, "{rerun:#?}");
    assert_eq!(rerun.totals.recovered, 0);
    assert!(rerun.recovered_call_ids.is_empty());
    assert_eq!(rerun.totals.details_fetched, 0, "no detail read again");
    assert_eq!(rerun.requests, rerun.totals.pages, "list pages only");
    assert_eq!(rerun.totals.new, 0);
    assert_eq!(rerun.totals.known, 5);
    assert_eq!(stored_calls(&harness.store_path).await, stored);
    assert_export_matches_service(&harness).await;
}

/// A recovered call is one stored by reconcile with no verified webhook in the
/// store. A webhook lost while `webhook serve` was already receiving for the store is a missed
/// delivery even when it was lost before the receiver's first successful delivery.
#[tokio::test]
async fn a_webhook_lost_before_the_receivers_first_delivery_is_still_recovered() {
    let harness = Harness::start().await;
    let proxy = harness.webhooks().await;
    register_rep(&harness.client).await;
    proxy.set_down(true);
    let lost = practice_call(&harness).await;
    wait_delivery(&harness.service, &lost, "failed", 2).await;
    proxy.set_down(false);
    let delivered = practice_call(&harness).await;
    wait_recorded(&harness.store_path, std::slice::from_ref(&delivered)).await;

    let report = harness.reconcile(&options()).await;
    assert_eq!(report.recovered_call_ids, vec![lost.clone()], "{report:#?}");
    assert_eq!(report.totals.backfilled, 0, "{report:#?}");
    assert_eq!(report.exit_code, 3, "cron must hear of the lost webhook");
}

#[tokio::test]
async fn webhook_serve_records_each_signed_delivery_once_and_refuses_a_bad_signature() {
    let harness = Harness::start().await;
    let proxy = harness.webhooks().await;
    register_rep(&harness.client).await;
    let calls = vec![practice_call(&harness).await, practice_call(&harness).await];
    for call in &calls {
        // The service logs the attempt once the proxy has answered (and captured it).
        wait_delivery(&harness.service, call, "delivered", 1).await;
    }
    wait_recorded(&harness.store_path, &calls).await;

    let forwarded = proxy.forwarded();
    assert_eq!(forwarded.len(), calls.len(), "one delivery per call");
    let recorded = ledger(&harness.store_path).await;
    assert_eq!(recorded.len(), calls.len());
    for delivery in &forwarded {
        assert_eq!(delivery.status, StatusCode::OK);
        let row = recorded
            .iter()
            .find(|row| row.webhook_id == delivery.webhook_id())
            .expect("the delivery is in the ledger");
        assert_eq!(row.call_id, delivery.call_id());
        assert!(row.success);
        assert_eq!(row.body.as_bytes(), &delivery.body[..], "the raw body");
    }

    let first = &forwarded[0];
    let again = proxy.send(&first.headers, &first.body).await;
    assert_eq!(again, StatusCode::OK, "a duplicate is acknowledged");
    assert_eq!(
        inbox_rows(&harness.store_path, &first.webhook_id()).await,
        1
    );
    assert_eq!(ledger(&harness.store_path).await, recorded, "not twice");

    // A genuine body signed with another secret, and a forged body under a genuine signature.
    let mut wrong_secret = first.headers.clone();
    let now = chrono::Utc::now().timestamp();
    let signature = svc_contract::sign("whsec_not_the_tenants_secret", now, &first.body);
    wrong_secret.insert(
        "x-service-signature",
        HeaderValue::from_str(&signature).expect("header"),
    );
    wrong_secret.insert(
        "x-service-webhook-id",
        HeaderValue::from_static("wh_forged_secret"),
    );
    let mut forged_body = first.headers.clone();
    forged_body.insert(
        "x-service-webhook-id",
        HeaderValue::from_static("wh_forged_body"),
    );
    let body = String::from_utf8_lossy(&first.body).replace(&first.call_id(), "svc_call_forged");
    for (headers, body) in [
        (&wrong_secret, first.body.to_vec()),
        (&forged_body, body.into_bytes()),
    ] {
        let status = proxy.send(headers, &body).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let id = headers["x-service-webhook-id"].to_str().expect("id");
        assert_eq!(inbox_rows(&harness.store_path, id).await, 0, "{id}");
    }
    assert_eq!(
        ledger(&harness.store_path).await,
        recorded,
        "nothing recorded"
    );
}

#[tokio::test]
async fn the_services_own_retry_of_a_delivery_already_received_is_recorded_once() {
    let harness = Harness::start().await;
    let proxy = harness.webhooks().await;
    register_rep(&harness.client).await;
    proxy.set_lose_answers(true);
    let call = practice_call(&harness).await;
    wait_delivery(&harness.service, &call, "failed", 2).await;

    let attempts = proxy.forwarded();
    assert_eq!(attempts.len(), 2, "both attempts reached the receiver");
    assert_eq!(attempts[0].webhook_id(), attempts[1].webhook_id());
    assert_ne!(
        attempts[0].headers["x-service-signature"], attempts[1].headers["x-service-signature"],
        "the retry is signed afresh"
    );
    assert!(attempts.iter().all(|a| a.status == StatusCode::OK));
    wait_recorded(&harness.store_path, std::slice::from_ref(&call)).await;
    let recorded = ledger(&harness.store_path).await;
    assert_eq!(recorded.len(), 1, "{recorded:#?}");
    assert_eq!(recorded[0].webhook_id, attempts[0].webhook_id());
    assert_eq!(
        inbox_rows(&harness.store_path, &attempts[0].webhook_id()).await,
        1
    );

    let report = harness.reconcile(&options()).await;
    assert_eq!(report.exit_code, 0, "delivered, not recovered: {report:#?}");
    assert_eq!(report.totals.recovered, 0);
}

/// Seeds three real calls (started three days, two days and five hours ago) and reconciles
/// them into the store; returns the harness and the ids, oldest first.
async fn reconciled_real_calls() -> (Harness, Vec<String>) {
    let harness = Harness::start().await;
    let agent = register_rep(&harness.client).await;
    let now = chrono::Utc::now().timestamp_millis();
    let calls: Vec<_> = [3 * DAY_MS, 2 * DAY_MS, 5 * 3_600_000]
        .into_iter()
        .map(|ago| seeded_call(&harness.service, &agent, "real_call", now - ago, 72))
        .collect();
    let ids = calls.iter().map(|c| c.id.clone()).collect();
    harness
        .service
        .db
        .insert_scored_calls(calls)
        .await
        .expect("seed real calls");
    let first = harness.reconcile(&options()).await;
    assert_eq!(first.exit_code, 0, "{first:#?}");
    assert_eq!(first.totals.new, 3);
    assert_eq!(first.totals.backfilled, 3, "no ledger yet: history");
    (harness, ids)
}

/// The unix ms of a call's `startedAt`.
fn started_ms(detail: &Value) -> i64 {
    let text = detail["startedAt"].as_str().expect("startedAt");
    chrono::DateTime::parse_from_rfc3339(text)
        .expect("a timestamp")
        .timestamp_millis()
}

#[tokio::test]
async fn a_redispositioned_real_call_alone_is_read_again_and_logged_as_a_silent_change() {
    let (harness, ids) = reconciled_real_calls().await;
    let moved = &ids[0];
    let before = detail(&harness.service, moved).await;
    let at = started_ms(&before) + DAY_MS;
    redisposition(&harness.service, moved, &real_score(91, 100.0), at).await;
    let after = detail(&harness.service, moved).await;
    assert_ne!(after["scoredAt"], before["scoredAt"]);

    let report = harness.reconcile(&options()).await;
    assert_eq!(report.exit_code, 3, "{report:#?}");
    assert_eq!(report.totals.changed_silently, 1);
    assert_eq!(report.changed_call_ids, vec![moved.clone()]);
    assert_eq!(
        report.totals.details_fetched, 1,
        "only the moved call's detail"
    );
    assert_eq!(report.totals.new, 0);
    assert_eq!(report.totals.recovered, 0);
    let changes = score_changes(&harness.store_path, moved).await;
    assert_eq!(changes, vec![(tracked(&before), tracked(&after))]);
    let stored = harness.store.call_detail(moved).expect("read the store");
    assert_eq!(stored, Some(detail_body(&harness.service, moved).await));
}

#[tokio::test]
async fn with_refresh_off_a_redisposition_behind_the_watermark_and_overlap_goes_unseen() {
    let (harness, ids) = reconciled_real_calls().await;
    let moved = &ids[0];
    let before = detail(&harness.service, moved).await;
    redisposition(
        &harness.service,
        moved,
        &real_score(64, 80.0),
        started_ms(&before) + DAY_MS,
    )
    .await;

    // Documented: without the refresh span a real call is listed by its start only within the
    // overlap (a day) before the watermark, so an older call's re-disposition is not listed.
    let no_refresh = Options {
        refresh_real: Duration::ZERO,
        ..options()
    };
    let report = harness.reconcile(&no_refresh).await;
    assert_eq!(report.exit_code, 0, "{report:#?}");
    assert_eq!(report.totals.changed_silently, 0);
    assert_eq!(report.totals.details_fetched, 0);
    let real = report
        .sources
        .iter()
        .find(|s| s.source.as_str() == "real_call")
        .expect("the real-call source");
    let from = real.from;
    assert!(from.timestamp_millis() > started_ms(&before), "{real:#?}");
    assert_eq!(real.counts.listed, 1, "only the call inside the overlap");
    assert!(score_changes(&harness.store_path, moved).await.is_empty());
    let stored = harness.store.call_detail(moved).expect("read the store");
    assert_eq!(
        stored.map(|text| serde_json::from_str::<Value>(&text).expect("JSON")),
        Some(before.clone()),
        "the store still holds the first disposition"
    );

    let refreshed = harness.reconcile(&options()).await;
    assert_eq!(refreshed.exit_code, 3, "the refresh span finds it");
    assert_eq!(refreshed.changed_call_ids, vec![moved.clone()]);
}

#[tokio::test]
async fn store_export_holds_every_call_detail_exactly_as_the_service_serves_it() {
    let harness = Harness::start().await;
    let agent = register_rep(&harness.client).await;
    let now = chrono::Utc::now().timestamp_millis();
    let calls: Vec<_> = [
        ("roleplay", now - 4 * 3_600_000, 81),
        ("roleplay", now - 3_600_000, 67),
        ("real_call", now - 2 * DAY_MS, 88),
        ("real_call", now - 6 * 3_600_000, 0),
    ]
    .into_iter()
    .map(|(source, started, score)| seeded_call(&harness.service, &agent, source, started, score))
    .collect();
    let real = calls[2].clone();
    harness
        .service
        .db
        .insert_scored_calls(calls)
        .await
        .expect("seed calls");
    assert_eq!(harness.reconcile(&options()).await.exit_code, 0);
    assert_export_matches_service(&harness).await;

    // A re-disposition reaches the export with the next run.
    redisposition(
        &harness.service,
        &real.id,
        &real_score(95, 100.0),
        real.started_at + DAY_MS,
    )
    .await;
    assert_eq!(harness.reconcile(&options()).await.exit_code, 3);
    assert_export_matches_service(&harness).await;
}
