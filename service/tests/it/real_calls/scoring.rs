//! Scoring real calls as the tenant reads them: the 60-100 band (0 with fewer than two rep
//! turns), `compliancePercent` on every scored call, the compliance scorecard only on a
//! default-rubric health-plan sale (its shape and evidence), and a call with no rep turn stored
//! but never readable.

use serde_json::{Value, json};
use svc_service::db::Rubric;
use svc_service::realcall::ingest::Disposal;
use svc_service::realcall::redisposition::{RedispositionError, redisposition};
use svc_service::scoring::real_call::Disposition;

use super::support::*;

/// The score of the call stored from `record`, as GET /calls/{callId} shows it.
async fn score_of(world: &World, record: Value) -> Value {
    let call_id = world.stored(record).await;
    world.detail(&call_id).await.expect(200)["score"].clone()
}

#[tokio::test]
async fn a_real_call_scores_60_to_100_or_0_with_fewer_than_two_rep_turns() {
    let world = World::new().await;
    let on = world.agency.clone();
    let mut headlines = Vec::new();
    for disposition in ["sale", "callback", "no_sale", "not_interested"] {
        let record = with(
            record(&format!("d-{disposition}"), &on),
            json!({ "disposition": disposition }),
        );
        let score = score_of(&world, record).await;
        let overall = score["overallScore"].as_u64().expect("overallScore");
        assert!((60..=100).contains(&overall), "{disposition}: {score}");
        assert!(
            score["compliancePercent"].is_u64(),
            "{disposition}: {score}"
        );
        assert!(score["summary"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(score["feedback"].as_str().is_some_and(|s| !s.is_empty()));
        headlines.push(overall);
    }
    assert!(
        headlines.windows(2).all(|w| w[0] >= w[1]) && headlines[0] > headlines[3],
        "the disposition moves the headline: {headlines:?}"
    );

    let one_turn = with(
        record("d-one", &on),
        json!({ "transcript": turns(ONE_REP_TURN) }),
    );
    let score = score_of(&world, one_turn).await;
    assert_eq!(score["overallScore"], 0, "{score}");
    assert!(
        score["compliancePercent"]
            .as_u64()
            .is_some_and(|p| p <= 100),
        "still assessed for compliance: {score}"
    );
}

#[tokio::test]
async fn only_a_default_rubric_health_plan_sale_carries_a_compliance_scorecard() {
    let world = World::new().await;
    let on = world.agency.clone();
    let own = world.agency("ag-own", Some((false, Rubric::Own))).await;
    world
        .agent("ag-own", json!({ "platformAgentId": "rep-own" }))
        .await;
    let by_own_rep = json!({ "agentId": "rep-own" });
    // The SALE transcript passes 5 of the 8 scorecard checks, 3 of the rubric's 5 compliance
    // items, and 3 of the 4 that do not name a health plan.
    let cases = [
        ("default, health plan, sale", record("d-1", &on), 62, true),
        (
            "default, health plan, no sale",
            with(record("d-2", &on), json!({ "disposition": "no_sale" })),
            60,
            false,
        ),
        (
            "default, health plan, callback",
            with(record("d-3", &on), json!({ "disposition": "callback" })),
            60,
            false,
        ),
        (
            "default, other product, sale",
            with(record("d-4", &on), json!({ "productLine": "other" })),
            75,
            false,
        ),
        (
            "own rubric, health plan, sale",
            with(record("d-5", &own), json!({ "rep": by_own_rep })),
            60,
            false,
        ),
        (
            "own rubric, other product, sale",
            with(
                record("d-6", &own),
                json!({ "rep": by_own_rep, "productLine": "other" }),
            ),
            75,
            false,
        ),
    ];
    for (what, record, percent, scorecard) in cases {
        let score = score_of(&world, record).await;
        assert_eq!(score["compliancePercent"], percent, "{what}: {score}");
        assert_eq!(
            score.get("complianceScorecard").is_some(),
            scorecard,
            "{what}: {score}"
        );
    }
}

#[tokio::test]
async fn the_scorecard_itemises_eight_checks_with_the_evidence_turn_indexes() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let detail = world.detail(&call_id).await.expect(200);
    let card = &detail["score"]["complianceScorecard"];
    assert_eq!(card["version"], 1);
    assert_eq!(card["rubric"], "health_plan_enrollment");
    assert_eq!(
        (card["passed"].clone(), card["total"].clone()),
        (json!(5), json!(8))
    );
    let checks = card["checks"].as_array().expect("checks");
    let expected = [
        ("recordingNotice", true, json!([1])),
        ("planDisclaimer", false, json!([])),
        ("licensedAgent", true, json!([1])),
        ("permission", true, json!([3])),
        // For this check the evidence is the turn that breaks it.
        ("noProhibitedClaims", false, json!([5])),
        ("doctorsReviewed", true, json!([3])),
        ("prescriptionsReviewed", false, json!([])),
        ("enrollmentConfirmed", true, json!([6])),
    ];
    assert_eq!(checks.len(), expected.len());
    let transcript = detail["transcript"].as_array().expect("transcript");
    for (check, (id, passed, evidence)) in checks.iter().zip(expected) {
        assert_eq!(
            keys(check),
            ["evidence", "id", "label", "passed"],
            "{check}"
        );
        assert_eq!(check["id"], id);
        assert_eq!(check["passed"], passed, "{check}");
        assert_eq!(check["evidence"], evidence, "{check}");
        assert!(check["label"].as_str().is_some_and(|l| !l.is_empty()));
        for index in check["evidence"].as_array().expect("evidence") {
            let turn = &transcript[index.as_u64().expect("index") as usize];
            assert_eq!(turn["role"], "agent", "{id} points at a rep turn");
        }
    }
    assert_eq!(detail["score"]["compliancePercent"], 5 * 100 / 8);
}

#[tokio::test]
async fn a_call_without_a_rep_turn_is_stored_not_scored_and_never_readable() {
    let mut world = World::new().await;
    let on = world.agency.clone();
    let blank_rep = [
        ("customer", "Hello?"),
        ("agent", "   "),
        ("customer", "Hello??"),
    ];
    let outcomes = world
        .ingest(vec![
            with(
                record("d-silent", &on),
                json!({ "transcript": turns(NO_REP_TURN) }),
            ),
            with(
                record("d-blank", &on),
                json!({ "transcript": turns(&blank_rep) }),
            ),
        ])
        .await;
    let mut ids = Vec::new();
    for outcome in &outcomes {
        match &outcome.disposal {
            Disposal::Stored {
                call_id,
                scored: false,
            } => ids.push(call_id.clone()),
            other => panic!("not stored unscored: {other:?}"),
        }
    }
    for delivery in world.received(2).await {
        let body = delivery.json();
        assert!(ids.iter().any(|id| body["callId"] == id.as_str()), "{body}");
        assert_eq!(body["success"], false);
        assert_eq!(body["reason"], "SCORING_INCOMPLETE");
        assert!(
            body["reasonMessage"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    for (call_id, dialer_id) in ids.iter().zip(["d-silent", "d-blank"]) {
        world
            .detail(call_id)
            .await
            .expect_error(404, "CALL_NOT_FOUND");
        let stored = world
            .app
            .db
            .dialer_call(&on, dialer_id)
            .await
            .expect("read");
        assert_eq!(stored.as_ref(), Some(call_id), "stored all the same");
        let rescored = redisposition(
            &world.app.db,
            &world.app.clock,
            &world.tenant.id,
            call_id,
            Disposition::Sale,
        )
        .await;
        assert!(
            matches!(rescored, Err(RedispositionError::NotScored(_))),
            "{rescored:?}"
        );
    }
    assert!(world.listed_ids().await.is_empty());
}
