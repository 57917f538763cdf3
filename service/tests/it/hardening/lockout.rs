//! Access after lockout: tokens minted before a deactivation or a key
//! revocation start nothing afterwards, a live connection checks the tenant, and the
//! allowance caps how many calls can be under way at once.

use serde_json::json;
use svc_service::db::TenantChange;

use crate::practice_helpers::{LiveClient, mint, practice_app, redeem, tenant_with_rep, token};

#[tokio::test]
async fn a_token_minted_before_a_deactivation_never_redeems_even_after_reactivation() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    app.change(&tenant, TenantChange::Active(false)).await;
    app.change(&tenant, TenantChange::Active(true)).await;
    redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect_error(401, "INVALID_TOKEN");
}

#[tokio::test]
async fn a_token_minted_before_the_keys_were_revoked_never_redeems() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    app.db
        .revoke_api_keys(&tenant.id, 0)
        .await
        .expect("revoke")
        .expect("tenant");
    redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect_error(401, "INVALID_TOKEN");
}

#[tokio::test]
async fn the_live_connection_is_refused_once_the_tenant_is_deactivated() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let started = redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect(200);
    app.change(&tenant, TenantChange::Active(false)).await;
    let mut client = LiveClient::connect(
        started["connectionUrl"].as_str().expect("url"),
        started["connectionTicket"].as_str().expect("ticket"),
    )
    .await;
    let frame = client.recv().await.expect("a frame");
    assert_eq!(frame["type"], "error", "{frame}");
    assert_eq!(frame["code"], "INVALID_TOKEN", "{frame}");
}

#[tokio::test]
async fn each_token_outstanding_holds_a_minute_of_the_remaining_allowance() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    app.change(&tenant, TenantChange::MonthlyAllowanceMinutes(Some(2)))
        .await;
    let body = json!({ "platformAgentId": "rep-1" });
    mint(&app, &tenant, body.clone()).await.expect(200);
    mint(&app, &tenant, body.clone()).await.expect(200);
    // Two minutes are held by two tokens: a third call cannot be under way at once.
    mint(&app, &tenant, body.clone())
        .await
        .expect_error(403, "TENANT_QUOTA_EXCEEDED");
    // Once the tokens expire, the allowance is free again.
    app.clock.advance(chrono::Duration::minutes(6));
    mint(&app, &tenant, body).await.expect(200);
}
