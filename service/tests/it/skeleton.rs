//! The server's frame: request ids, fallbacks, OpenAPI, shutdown.

use reqwest::Method;
use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn unknown_routes_answer_the_envelope_with_the_request_id() {
    let app = spawn_app().await;
    let reply = app.send(Method::GET, "/v1/nope", None, None).await;
    reply.expect_error(404, "NOT_FOUND");
    let reply = app.send(Method::GET, "/elsewhere", None, None).await;
    reply.expect_error(404, "NOT_FOUND");
    app.shutdown().await;
}

#[tokio::test]
async fn a_wrong_method_is_405_in_the_envelope() {
    let app = spawn_app().await;
    let reply = app.send(Method::DELETE, "/v1/agents", None, None).await;
    reply.expect_error(405, "METHOD_NOT_ALLOWED");
    app.shutdown().await;
}

#[tokio::test]
async fn openapi_describes_the_roster_endpoints() {
    let app = spawn_app().await;
    let doc = app
        .send(Method::GET, "/v1/openapi.json", None, None)
        .await
        .expect(200);
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1"))
    );
    assert!(doc["paths"]["/agencies"]["post"].is_object());
    assert!(doc["paths"]["/agents"]["get"].is_object());
    assert!(doc["paths"]["/agents"]["post"].is_object());
    assert_eq!(doc["servers"][0]["url"], json!("/v1"));
    app.shutdown().await;
}
