//! Tenant isolation: another tenant's ids behave as unknown, and existence never leaks.

use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn two_tenants_probing_each_other_see_nothing_of_the_other() {
    let app = spawn_app().await;
    let a = app.tenant().await;
    let b = app.tenant().await;
    let agency_a = app.agency(&a, "ag-a").await;
    let agent_a = app
        .agent(
            &a,
            "ag-a",
            json!({ "email": "ann@a.example", "npn": "1111", "platformAgentId": "rep-a" }),
        )
        .await;
    let agency_id = agency_a["id"].as_str().unwrap_or_default();
    let agent_id = agent_a["id"].as_str().unwrap_or_default();

    // B's reads of A's handles and ids: empty, exactly as for ids that never existed.
    for query in [
        format!("?agentId={agent_id}"),
        "?email=ann%40a.example".to_owned(),
        "?npn=1111".to_owned(),
        "?platformAgentId=rep-a".to_owned(),
        String::new(),
    ] {
        let page = app.get(&b, &format!("/v1/agents{query}")).await.expect(200);
        assert_eq!(page, json!({ "data": [], "nextCursor": null }), "{query}");
    }
    let foreign = app
        .get(&b, &format!("/v1/agents?agencyId={agency_id}"))
        .await;
    let unknown = app
        .get(&b, "/v1/agents?agencyId=svc_agency_doesnotexist")
        .await;
    let foreign = foreign.expect_error(404, "AGENCY_NOT_FOUND");
    let unknown = unknown.expect_error(404, "AGENCY_NOT_FOUND");
    assert_eq!(foreign["message"], unknown["message"]);

    // B cannot register into A's agency, by either reference.
    let by_id =
        json!({ "firstName": "X", "lastName": "Y", "email": "x@b.example", "agencyId": agency_id });
    app.post(&b, "/v1/agents", by_id)
        .await
        .expect_error(404, "AGENCY_NOT_FOUND");
    let by_platform = json!({ "firstName": "X", "lastName": "Y", "email": "x@b.example", "platformAgencyId": "ag-a" });
    app.post(&b, "/v1/agents", by_platform)
        .await
        .expect_error(404, "AGENCY_NOT_FOUND");

    // B registering A's handles is no conflict; A's roster is untouched.
    app.agency(&b, "ag-b").await;
    app.agent(
        &b,
        "ag-b",
        json!({ "email": "ANN@a.example", "npn": "1111", "platformAgentId": "rep-a" }),
    )
    .await;
    let a_roster = app.get(&a, "/v1/agents").await.expect(200);
    assert_eq!(a_roster["data"], json!([agent_a]));

    // B renaming "ag-a" creates B's own agency; A's keeps its name.
    let created = app
        .post(
            &b,
            "/v1/agencies",
            json!({ "platformAgencyId": "ag-a", "name": "Hijack" }),
        )
        .await
        .expect(201);
    assert_ne!(created["id"], agency_a["id"]);
    let still = app
        .post(
            &a,
            "/v1/agencies",
            json!({ "platformAgencyId": "ag-a", "name": "Agency" }),
        )
        .await
        .expect(200);
    assert_eq!(still["name"], "Agency");
    app.shutdown().await;
}
