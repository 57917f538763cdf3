//! `call.scored` for real calls (contract section 6): sent for both outcomes through the
//! outbox, signed, with `source: real_call` and the agent's and agency's ids, never a score
//! or transcript.

use std::time::Duration;

use serde_json::{Value, json};

use super::support::*;

#[tokio::test]
async fn both_outcomes_send_a_signed_call_scored_with_source_real_call_and_the_ids() {
    let mut world = World::new().await;
    let on = world.agency.clone();
    let by_npn = world
        .agent(
            "ag-1",
            json!({ "firstName": "Nia", "lastName": "Moss", "npn": "24681357" }),
        )
        .await;
    let scored = world.stored(record("d-scored", &on)).await;
    let failed = world
        .stored(with(
            record("d-silent", &on),
            json!({ "transcript": turns(NO_REP_TURN) }),
        ))
        .await;
    let unnamed = world
        .stored(with(
            record("d-npn", &on),
            json!({ "rep": { "npn": "2468-1357" } }),
        ))
        .await;

    let received = world.received(3).await;
    let by_call = |call_id: &str| -> (Value, String) {
        let delivery = received
            .iter()
            .find(|r| r.json()["callId"] == call_id)
            .unwrap_or_else(|| panic!("no delivery for {call_id}"));
        assert_eq!(delivery.headers["content-type"], "application/json");
        (delivery.json(), delivery.webhook_id())
    };
    let common = [
        "agencyId",
        "agentId",
        "callId",
        "event",
        "occurredAt",
        "platformAgencyId",
        "platformAgentId",
        "requestId",
        "source",
        "success",
    ];

    let (body, scored_hook) = by_call(&scored);
    assert_eq!(keys(&body), common, "no score, no transcript: {body}");
    assert_eq!(body["event"], "call.scored");
    assert_eq!(body["success"], true);
    assert_eq!(body["source"], "real_call");
    assert_eq!(body["agentId"], world.agent["id"]);
    assert_eq!(body["platformAgentId"], "rep-1");
    assert_eq!(body["agencyId"], on.as_str());
    assert_eq!(body["platformAgencyId"], "ag-1");
    assert_eq!(body["occurredAt"], NOW);
    assert!(
        body["requestId"]
            .as_str()
            .is_some_and(|r| r.starts_with("req_"))
    );

    let (body, failed_hook) = by_call(&failed);
    let mut with_reason: Vec<&str> = common.to_vec();
    with_reason.extend(["reason", "reasonMessage"]);
    with_reason.sort_unstable();
    assert_eq!(keys(&body), with_reason, "{body}");
    assert_eq!(body["success"], false);
    assert_eq!(body["source"], "real_call");
    assert_eq!(body["reason"], "SCORING_INCOMPLETE");
    assert_eq!(body["agentId"], world.agent["id"]);
    assert_eq!(body["agencyId"], on.as_str());

    let (body, unnamed_hook) = by_call(&unnamed);
    assert_eq!(body["agentId"], by_npn["id"]);
    assert_eq!(body["platformAgentId"], Value::Null, "never registered");
    assert_eq!(body["platformAgencyId"], "ag-1");

    let hooks = [scored_hook, failed_hook, unnamed_hook];
    assert!(hooks.iter().all(|id| id.starts_with("wh_")));
    assert!(hooks[0] != hooks[1] && hooks[1] != hooks[2] && hooks[0] != hooks[2]);
    world.sink.assert_silent(Duration::from_millis(300)).await;
}
