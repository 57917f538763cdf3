//! POST /v1/agencies: create or rename, trimming, nulls, reserved prefixes, races.

use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn creating_an_agency_is_201_and_the_same_id_again_renames_it_with_200() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let created = app
        .post(
            &tenant,
            "/v1/agencies",
            json!({ "platformAgencyId": " ag-1 ", "name": " Acme " }),
        )
        .await
        .expect(201);
    assert!(
        created["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("svc_agency_"))
    );
    assert_eq!(created["platformAgencyId"], "ag-1");
    assert_eq!(created["name"], "Acme");
    assert_eq!(created["createdAt"], "2026-01-01T00:00:00.000Z");

    let renamed = app
        .post(
            &tenant,
            "/v1/agencies",
            json!({ "platformAgencyId": "ag-1", "name": "Acme Two" }),
        )
        .await
        .expect(200);
    assert_eq!(renamed["id"], created["id"]);
    assert_eq!(renamed["name"], "Acme Two");
    assert_eq!(renamed["createdAt"], created["createdAt"]);

    let same = app
        .post(
            &tenant,
            "/v1/agencies",
            json!({ "platformAgencyId": "ag-1", "name": "Acme Two" }),
        )
        .await
        .expect(200);
    assert_eq!(same, renamed);
    app.shutdown().await;
}

#[tokio::test]
async fn missing_null_blank_or_reserved_agency_fields_are_invalid_request() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    for body in [
        json!({}),
        json!({ "name": "A" }),
        json!({ "platformAgencyId": "a" }),
        json!({ "platformAgencyId": null, "name": "A" }),
        json!({ "platformAgencyId": "a", "name": null }),
        json!({ "platformAgencyId": "  ", "name": "A" }),
        json!({ "platformAgencyId": "a", "name": "\t\n " }),
        json!({ "platformAgencyId": "svc_agency_1", "name": "A" }),
        json!({ "platformAgencyId": "  svc_agent_1", "name": "A" }),
    ] {
        app.post(&tenant, "/v1/agencies", body)
            .await
            .expect_error(400, "INVALID_REQUEST");
    }
    app.shutdown().await;
}

#[tokio::test]
async fn concurrent_first_calls_resolve_to_one_agency_and_one_201() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let calls = (0..16).map(|i| {
        let body = json!({ "platformAgencyId": "race", "name": format!("Name {}", i % 2) });
        app.post(&tenant, "/v1/agencies", body)
    });
    let replies = futures_util::future::join_all(calls).await;
    let statuses: Vec<u16> = replies.iter().map(|r| r.status.as_u16()).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 200),
        "{statuses:?}"
    );
    let first = &replies[0].body["id"];
    assert!(replies.iter().all(|r| &r.body["id"] == first));
    app.shutdown().await;
}

#[tokio::test]
async fn the_same_platform_id_in_two_tenants_is_two_agencies() {
    let app = spawn_app().await;
    let a = app.tenant().await;
    let b = app.tenant().await;
    let body = json!({ "platformAgencyId": "shared", "name": "Shared" });
    let in_a = app.post(&a, "/v1/agencies", body.clone()).await.expect(201);
    let in_b = app.post(&b, "/v1/agencies", body).await.expect(201);
    assert_ne!(in_a["id"], in_b["id"]);
    app.shutdown().await;
}
