//! GET /v1/agents: lookups by one handle, agency filter, limits and cursors.

use serde_json::{Value, json};

use crate::helpers::{TestApp, TestTenant, spawn_app};

async fn roster(app: &TestApp, tenant: &TestTenant, query: &str) -> Value {
    app.get(tenant, &format!("/v1/agents{query}"))
        .await
        .expect(200)
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .map(|agents| {
            agents
                .iter()
                .filter_map(|a| a["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn each_handle_finds_its_agent_and_a_miss_is_an_empty_200() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.agency(&tenant, "ag-1").await;
    let ann = app
        .agent(
            &tenant,
            "ag-1",
            json!({ "email": "Ann@Example.com", "npn": "1234567", "platformAgentId": "rep-1" }),
        )
        .await;
    app.agent(&tenant, "ag-1", json!({ "email": "bo@example.com" }))
        .await;
    let agent_id = ann["id"].as_str().unwrap_or_default();
    for query in [
        format!("?agentId={agent_id}"),
        "?platformAgentId=rep-1".to_owned(),
        "?platformAgentId=%20rep-1%20".to_owned(),
        "?npn=123-4567".to_owned(),
        "?npn=(123)%204567".to_owned(),
        "?email=ANN%40example.COM".to_owned(),
    ] {
        let page = roster(&app, &tenant, &query).await;
        assert_eq!(page["data"], json!([ann]), "{query}");
        assert_eq!(page["nextCursor"], json!(null));
    }
    for query in [
        "?email=nobody%40example.com",
        "?npn=99999",
        "?platformAgentId=rep-9",
        "?agentId=svc_agent_nope",
    ] {
        let page = roster(&app, &tenant, query).await;
        assert_eq!(page, json!({ "data": [], "nextCursor": null }), "{query}");
    }
    app.shutdown().await;
}

#[tokio::test]
async fn lookups_reject_several_handles_bad_npns_and_reserved_prefixes() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.agency(&tenant, "ag-1").await;
    for query in [
        "?email=a%40b.c&npn=1234",
        "?agentId=svc_agent_x&platformAgentId=rep",
        "?email=a%40b.c&email=b%40c.d",
        "?npn=123",
        "?npn=12345678901",
        "?npn=abcd",
        "?npn=",
        "?email=%20%20",
        "?platformAgentId=svc_agent_1",
        "?platformAgentId=svc_agency_1",
        "?agencyId=",
        "?unknown=1",
        "?limit=0",
        "?limit=101",
        "?limit=-1",
        "?limit=abc",
        "?limit=1.5",
        "?limit=",
        "?limit=99999999999999999999",
        "?cursor=",
        "?cursor=garbage",
    ] {
        app.get(&tenant, &format!("/v1/agents{query}"))
            .await
            .expect_error(400, "INVALID_REQUEST");
    }
    app.shutdown().await;
}

#[tokio::test]
async fn the_agency_filter_lists_one_agency_and_combines_with_a_handle() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let one = app.agency(&tenant, "ag-1").await;
    let two = app.agency(&tenant, "ag-2").await;
    let ann = app
        .agent(&tenant, "ag-1", json!({ "email": "ann@example.com" }))
        .await;
    let bo = app
        .agent(&tenant, "ag-2", json!({ "email": "bo@example.com" }))
        .await;
    let one_id = one["id"].as_str().unwrap_or_default();
    let two_id = two["id"].as_str().unwrap_or_default();
    assert_eq!(
        roster(&app, &tenant, &format!("?agencyId={one_id}")).await["data"],
        json!([ann])
    );
    assert_eq!(
        roster(&app, &tenant, &format!("?agencyId={two_id}")).await["data"],
        json!([bo])
    );
    let both = roster(
        &app,
        &tenant,
        &format!("?agencyId={two_id}&email=bo%40example.com"),
    )
    .await;
    assert_eq!(both["data"], json!([bo]));
    let neither = roster(
        &app,
        &tenant,
        &format!("?agencyId={two_id}&email=ann%40example.com"),
    )
    .await;
    assert_eq!(neither["data"], json!([]));
    assert_eq!(roster(&app, &tenant, "").await["data"], json!([ann, bo]));
    app.get(&tenant, "/v1/agents?agencyId=svc_agency_unknown")
        .await
        .expect_error(404, "AGENCY_NOT_FOUND");
    app.shutdown().await;
}

// Multi-threaded, so reads take the in-place (block_in_place) path used in production.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_follow_cursors_without_skipping_or_repeating_under_inserts() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.agency(&tenant, "ag-1").await;
    let mut expected = Vec::new();
    for i in 0..7 {
        let agent = app
            .agent(
                &tenant,
                "ag-1",
                json!({ "platformAgentId": format!("rep-{i}") }),
            )
            .await;
        expected.push(agent["id"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(
        ids(&roster(&app, &tenant, "").await),
        expected,
        "default limit lists all"
    );

    let mut seen = Vec::new();
    let mut query = "?limit=3".to_owned();
    let mut inserted = 0;
    loop {
        let page = roster(&app, &tenant, &query).await;
        assert!(page["data"].as_array().is_some_and(|d| d.len() <= 3));
        seen.extend(ids(&page));
        // Agents registered between pages appear later, never shifting what was read.
        if inserted < 2 {
            let agent = app
                .agent(
                    &tenant,
                    "ag-1",
                    json!({ "platformAgentId": format!("late-{inserted}") }),
                )
                .await;
            expected.push(agent["id"].as_str().unwrap_or_default().to_owned());
            inserted += 1;
        }
        match page["nextCursor"].as_str() {
            Some(cursor) => query = format!("?limit=3&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen, expected);
    app.shutdown().await;
}

#[tokio::test]
async fn a_cursor_is_refused_by_another_tenant_another_filter_or_when_tampered() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let other = app.tenant().await;
    let agency = app.agency(&tenant, "ag-1").await;
    for i in 0..3 {
        app.agent(
            &tenant,
            "ag-1",
            json!({ "platformAgentId": format!("rep-{i}") }),
        )
        .await;
    }
    let page = roster(&app, &tenant, "?limit=1").await;
    let cursor = page["nextCursor"].as_str().unwrap_or_default().to_owned();
    assert!(!cursor.is_empty());
    roster(&app, &tenant, &format!("?limit=1&cursor={cursor}")).await;
    roster(&app, &tenant, &format!("?limit=2&cursor={cursor}")).await;

    app.get(&other, &format!("/v1/agents?limit=1&cursor={cursor}"))
        .await
        .expect_error(400, "INVALID_REQUEST");
    let agency_id = agency["id"].as_str().unwrap_or_default();
    app.get(
        &tenant,
        &format!("/v1/agents?agencyId={agency_id}&cursor={cursor}"),
    )
    .await
    .expect_error(400, "INVALID_REQUEST");
    let mut tampered = cursor.clone().into_bytes();
    tampered[0] = if tampered[0] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap_or_default();
    app.get(&tenant, &format!("/v1/agents?cursor={tampered}"))
        .await
        .expect_error(400, "INVALID_REQUEST");
    app.shutdown().await;
}

#[tokio::test]
async fn a_cursor_survives_a_restart_of_the_service() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.agency(&tenant, "ag-1").await;
    for i in 0..3 {
        app.agent(&tenant, "ag-1", json!({ "npn": format!("100{i}") }))
            .await;
    }
    let page = roster(&app, &tenant, "?limit=2").await;
    let cursor = page["nextCursor"].as_str().unwrap_or_default().to_owned();
    let restarted = app.restart().await;
    let rest = roster(&restarted, &tenant, &format!("?limit=2&cursor={cursor}")).await;
    assert_eq!(rest["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(rest["data"][0]["npn"], "1002");
    restarted.shutdown().await;
}

#[tokio::test]
async fn a_cursor_issued_for_another_endpoint_is_invalid_request() {
    use svc_service::cursor::{CursorCodec, CursorScope};
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.agency(&tenant, "ag-1").await;
    for i in 0..3 {
        app.agent(&tenant, "ag-1", json!({ "npn": format!("200{i}") }))
            .await;
    }
    let codec = CursorCodec::new(app.db.cursor_key().await.expect("key"));
    let scope = |endpoint| CursorScope {
        endpoint,
        tenant_id: &tenant.id,
        filters: r#"["","",null]"#,
    };
    // The same position signed for GET /agents is accepted (the check is not vacuous)…
    let ours = codec.encode(scope("GET /agents"), "1");
    let page = roster(&app, &tenant, &format!("?cursor={ours}")).await;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(2));
    // …and refused when it was issued for GET /calls.
    let theirs = codec.encode(scope("GET /calls"), "1");
    app.get(&tenant, &format!("/v1/agents?cursor={theirs}"))
        .await
        .expect_error(400, "INVALID_REQUEST");
    app.shutdown().await;
}
