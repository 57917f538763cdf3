//! CORS: the API-key endpoints answer no `Access-Control-Allow-*`, preflight included.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{Reply, reply, spawn_app};

fn assert_no_cors(reply: &Reply) {
    for (name, _) in &reply.headers {
        assert!(
            !name.as_str().starts_with("access-control-"),
            "unexpected CORS header {name}"
        );
    }
}

#[tokio::test]
async fn api_key_endpoints_refuse_cross_origin_requests_and_preflights() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    for path in ["/v1/agencies", "/v1/agents"] {
        let preflight = app
            .client
            .request(Method::OPTIONS, app.url(path))
            .header("origin", "https://evil.example")
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
            .await
            .expect("sent");
        let preflight = reply(preflight).await;
        assert_no_cors(&preflight);
        assert!(
            !preflight.status.is_success(),
            "{path} preflight must not succeed"
        );
        assert!(preflight.request_id.is_some());

        let response = app
            .client
            .get(app.url("/v1/agents"))
            .bearer_auth(&tenant.key)
            .header("origin", "https://evil.example")
            .send()
            .await
            .expect("sent");
        assert_no_cors(&reply(response).await);
    }
    let response = app
        .client
        .post(app.url("/v1/agencies"))
        .bearer_auth(&tenant.key)
        .header("origin", "https://evil.example")
        .json(&json!({ "platformAgencyId": "a", "name": "A" }))
        .send()
        .await
        .expect("sent");
    assert_no_cors(&reply(response).await);
    app.shutdown().await;
}
