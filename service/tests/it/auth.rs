//! API-key authentication: every code of section 5, read fresh at each request.

use reqwest::Method;
use serde_json::json;
use svc_service::credentials::ApiKey;
use svc_service::db::TenantChange;
use svc_service::operator::parse_allowlist;

use crate::helpers::{reply, spawn_app, spawn_app_with};

#[tokio::test]
async fn a_missing_or_malformed_authorization_is_invalid_api_key() {
    let app = spawn_app().await;
    app.send(Method::GET, "/v1/agents", None, None)
        .await
        .expect_error(401, "INVALID_API_KEY");
    for header in [
        "Basic abc",
        "Bearer",
        "Bearer ",
        "svc_live_abc",
        "Bearer whsec_x",
    ] {
        let response = app
            .client
            .get(app.url("/v1/agents"))
            .header("authorization", header)
            .send()
            .await
            .expect("sent");
        reply(response).await.expect_error(401, "INVALID_API_KEY");
    }
    app.shutdown().await;
}

#[tokio::test]
async fn an_unknown_key_is_invalid_api_key_and_the_scheme_is_case_insensitive() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let unknown = ApiKey::generate();
    app.send(Method::GET, "/v1/agents", Some(unknown.expose()), None)
        .await
        .expect_error(401, "INVALID_API_KEY");
    let response = app
        .client
        .get(app.url("/v1/agents"))
        .header("authorization", format!("bearer {}", tenant.key))
        .send()
        .await
        .expect("sent");
    reply(response).await.expect(200);
    app.shutdown().await;
}

#[tokio::test]
async fn a_revoked_key_is_api_key_revoked_and_a_newly_issued_key_works_at_once() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.get(&tenant, "/v1/agents").await.expect(200);
    let revoked = app.db.revoke_api_keys(&tenant.id, 1).await.expect("revoke");
    assert_eq!(revoked, Some(1));
    app.get(&tenant, "/v1/agents")
        .await
        .expect_error(401, "API_KEY_REVOKED");

    let fresh = ApiKey::generate();
    assert!(
        app.db
            .add_api_key(&tenant.id, fresh.hash(), 2)
            .await
            .expect("issue")
    );
    app.send(Method::GET, "/v1/agents", Some(fresh.expose()), None)
        .await
        .expect(200);
    app.shutdown().await;
}

#[tokio::test]
async fn an_inactive_tenant_is_tenant_inactive_until_reactivated() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.change(&tenant, TenantChange::Active(false)).await;
    app.post(
        &tenant,
        "/v1/agencies",
        json!({ "platformAgencyId": "a", "name": "A" }),
    )
    .await
    .expect_error(403, "TENANT_INACTIVE");
    app.get(&tenant, "/v1/agents")
        .await
        .expect_error(403, "TENANT_INACTIVE");
    app.change(&tenant, TenantChange::Active(true)).await;
    app.get(&tenant, "/v1/agents").await.expect(200);
    app.shutdown().await;
}

#[tokio::test]
async fn an_allowlist_without_the_peer_is_ip_not_allowed() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let elsewhere = parse_allowlist(&["10.0.0.0/8".into()]).expect("cidr");
    app.change(&tenant, TenantChange::IpAllowlist(elsewhere))
        .await;
    app.get(&tenant, "/v1/agents")
        .await
        .expect_error(403, "IP_NOT_ALLOWED");

    let loopback = parse_allowlist(&["10.0.0.0/8".into(), "127.0.0.1".into()]).expect("cidr");
    app.change(&tenant, TenantChange::IpAllowlist(loopback))
        .await;
    app.get(&tenant, "/v1/agents").await.expect(200);
    app.change(&tenant, TenantChange::IpAllowlist(Vec::new()))
        .await;
    app.get(&tenant, "/v1/agents").await.expect(200);
    app.shutdown().await;
}

#[tokio::test]
async fn forwarded_for_is_ignored_unless_the_server_trusts_it() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let proxy_net = parse_allowlist(&["203.0.113.0/24".into()]).expect("cidr");
    app.change(&tenant, TenantChange::IpAllowlist(proxy_net))
        .await;
    let response = app
        .client
        .get(app.url("/v1/agents"))
        .bearer_auth(&tenant.key)
        .header("x-forwarded-for", "203.0.113.7")
        .send()
        .await
        .expect("sent");
    reply(response).await.expect_error(403, "IP_NOT_ALLOWED");
    app.shutdown().await;

    let app = spawn_app_with(|config| config.trust_forwarded_for = true).await;
    let tenant = app.tenant().await;
    let proxy_net = parse_allowlist(&["203.0.113.0/24".into()]).expect("cidr");
    app.change(&tenant, TenantChange::IpAllowlist(proxy_net))
        .await;
    let send = |forwarded: &'static str| {
        app.client
            .get(app.url("/v1/agents"))
            .bearer_auth(&tenant.key)
            .header("x-forwarded-for", forwarded)
            .send()
    };
    // The last entry is the address the trusted proxy saw; earlier ones are client claims.
    reply(send("198.51.100.1, 203.0.113.7").await.expect("sent"))
        .await
        .expect(200);
    reply(send("203.0.113.7, 198.51.100.1").await.expect("sent"))
        .await
        .expect_error(403, "IP_NOT_ALLOWED");
    reply(send("not-an-address").await.expect("sent"))
        .await
        .expect_error(403, "IP_NOT_ALLOWED");
    app.shutdown().await;
}

#[tokio::test]
async fn authentication_is_checked_before_the_body() {
    let app = spawn_app().await;
    let response = app
        .client
        .post(app.url("/v1/agents"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("sent");
    reply(response).await.expect_error(401, "INVALID_API_KEY");
    app.shutdown().await;
}
