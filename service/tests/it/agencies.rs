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
