//! Real-call attribution (contract section 2): inside the record's agency only, handles in
//! order (NPN by digits, platformAgentId, email with the name check, full name); a rep that is
//! not found is dropped `unregistered_rep`; a third-party dialer's agent ids are never tried.

use serde_json::{Value, json};
use svc_service::db::Rubric;
use svc_service::realcall::ingest::Dropped;

use super::support::*;

/// Ingests one record per `rep` into `agency`; returns their outcomes.
async fn ingest_reps(
    world: &World,
    agency: &str,
    reps: &[Value],
) -> Vec<svc_service::realcall::ingest::RecordOutcome> {
    let records = reps
        .iter()
        .enumerate()
        .map(|(i, rep)| with(record(&format!("d-{i}"), agency), json!({ "rep": rep })))
        .collect();
    world.ingest(records).await
}

#[tokio::test]
async fn each_handle_attributes_the_call_to_its_agent_inside_the_agency() {
    let world = World::new().await;
    let ada = world
        .agent(
            "ag-1",
            json!({ "firstName": "Ada", "lastName": "Lovelace", "npn": "1234567",
                    "platformAgentId": "rep-ada", "email": "ada@example.com" }),
        )
        .await;
    let grace = world
        .agent(
            "ag-1",
            json!({ "firstName": "Grace", "lastName": "Hopper", "platformAgentId": "rep-grace",
                    "email": "grace@example.com" }),
        )
        .await;
    let katherine = world
        .agent(
            "ag-1",
            json!({ "firstName": "Katherine", "lastName": "Johnson", "email": "kj@example.com" }),
        )
        .await;
    let alan = world
        .agent(
            "ag-1",
            json!({ "firstName": "Alan", "lastName": "Turing", "email": "alan@example.com" }),
        )
        .await;
    let cases = [
        ("NPN, digits compared", json!({ "npn": "123-4567" }), &ada),
        ("platformAgentId", json!({ "agentId": "rep-grace" }), &grace),
        (
            "NPN is tried before platformAgentId",
            json!({ "npn": "1234567", "agentId": "rep-grace" }),
            &ada,
        ),
        (
            "email, any case, with the registered last name in the dialer's name",
            json!({ "email": "KJ@Example.com", "name": "Kathy Johnson" }),
            &katherine,
        ),
        (
            "full name, case and spacing aside",
            json!({ "name": "  alan   TURING " }),
            &alan,
        ),
    ];
    let reps: Vec<Value> = cases.iter().map(|(_, rep, _)| rep.clone()).collect();
    let outcomes = ingest_reps(&world, &world.agency, &reps).await;
    for ((what, _, agent), outcome) in cases.iter().zip(&outcomes) {
        let detail = world.detail(&stored_id(outcome)).await.expect(200);
        assert_eq!(detail["agentId"], agent["id"], "{what}");
        assert_eq!(
            detail["platformAgentId"], agent["platformAgentId"],
            "{what}"
        );
        assert_eq!(detail["agencyId"], world.agency.as_str(), "{what}");
        assert_eq!(detail["platformAgencyId"], "ag-1", "{what}");
    }
}

#[tokio::test]
async fn a_rep_not_found_inside_the_agency_is_dropped_unregistered() {
    let world = World::new().await;
    world
        .agent(
            "ag-1",
            json!({ "firstName": "Grace", "lastName": "Hopper", "email": "grace@example.com" }),
        )
        .await;
    for email in ["kim1@example.com", "kim2@example.com"] {
        world
            .agent(
                "ag-1",
                json!({ "firstName": "Kim", "lastName": "Park", "email": email }),
            )
            .await;
    }
    let elsewhere = world.agency("ag-2", Some((false, Rubric::Default))).await;
    world
        .agent(
            "ag-2",
            json!({ "firstName": "Bob", "lastName": "Other", "npn": "5555555",
                    "platformAgentId": "rep-bob", "email": "bob@example.com" }),
        )
        .await;
    let reps = [
        // The email is registered, but neither "Grace" nor "Hopper" is in the dialer's name.
        json!({ "email": "grace@example.com", "name": "G. Smith" }),
        json!({ "email": "grace@example.com", "name": "Gracie Hopperton" }),
        // Registered in another agency of the tenant, named by every handle.
        json!({ "npn": "5555555", "agentId": "rep-bob", "email": "bob@example.com",
                "name": "Bob Other" }),
        json!({ "npn": "9999999", "agentId": "rep-404", "email": "nobody@example.com",
                "name": "Nobody Here" }),
        json!({ "name": "Kim Park" }),
        json!({}),
    ];
    let outcomes = ingest_reps(&world, &world.agency, &reps).await;
    for (rep, outcome) in reps.iter().zip(&outcomes) {
        assert_eq!(dropped(outcome), Dropped::UnregisteredRep, "{rep}");
    }
    assert!(world.listed_ids().await.is_empty());
    assert!(world.deliveries().await.is_empty());
    assert!(world.archived_files().is_empty());
    // In its own agency, Bob is found.
    let bob = ingest_reps(&world, &elsewhere, &reps[2..3]).await;
    stored_id(&bob[0]);
}

#[tokio::test]
async fn a_third_party_dialers_agent_ids_are_never_tried() {
    let world = World::new().await;
    let third_party = world.agency("ag-3p", Some((true, Rubric::Default))).await;
    let dana = world
        .agent(
            "ag-3p",
            json!({ "firstName": "Dana", "lastName": "Scully", "npn": "7777777",
                    "platformAgentId": "rep-dana", "email": "dana@example.com" }),
        )
        .await;
    let reps = [
        json!({ "agentId": "rep-dana" }),
        json!({ "agentId": "rep-dana", "name": "D. Smith" }),
        json!({ "agentId": "rep-dana", "npn": "777-7777" }),
        json!({ "agentId": "rep-dana", "email": "dana@example.com", "name": "Dana S" }),
    ];
    let outcomes = ingest_reps(&world, &third_party, &reps).await;
    assert_eq!(dropped(&outcomes[0]), Dropped::UnregisteredRep);
    assert_eq!(dropped(&outcomes[1]), Dropped::UnregisteredRep);
    for outcome in &outcomes[2..] {
        let detail = world.detail(&stored_id(outcome)).await.expect(200);
        assert_eq!(detail["agentId"], dana["id"]);
        assert_eq!(detail["platformAgentId"], "rep-dana");
    }
}
