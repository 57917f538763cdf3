//! Minting and redeeming session tokens: identifiers, quota, expiry, single use under
//! concurrency, the spending behaviour of every redeem error, and CORS on redeem.

use chrono::Duration;
use reqwest::Method;
use serde_json::json;
use svc_service::db::TenantChange;

use crate::practice_helpers::*;

#[tokio::test]
async fn mint_returns_a_jwt_expiring_in_five_minutes_by_default() {
    let app = practice_app(|_| {}).await;
    let (tenant, agent) = tenant_with_rep(&app).await;
    let by_platform = mint(&app, &tenant, json!({ "platformAgentId": " rep-1 " }))
        .await
        .expect(200);
    assert_eq!(
        by_platform["token"].as_str().map(|t| t.split('.').count()),
        Some(3)
    );
    assert_eq!(by_platform["expiresAt"], "2026-01-01T00:05:00.000Z");
    let by_id = mint(&app, &tenant, json!({ "agentId": agent["id"] }))
        .await
        .expect(200);
    assert_ne!(by_id["token"], by_platform["token"]);
}

#[tokio::test]
async fn mint_rejects_missing_ambiguous_and_unknown_reps() {
    let app = practice_app(|_| {}).await;
    let (tenant, agent) = tenant_with_rep(&app).await;
    app.agent(
        &tenant,
        "ag-1",
        json!({ "platformAgentId": "rep-2", "npn": "12345", "email": "b@x.test" }),
    )
    .await;
    mint(&app, &tenant, json!({}))
        .await
        .expect_error(400, "INVALID_REQUEST");
    mint(&app, &tenant, json!({ "platformAgentId": "   " }))
        .await
        .expect_error(400, "INVALID_REQUEST");
    mint(
        &app,
        &tenant,
        json!({ "platformAgentId": "rep-1", "agentId": agent["id"] }),
    )
    .await
    .expect_error(400, "INVALID_REQUEST");
    mint(&app, &tenant, json!({ "npn": "12345" }))
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    mint(&app, &tenant, json!({ "email": "b@x.test" }))
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    mint(&app, &tenant, json!({ "platformAgentId": "nobody" }))
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
    let other = app.tenant().await;
    mint(&app, &other, json!({ "agentId": agent["id"] }))
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
}

#[tokio::test]
async fn the_earlier_form_names_the_rep_by_external_user_id() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    mint(
        &app,
        &tenant,
        json!({ "externalUserId": "rep-1", "externalAgencyId": "label" }),
    )
    .await
    .expect(200);
    mint(&app, &tenant, json!({ "externalUserId": "nobody" }))
        .await
        .expect_error(404, "AGENT_NOT_FOUND");
}

#[tokio::test]
async fn a_spent_allowance_refuses_to_mint() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    app.change(&tenant, TenantChange::MonthlyAllowanceMinutes(Some(0)))
        .await;
    mint(&app, &tenant, json!({ "platformAgentId": "rep-1" }))
        .await
        .expect_error(403, "TENANT_QUOTA_EXCEEDED");
    app.change(&tenant, TenantChange::MonthlyAllowanceMinutes(None))
        .await;
    mint(&app, &tenant, json!({ "platformAgentId": "rep-1" }))
        .await
        .expect(200);
}

#[tokio::test]
async fn failed_calls_count_toward_the_allowance_until_the_month_turns() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    app.change(&tenant, TenantChange::MonthlyAllowanceMinutes(Some(1)))
        .await;
    // A silent call (not scored) of 61 seconds spends the one-minute allowance.
    let (call_id, ended) = run_call(&app, &tenant, &[], 61).await;
    assert_eq!(ended["durationSec"], 61);
    assert_eq!(wait_outcome(&app, &call_id).await, "not_scored");
    mint(&app, &tenant, json!({ "platformAgentId": "rep-1" }))
        .await
        .expect_error(403, "TENANT_QUOTA_EXCEEDED");
    app.clock.advance(Duration::days(31));
    mint(&app, &tenant, json!({ "platformAgentId": "rep-1" }))
        .await
        .expect(200);
}

#[tokio::test]
async fn an_expired_token_is_token_expired() {
    let app = practice_app(|config| config.token_ttl_secs = 30).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    app.clock.advance(Duration::seconds(30));
    redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect_error(401, "TOKEN_EXPIRED");
}

#[tokio::test]
async fn a_token_spent_by_a_failed_redeem_and_replayed_after_its_lifetime_is_already_used() {
    // It was redeemed, so it never "expired before redemption".
    let app = practice_app(|config| config.token_ttl_secs = 30).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    redeem(&app, &token, json!({ "drillKey": "no-such-drill" }))
        .await
        .expect_error(400, "DRILL_NOT_FOUND");
    app.clock.advance(Duration::seconds(31));
    redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect_error(401, "TOKEN_ALREADY_USED");
}

#[tokio::test]
async fn malformed_or_foreign_tokens_are_invalid_token() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    redeem(&app, "not-a-jwt", json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect_error(401, "INVALID_TOKEN");
    let reply = app
        .send(
            Method::POST,
            "/v1/roleplay/session",
            None,
            Some(json!({ "drillKey": "ma-full-sale" })),
        )
        .await;
    reply.expect_error(401, "INVALID_TOKEN");
    // The tenant's API key is not a session token.
    redeem(&app, &tenant.key, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect_error(401, "INVALID_TOKEN");
    let other = practice_app(|_| {}).await;
    let (other_tenant, _) = tenant_with_rep(&other).await;
    let foreign = token(&other, &other_tenant).await;
    redeem(&app, &foreign, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect_error(401, "INVALID_TOKEN");
}

#[tokio::test]
async fn invalid_requests_leave_the_token_unspent() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    for body in [
        json!({}),
        json!({ "drillKey": "  " }),
        json!({ "drillKey": "ma-full-sale", "difficulty": "Hard" }),
        json!({ "drillKey": "ma-full-sale", "filters": "FL" }),
        json!({ "drillKey": "ma-full-sale", "filters": { "state": 7 } }),
        json!({ "drillKey": "ma-full-sale", "filters": { "zip": "33601" } }),
        json!({ "drillKey": 5 }),
    ] {
        redeem(&app, &token, body)
            .await
            .expect_error(400, "INVALID_REQUEST");
    }
    let started = redeem(
        &app,
        &token,
        json!({ "drillKey": "ma-full-sale", "difficulty": "Elite", "filters": { "state": "NY", "category": "x" } }),
    )
    .await
    .expect(200);
    assert!(
        started["sessionId"]
            .as_str()
            .is_some_and(|s| s.starts_with("ext_"))
    );
    assert!(
        started["callId"]
            .as_str()
            .is_some_and(|s| s.starts_with("svc_call_"))
    );
    assert_eq!(started["persona"]["name"], "Margaret O'Brien");
    assert!(
        started["connectionUrl"]
            .as_str()
            .is_some_and(|u| u.starts_with("ws://") && u.contains("/v1/live/ext_"))
    );
    redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect_error(401, "TOKEN_ALREADY_USED");
}

#[tokio::test]
async fn drill_not_found_and_service_unavailable_spend_the_token() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let first = token(&app, &tenant).await;
    redeem(&app, &first, json!({ "drillKey": "no-such-drill" }))
        .await
        .expect_error(400, "DRILL_NOT_FOUND");
    redeem(&app, &first, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect_error(401, "TOKEN_ALREADY_USED");
    for later in ["fe-closing", "hi-crosssell"] {
        let token = token(&app, &tenant).await;
        redeem(&app, &token, json!({ "drillKey": later }))
            .await
            .expect_error(503, "SERVICE_UNAVAILABLE");
        redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
            .await
            .expect_error(401, "TOKEN_ALREADY_USED");
    }
}

#[tokio::test]
async fn of_many_concurrent_redeems_exactly_one_succeeds() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let attempts = (0..16).map(|_| redeem(&app, &token, json!({ "drillKey": "ma-full-sale" })));
    let replies = futures_util::future::join_all(attempts).await;
    let ok = replies.iter().filter(|r| r.status == 200).count();
    assert_eq!(ok, 1);
    for reply in replies.into_iter().filter(|r| r.status != 200) {
        reply.expect_error(401, "TOKEN_ALREADY_USED");
    }
}

#[tokio::test]
async fn redeem_accepts_cross_origin_requests_and_mint_does_not() {
    let app = practice_app(|_| {}).await;
    let preflight = |path: &str| {
        app.client
            .request(Method::OPTIONS, app.url(path))
            .header("Origin", "https://app.example")
            .header("Access-Control-Request-Method", "POST")
            .header(
                "Access-Control-Request-Headers",
                "authorization,content-type",
            )
            .send()
    };
    let redeem = preflight("/v1/roleplay/session").await.expect("preflight");
    assert_eq!(redeem.headers()["access-control-allow-origin"], "*");
    let allowed = redeem.headers()["access-control-allow-headers"]
        .to_str()
        .expect("ascii")
        .to_lowercase();
    assert!(allowed.contains("authorization") && allowed.contains("content-type"));
    let session = preflight("/v1/session").await.expect("preflight");
    assert!(
        session
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

#[tokio::test]
async fn hostile_mint_and_redeem_bodies_get_the_envelope_and_spend_nothing() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let huge = "x".repeat(100_000);
    let bodies = [
        json!([]),
        json!("text"),
        json!(null),
        json!({ "platformAgentId": "rep\u{0}1" }),
        json!({ "platformAgentId": huge }),
        json!({ "platformAgentId": 42 }),
        json!({ "platformAgentId": "rep-1", "extra": true }),
        json!({ "externalUserId": "" }),
    ];
    for body in &bodies {
        mint(&app, &tenant, body.clone())
            .await
            .expect_error(400, "INVALID_REQUEST");
    }
    let token = token(&app, &tenant).await;
    for body in [
        json!([]),
        json!({ "drillKey": "ma-full-sale\u{0}" }),
        json!({ "drillKey": huge }),
        json!({ "drillKey": "ma-full-sale", "difficulty": 3 }),
        json!({ "drillKey": "ma-full-sale", "filters": [] }),
        json!({ "drillKey": "ma-full-sale", "filters": { "state": "\u{0}" } }),
    ] {
        redeem(&app, &token, body)
            .await
            .expect_error(400, "INVALID_REQUEST");
    }
    let raw = app
        .client
        .post(app.url("/v1/roleplay/session"))
        .bearer_auth(&token)
        .header("content-type", "text/plain")
        .body("drillKey=ma-full-sale")
        .send()
        .await
        .expect("sent");
    assert_eq!(raw.status(), 400);
    redeem(
        &app,
        &token,
        json!({ "drillKey": "ma-full-sale", "difficulty": null, "filters": null }),
    )
    .await
    .expect(200);
}
