//! POST /v1/agents: every registration rule of section 4.

use chrono::Duration;
use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn registering_an_agent_returns_the_agent_and_its_agency() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let agency = app.agency(&tenant, "ag-1").await;
    app.clock.advance(Duration::milliseconds(1_234));
    let body = json!({
        "firstName": " Ann ", "lastName": "Lee ", "email": " Ann@Example.com ",
        "npn": "12-345-678", "platformAgentId": " rep-1 ", "platformAgencyId": " ag-1 ",
    });
    let created = app.post(&tenant, "/v1/agents", body).await.expect(201);
    let agent = &created["agent"];
    assert!(
        agent["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("svc_agent_"))
    );
    assert_eq!(agent["firstName"], "Ann");
    assert_eq!(agent["lastName"], "Lee");
    assert_eq!(agent["email"], "Ann@Example.com");
    assert_eq!(agent["npn"], "12345678");
    assert_eq!(agent["platformAgentId"], "rep-1");
    assert_eq!(agent["agencyId"], agency["id"]);
    assert_eq!(agent["createdAt"], "2026-01-01T00:00:01.234Z");
    assert_eq!(created["agency"], agency);
    app.shutdown().await;
}

#[tokio::test]
async fn an_agent_can_name_its_agency_by_service_id_and_omitted_handles_are_null() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let agency = app.agency(&tenant, "ag-1").await;
    let body = json!({
        "firstName": "Bo", "lastName": "Ng", "email": null, "npn": null,
        "platformAgentId": "rep-2", "agencyId": agency["id"], "platformAgencyId": null,
    });
    let agent = app.post(&tenant, "/v1/agents", body).await.expect(201)["agent"].clone();
    assert_eq!(agent["email"], json!(null));
    assert_eq!(agent["npn"], json!(null));
    assert_eq!(agent["agencyId"], agency["id"]);
    app.shutdown().await;
}

#[tokio::test]
async fn registration_needs_a_handle_and_exactly_one_agency_reference() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let agency = app.agency(&tenant, "ag-1").await;
    let cases = [
        json!({ "firstName": "A", "lastName": "B", "platformAgencyId": "ag-1" }),
        json!({ "firstName": "A", "lastName": "B", "platformAgencyId": "ag-1",
                "email": null, "npn": null, "platformAgentId": null }),
        json!({ "firstName": "A", "lastName": "B", "email": "a@b.c" }),
        json!({ "firstName": "A", "lastName": "B", "email": "a@b.c",
                "platformAgencyId": "ag-1", "agencyId": agency["id"] }),
        json!({ "lastName": "B", "email": "a@b.c", "platformAgencyId": "ag-1" }),
        json!({ "firstName": null, "lastName": "B", "email": "a@b.c", "platformAgencyId": "ag-1" }),
        json!({ "firstName": "  ", "lastName": "B", "email": "a@b.c", "platformAgencyId": "ag-1" }),
        json!({ "firstName": "A", "lastName": "B", "email": "   ", "platformAgencyId": "ag-1" }),
        json!({ "firstName": "A", "lastName": "B", "email": "not-an-email", "platformAgencyId": "ag-1" }),
        json!({ "firstName": "A", "lastName": "B", "npn": "12", "platformAgencyId": "ag-1" }),
        json!({ "firstName": "A", "lastName": "B", "npn": "12345678901", "platformAgencyId": "ag-1" }),
        json!({ "firstName": "A", "lastName": "B", "platformAgentId": "svc_agent_x", "platformAgencyId": "ag-1" }),
        json!({ "firstName": "A", "lastName": "B", "platformAgentId": " svc_agency_x", "platformAgencyId": "ag-1" }),
        json!({ "firstName": "A", "lastName": "B", "email": "a@b.c", "platformAgencyId": "svc_agency_x" }),
        json!({ "firstName": "A", "lastName": "B", "email": "a@b.c", "platformAgencyId": " " }),
    ];
    for body in cases {
        let reply = app.post(&tenant, "/v1/agents", body.clone()).await;
        assert_eq!(reply.status.as_u16(), 400, "{body} -> {}", reply.body);
        reply.expect_error(400, "INVALID_REQUEST");
    }
    let listed = app.get(&tenant, "/v1/agents").await.expect(200);
    assert_eq!(
        listed["data"],
        json!([]),
        "no rejected registration was stored"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn an_unknown_or_foreign_agency_is_agency_not_found_and_is_never_created() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let other = app.tenant().await;
    let foreign = app.agency(&other, "ag-x").await;
    let cases = [
        json!({ "firstName": "A", "lastName": "B", "email": "a@b.c", "platformAgencyId": "never" }),
        json!({ "firstName": "A", "lastName": "B", "email": "a@b.c", "platformAgencyId": "ag-x" }),
        json!({ "firstName": "A", "lastName": "B", "email": "a@b.c", "agencyId": foreign["id"] }),
        json!({ "firstName": "A", "lastName": "B", "email": "a@b.c", "agencyId": "svc_agency_nope" }),
    ];
    for body in cases {
        app.post(&tenant, "/v1/agents", body)
            .await
            .expect_error(404, "AGENCY_NOT_FOUND");
    }
    // Registration did not create "never" as a side effect.
    let created = app
        .post(
            &tenant,
            "/v1/agencies",
            json!({ "platformAgencyId": "never", "name": "N" }),
        )
        .await;
    created.expect(201);
    app.shutdown().await;
}

#[tokio::test]
async fn a_second_registration_under_any_sent_handle_is_409_with_details() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.agency(&tenant, "ag-1").await;
    let second_agency = app.agency(&tenant, "ag-2").await;
    let first = app
        .agent(
            &tenant,
            "ag-1",
            json!({ "email": "ann@example.com", "npn": "1234", "platformAgentId": "rep-1" }),
        )
        .await;
    let cases = [
        (json!({ "platformAgentId": " rep-1 " }), "platformAgentId"),
        (json!({ "npn": "1-2-3-4" }), "npn"),
        (json!({ "email": "ANN@EXAMPLE.COM" }), "email"),
        (
            json!({ "email": "ann@example.com", "npn": "1234", "platformAgentId": "rep-1" }),
            "platformAgentId",
        ),
        (json!({ "email": "ann@example.com", "npn": "1234" }), "npn"),
        (
            json!({ "email": "Ann@example.com", "platformAgentId": "rep-9" }),
            "email",
        ),
    ];
    for (handles, matched_on) in cases {
        let mut body =
            json!({ "firstName": "X", "lastName": "Y", "agencyId": second_agency["id"] });
        if let (Some(body), Some(handles)) = (body.as_object_mut(), handles.as_object()) {
            body.extend(handles.clone());
        }
        let error = app
            .post(&tenant, "/v1/agents", body)
            .await
            .expect_error(409, "AGENT_ALREADY_EXISTS");
        assert_eq!(
            error["details"],
            json!({ "agentId": first["id"], "agencyId": first["agencyId"], "matchedOn": matched_on })
        );
    }
    let roster = app.get(&tenant, "/v1/agents").await.expect(200);
    assert_eq!(
        roster["data"].as_array().map(Vec::len),
        Some(1),
        "never an update"
    );
    assert_eq!(roster["data"][0], first);
    app.shutdown().await;
}

#[tokio::test]
async fn handles_are_unique_per_tenant_not_across_tenants() {
    let app = spawn_app().await;
    let a = app.tenant().await;
    let b = app.tenant().await;
    app.agency(&a, "ag-1").await;
    app.agency(&b, "ag-1").await;
    let handles = json!({ "email": "ann@example.com", "npn": "1234", "platformAgentId": "rep-1" });
    let in_a = app.agent(&a, "ag-1", handles.clone()).await;
    let in_b = app.agent(&b, "ag-1", handles).await;
    assert_ne!(in_a["id"], in_b["id"]);
    assert_ne!(in_a["agencyId"], in_b["agencyId"]);
    app.shutdown().await;
}

#[tokio::test]
async fn concurrent_registrations_of_one_handle_give_exactly_one_201() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.agency(&tenant, "ag-1").await;
    let attempts = (0..16).map(|i| {
        let body = json!({
            "firstName": "Ann", "lastName": "Lee", "platformAgencyId": "ag-1",
            "email": if i % 2 == 0 { "race@example.com" } else { "RACE@example.com" },
            "platformAgentId": format!("rep-{i}"),
        });
        app.post(&tenant, "/v1/agents", body)
    });
    let replies = futures_util::future::join_all(attempts).await;
    let created: Vec<_> = replies
        .iter()
        .filter(|r| r.status.as_u16() == 201)
        .collect();
    assert_eq!(created.len(), 1);
    let winner = created[0].body["agent"]["id"].clone();
    for reply in replies.iter().filter(|r| r.status.as_u16() != 201) {
        assert_eq!(reply.status.as_u16(), 409);
        assert_eq!(reply.body["error"]["details"]["agentId"], winner);
        assert_eq!(reply.body["error"]["details"]["matchedOn"], "email");
    }
    app.shutdown().await;
}
