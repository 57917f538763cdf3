//! The links the service hands out are built from its public URL, never from the request's
//! `Host` header.

use serde_json::json;

use crate::practice_helpers::{practice_app, redeem, tenant_with_rep, token};

#[tokio::test]
async fn a_forged_host_header_is_never_echoed_in_the_connection_url() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let started = reqwest::Client::new()
        .post(app.url("/v1/roleplay/session"))
        .bearer_auth(&token)
        .header("host", "evil.example")
        .json(&json!({ "drillKey": "ma-full-sale" }))
        .send()
        .await
        .expect("send");
    assert_eq!(started.status().as_u16(), 200);
    let body: serde_json::Value = started.json().await.expect("json");
    let url = body["connectionUrl"].as_str().expect("url");
    assert!(
        url.starts_with(&format!("ws://{}/v1/live/", app.addr)),
        "{url}"
    );
    assert!(!url.contains("evil"), "{url}");
}

#[tokio::test]
async fn an_https_public_url_gives_a_wss_connection_url() {
    let app =
        practice_app(|config| config.public_url = Some("https://svc.example.test/".into())).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let started = redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect(200);
    assert!(
        started["connectionUrl"]
            .as_str()
            .is_some_and(|u| u.starts_with("wss://svc.example.test/v1/live/ext_")),
        "{started}"
    );
}
