//! A re-disposition (contract section 3): the call is scored again with its new disposition,
//! so `score` (with `compliancePercent` and `complianceScorecard`), `scoredAt` and `updatedAt`
//! change, and no `call.scored` is sent.

use std::time::Duration;

use svc_service::realcall::redisposition::{RedispositionError, redisposition};
use svc_service::scoring::real_call::Disposition;

use super::support::*;

#[tokio::test]
async fn a_redisposition_rescores_the_call_moves_its_times_and_sends_no_webhook() {
    let mut world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    world.received(1).await;
    let before = world.detail(&call_id).await.expect(200);
    assert!(before["score"].get("complianceScorecard").is_some());
    assert_eq!(before["score"]["compliancePercent"], 62);

    world.app.clock.advance(chrono::Duration::hours(2));
    let done = redisposition(
        &world.app.db,
        &world.app.clock,
        &world.tenant.id,
        &call_id,
        Disposition::NoSale,
    )
    .await
    .expect("redisposition");
    assert_eq!(done.disposition_before, "sale");
    assert_eq!(done.score_before, before["score"]);

    let after = world.detail(&call_id).await.expect(200);
    assert_eq!(
        done.score, after["score"],
        "what the operator sees is what is read"
    );
    let overall = |detail: &serde_json::Value| detail["score"]["overallScore"].as_u64();
    assert!(overall(&after) < overall(&before), "{before} -> {after}");
    assert!(overall(&after).is_some_and(|s| (60..=100).contains(&s)));
    assert_eq!(after["score"]["compliancePercent"], 60);
    assert_eq!(after["score"].get("complianceScorecard"), None);
    assert_eq!(after["scoredAt"], "2026-01-15T14:00:00.000Z");
    assert_eq!(after["updatedAt"], "2026-01-15T14:00:00.000Z");
    assert_eq!(after["createdAt"], before["createdAt"]);
    assert_eq!(after["transcript"], before["transcript"]);
    let row = world.list(MORNING, "").await.remove(0);
    assert_eq!(row["scoredAt"], after["scoredAt"], "the list row moves too");

    // Nothing queued, nothing sent.
    assert_eq!(world.deliveries().await.len(), 1);
    assert_eq!(world.deliver_due().await, 0);
    world.sink.assert_silent(Duration::from_millis(500)).await;

    // Back to a sale: the same transcript scores as it did, scorecard included.
    world.app.clock.advance(chrono::Duration::hours(1));
    redisposition(
        &world.app.db,
        &world.app.clock,
        &world.tenant.id,
        &call_id,
        Disposition::Sale,
    )
    .await
    .expect("redisposition");
    let again = world.detail(&call_id).await.expect(200);
    assert_eq!(again["score"], before["score"]);
    assert_eq!(again["updatedAt"], "2026-01-15T15:00:00.000Z");
    assert_eq!(world.deliveries().await.len(), 1);
}

#[tokio::test]
async fn another_tenants_call_cannot_be_redispositioned() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let other = world.app.tenant().await;
    let refused = redisposition(
        &world.app.db,
        &world.app.clock,
        &other.id,
        &call_id,
        Disposition::NoSale,
    )
    .await;
    assert!(
        matches!(refused, Err(RedispositionError::NotFound(_))),
        "{refused:?}"
    );
    let detail = world.detail(&call_id).await.expect(200);
    assert_eq!(detail["score"]["compliancePercent"], 62, "unchanged");
}
