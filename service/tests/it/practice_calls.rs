//! The live call over WebSocket, scoring, and reading calls back: detail, list filters,
//! paging and tenant isolation.

use serde_json::{Value, json};

use crate::helpers::{TestApp, TestTenant};
use crate::practice_helpers::*;

#[tokio::test]
async fn a_scripted_call_is_answered_turn_by_turn_and_scored_high() {
    let app = practice_app(|_| {}).await;
    let (tenant, agent) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let (call_id, mut client) = start_call(&app, &token).await;
    let mut replies = Vec::new();
    for line in GOOD_CALL {
        replies.push(client.say(line).await);
    }
    assert!(
        replies[2].contains("Dr."),
        "discovery answer names a doctor: {}",
        replies[2]
    );
    assert!(
        replies.last().is_some_and(|r| r.contains("let's do it")),
        "{replies:?}"
    );
    app.clock.advance(chrono::Duration::seconds(125));
    let ended = end_call(client).await;
    assert_eq!(
        ended,
        json!({ "type": "ended", "callId": call_id, "durationSec": 125 })
    );

    let detail = wait_scored(&app, &tenant, &call_id).await;
    assert_eq!(detail["status"], "scored");
    assert_eq!(detail["id"], call_id.as_str());
    assert_eq!(detail["source"], "roleplay");
    assert_eq!(detail["drillKey"], "ma-full-sale");
    assert_eq!(detail["agentId"], agent["id"]);
    assert_eq!(detail["platformAgentId"], "rep-1");
    assert_eq!(detail["platformAgencyId"], "ag-1");
    assert_eq!(detail["durationSec"], 125);
    assert_eq!(detail["startedAt"], "2026-01-01T00:00:00.000Z");
    assert_eq!(detail["endedAt"], "2026-01-01T00:02:05.000Z");
    for null in [
        "audioUrl",
        "audioUrlExpiresAt",
        "waveform",
        "externalUserId",
        "externalAgencyId",
    ] {
        assert!(detail[null].is_null(), "{null}");
    }
    assert_eq!(detail["score"]["overallScore"], 100);
    assert_eq!(detail["score"]["compliancePercent"], 100);
    assert!(
        detail["score"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("8 of 8"))
    );
    let turns = detail["transcript"].as_array().expect("turns");
    assert_eq!(turns.len(), 1 + 2 * GOOD_CALL.len());
    assert_eq!(turns[0]["role"], "customer");
    assert_eq!(
        turns[1],
        json!({ "role": "agent", "content": GOOD_CALL[0] })
    );
}

#[tokio::test]
async fn a_poor_call_scores_low_with_feedback_naming_what_was_missed() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let (call_id, _) = run_call(
        &app,
        &tenant,
        &["hey, want to buy insurance? I guarantee you'll save"],
        20,
    )
    .await;
    let detail = wait_scored(&app, &tenant, &call_id).await;
    let score = &detail["score"];
    assert!(
        score["overallScore"].as_u64().is_some_and(|s| s < 20),
        "{score}"
    );
    assert_eq!(score["compliancePercent"], 0);
    let feedback = score["feedback"].as_str().expect("feedback");
    assert!(
        feedback.contains("Missing plan disclaimer") && feedback.contains("\"guarantee\""),
        "{feedback}"
    );
}

#[tokio::test]
async fn a_silent_call_is_not_scored_and_never_readable() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let (call_id, _) = run_call(&app, &tenant, &[], 5).await;
    assert_eq!(wait_outcome(&app, &call_id).await, "not_scored");
    app.get(&tenant, &format!("/v1/calls/{call_id}"))
        .await
        .expect_error(404, "CALL_NOT_FOUND");
    let page = app
        .get(
            &tenant,
            "/v1/calls?from=2025-01-01T00:00:00Z&source=roleplay",
        )
        .await
        .expect(200);
    assert_eq!(page["data"], json!([]));
}

#[tokio::test]
async fn the_socket_enforces_its_ticket_and_keeps_going_after_bad_frames() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let started = redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect(200);
    let url = started["connectionUrl"].as_str().expect("url");
    let ticket = started["connectionTicket"].as_str().expect("ticket");

    let mut wrong = LiveClient::connect(url, "tkt_wrong").await;
    let error = wrong.recv().await.expect("error frame");
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("error"), Some("INVALID_TOKEN"))
    );
    assert!(wrong.recv().await.is_none(), "closed after a bad ticket");

    let mut client = LiveClient::connect(url, ticket).await;
    assert_eq!(client.recv().await.expect("ready")["type"], "ready");
    client.recv().await.expect("greeting");
    let mut again = LiveClient::connect(url, ticket).await;
    assert_eq!(again.recv().await.expect("error")["code"], "INVALID_TOKEN");

    client.send_text("not json").await;
    assert_eq!(
        client.recv().await.expect("error")["code"],
        "INVALID_REQUEST"
    );
    client.send(json!({ "type": "say", "text": "   " })).await;
    assert_eq!(
        client.recv().await.expect("error")["code"],
        "INVALID_REQUEST"
    );
    assert!(!client.say("Hi, my name is Sam").await.is_empty());
    end_call(client).await;
}

#[tokio::test]
async fn a_dropped_connection_ends_and_scores_the_call() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let (call_id, mut client) = start_call(&app, &token).await;
    client
        .say("Hi, my name is Sam calling from Acme Health")
        .await;
    client.drop_connection().await;
    let detail = wait_scored(&app, &tenant, &call_id).await;
    assert_eq!(detail["transcript"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn a_call_ends_at_the_ceiling_with_an_ended_frame() {
    let app = practice_app(|config| config.call_ceiling_secs = 1).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let (call_id, mut client) = start_call(&app, &token).await;
    client.say("Hi, my name is Sam").await;
    let ended = client.recv().await.expect("ended at the ceiling");
    assert_eq!(ended["type"], "ended");
    assert_eq!(ended["callId"], call_id.as_str());
    wait_scored(&app, &tenant, &call_id).await;
}

#[tokio::test]
async fn a_redeemed_call_nobody_joins_ends_at_the_ceiling_unscored() {
    let app = practice_app(|config| config.call_ceiling_secs = 1).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let started = redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect(200);
    let call_id = started["callId"].as_str().expect("callId");
    assert_eq!(wait_outcome(&app, call_id).await, "not_scored");
    let mut late = LiveClient::connect(
        started["connectionUrl"].as_str().expect("url"),
        started["connectionTicket"].as_str().expect("t"),
    )
    .await;
    assert_eq!(late.recv().await.expect("error")["code"], "INVALID_TOKEN");
}

async fn scored_calls(app: &TestApp, tenant: &TestTenant, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..count {
        let (call_id, _) = run_call(app, tenant, &["Hi, my name is Sam"], 10).await;
        wait_scored(app, tenant, &call_id).await;
        ids.push(call_id);
    }
    ids
}

fn ids_of(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test]
async fn the_list_pages_newest_first_and_stays_stable_while_calls_arrive() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let mut ids = scored_calls(&app, &tenant, 5).await;
    ids.reverse();
    let base = "/v1/calls?from=2026-01-01T00:00:00.000Z&source=roleplay&limit=2";
    let first = app.get(&tenant, base).await.expect(200);
    assert_eq!(ids_of(&first), ids[..2]);
    let row = &first["data"][0];
    for absent in ["score", "transcript", "status"] {
        assert!(row.get(absent).is_none(), "{absent} on a list row");
    }
    scored_calls(&app, &tenant, 1).await; // a newer call arrives between pages
    let cursor = first["nextCursor"].as_str().expect("cursor");
    let second = app
        .get(&tenant, &format!("{base}&cursor={cursor}"))
        .await
        .expect(200);
    assert_eq!(ids_of(&second), ids[2..4]);
    let cursor = second["nextCursor"].as_str().expect("cursor");
    let last = app
        .get(&tenant, &format!("{base}&cursor={cursor}"))
        .await
        .expect(200);
    assert_eq!(ids_of(&last), ids[4..]);
    assert!(last["nextCursor"].is_null());

    let window = app
        .get(
            &tenant,
            "/v1/calls?from=2026-01-01T00:00:10.000Z&to=2026-01-01T00:00:30Z&source=roleplay",
        )
        .await
        .expect(200);
    assert_eq!(ids_of(&window), ids[2..], "inclusive bounds on endedAt");
    let real = app
        .get(
            &tenant,
            "/v1/calls?from=2026-01-01T00:00:00Z&source=real_call",
        )
        .await
        .expect(200);
    assert_eq!(real["data"], json!([]));
}

#[tokio::test]
async fn list_filters_validate_and_narrow() {
    let app = practice_app(|_| {}).await;
    let (tenant, agent) = tenant_with_rep(&app).await;
    let token = minted_token(
        &app,
        &tenant,
        json!({ "platformAgentId": "rep-1", "externalUserId": "u-9", "externalAgencyId": "a-9" }),
    )
    .await;
    let (labelled, _) = run_call_with(&app, &token, &["Hi, my name is Sam"], 0).await;
    let detail = wait_scored(&app, &tenant, &labelled).await;
    assert_eq!(
        (
            detail["externalUserId"].as_str(),
            detail["externalAgencyId"].as_str()
        ),
        (Some("u-9"), Some("a-9"))
    );
    app.clock.advance(chrono::Duration::seconds(5));
    let (plain, _) = run_call(&app, &tenant, &["Hi, my name is Sam"], 3).await;
    wait_scored(&app, &tenant, &plain).await;
    let both = [plain.clone(), labelled.clone()];

    let q = |rest: &str| format!("/v1/calls?from=2026-01-01T00:00:00Z&source=roleplay{rest}");
    let agency_id = agent["agencyId"].as_str().expect("agency");
    let agent_id = agent["id"].as_str().expect("agent");
    for rest in [
        format!("&agentId={agent_id}"),
        format!("&agencyId={agency_id}"),
        "&platformAgentId=rep-1".into(),
        "&platformAgencyId=ag-1".into(),
    ] {
        assert_eq!(
            ids_of(&app.get(&tenant, &q(&rest)).await.expect(200)),
            both,
            "{rest}"
        );
    }
    assert_eq!(
        ids_of(
            &app.get(&tenant, &q("&externalUserId=u-9"))
                .await
                .expect(200)
        ),
        std::slice::from_ref(&labelled)
    );
    assert_eq!(
        ids_of(
            &app.get(&tenant, &q("&externalAgencyId=a-9"))
                .await
                .expect(200)
        ),
        [labelled]
    );
    for rest in [
        "&platformAgentId=nobody",
        "&platformAgencyId=nowhere",
        "&externalUserId=u-1",
        "&externalAgencyId=zzz",
    ] {
        assert_eq!(
            app.get(&tenant, &q(rest)).await.expect(200)["data"],
            json!([]),
            "{rest}"
        );
    }
    for bad in [
        "/v1/calls?source=roleplay".to_string(),
        "/v1/calls?from=2026-01-01T00:00:00Z".into(),
        q("").replace("roleplay", "voicemail"),
        "/v1/calls?from=yesterday&source=roleplay".into(),
        q("&to=2025-01-01T00:00:00Z"),
        q("&limit=0"),
        q("&limit=101"),
        q("&limit=ten"),
        q("&cursor=abc"),
        q(&format!("&agentId={agent_id}&platformAgentId=rep-1")),
        q(&format!("&agencyId={agency_id}&platformAgencyId=ag-1")),
        q("&unknown=1"),
    ] {
        app.get(&tenant, &bad)
            .await
            .expect_error(400, "INVALID_REQUEST");
    }
    app.get(&tenant, &q("&agentId=svc_agent_nope"))
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    app.get(&tenant, &q("&agencyId=svc_agency_nope"))
        .await
        .expect_error(404, "AGENCY_NOT_FOUND");
}

#[tokio::test]
async fn another_tenants_calls_and_cursors_are_not_found_or_invalid() {
    let app = practice_app(|_| {}).await;
    let (tenant, agent) = tenant_with_rep(&app).await;
    let ids = scored_calls(&app, &tenant, 2).await;
    let (other, _) = tenant_with_rep(&app).await;
    app.get(&other, &format!("/v1/calls/{}", ids[0]))
        .await
        .expect_error(404, "CALL_NOT_FOUND");
    app.get(&other, "/v1/calls/svc_call_unknown")
        .await
        .expect_error(404, "CALL_NOT_FOUND");
    // An id that does not decode (not UTF-8) names no call either.
    app.get(&other, "/v1/calls/%FF")
        .await
        .expect_error(404, "CALL_NOT_FOUND");
    let q = "/v1/calls?from=2026-01-01T00:00:00Z&source=roleplay";
    assert_eq!(app.get(&other, q).await.expect(200)["data"], json!([]));
    let agent_id = agent["id"].as_str().expect("id");
    app.get(&other, &format!("{q}&agentId={agent_id}"))
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    let first = app.get(&tenant, &format!("{q}&limit=1")).await.expect(200);
    let cursor = first["nextCursor"].as_str().expect("cursor");
    app.get(&other, &format!("{q}&limit=1&cursor={cursor}"))
        .await
        .expect_error(400, "INVALID_REQUEST");
    app.get(&tenant, &format!("/v1/agents?cursor={cursor}"))
        .await
        .expect_error(400, "INVALID_REQUEST");
}

#[tokio::test]
async fn the_openapi_document_describes_the_practice_endpoints() {
    let app = practice_app(|_| {}).await;
    let doc = app
        .send(reqwest::Method::GET, "/v1/openapi.json", None, None)
        .await
        .expect(200);
    let paths = doc["paths"].as_object().expect("paths");
    for (path, method) in [
        ("/session", "post"),
        ("/roleplay/session", "post"),
        ("/calls", "get"),
        ("/calls/{callId}", "get"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} missing"
        );
    }
    let params: Vec<&str> = doc["paths"]["/calls"]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for name in [
        "from",
        "to",
        "source",
        "agentId",
        "platformAgencyId",
        "externalUserId",
        "limit",
        "cursor",
    ] {
        assert!(params.contains(&name), "{name} missing from GET /calls");
    }
    assert!(doc["components"]["schemas"].get("CallDetail").is_some());
    assert_eq!(
        doc["paths"]["/roleplay/session"]["post"]["security"][0]["sessionToken"],
        json!([])
    );
}

/// The parameter `name` of the GET operation at `path` in the OpenAPI document.
fn get_parameter<'a>(doc: &'a Value, path: &str, name: &str) -> &'a Value {
    doc["paths"][path]["get"]["parameters"]
        .as_array()
        .and_then(|params| params.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("{name} missing from GET {path}"))
}

#[tokio::test]
async fn the_openapi_document_states_the_rules_the_service_enforces() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let doc = app
        .send(reqwest::Method::GET, "/v1/openapi.json", None, None)
        .await
        .expect(200);
    let from = get_parameter(&doc, "/calls", "from");
    assert_eq!(from["required"], json!(true));
    assert_eq!(from["schema"]["format"], json!("date-time"));
    let source = get_parameter(&doc, "/calls", "source");
    assert_eq!(source["required"], json!(true));
    assert_eq!(source["schema"]["enum"], json!(["roleplay", "real_call"]));
    assert_eq!(
        doc["components"]["schemas"]["RedeemRequest"]["properties"]["difficulty"]["enum"],
        json!(["Beginner", "Advanced", "Elite", null])
    );
    // The documented page-size bounds are the ones the service enforces (not clamped).
    for (path, query) in [
        ("/agents", "/v1/agents?"),
        (
            "/calls",
            "/v1/calls?from=2026-01-01T00:00:00Z&source=roleplay&",
        ),
    ] {
        let limit = &get_parameter(&doc, path, "limit")["schema"];
        assert_eq!(limit["type"], json!("integer"), "{path}");
        assert_eq!(
            (&limit["minimum"], &limit["maximum"]),
            (&json!(1), &json!(100))
        );
        for (value, status) in [("0", 400), ("1", 200), ("100", 200), ("101", 400)] {
            let reply = app.get(&tenant, &format!("{query}limit={value}")).await;
            assert_eq!(reply.status.as_u16(), status, "GET {path} limit={value}");
        }
    }
}
