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
    assert_eq!(
        doc["components"]["securitySchemes"]["apiKey"]["scheme"],
        "bearer"
    );
    for schema in [
        "Agent",
        "Agency",
        "AgentList",
        "RegisterAgentRequest",
        "ErrorEnvelope",
    ] {
        assert!(doc["components"]["schemas"][schema].is_object(), "{schema}");
    }
    let params = doc["paths"]["/agents"]["get"]["parameters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = params.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "agentId",
            "platformAgentId",
            "npn",
            "email",
            "agencyId",
            "limit",
            "cursor"
        ]
    );
    app.shutdown().await;
}

#[tokio::test]
async fn success_responses_carry_a_fresh_request_id_too() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let first = app.get(&tenant, "/v1/agents").await;
    let second = app.get(&tenant, "/v1/agents").await;
    let (a, b) = (first.request_id.clone(), second.request_id.clone());
    assert!(a.as_deref().is_some_and(|id| id.starts_with("req_")));
    assert_ne!(a, b);
    first.expect(200);
    app.shutdown().await;
}

/// `service/openapi.json` is the document the service serves, byte for byte (pretty-printed),
/// so that a clone holds the contract's machine-readable description without running anything
/// (issue "Every command in the docs works as pasted": the README pointed at a contract outside
/// the repository). After changing the API, `SVC_UPDATE_OPENAPI=1 cargo test -p svc-service
/// --test it committed_openapi` rewrites it; commit the result.
#[tokio::test]
async fn the_committed_openapi_document_is_the_one_the_service_serves() {
    let app = spawn_app().await;
    let served = app
        .send(Method::GET, "/v1/openapi.json", None, None)
        .await
        .expect(200);
    app.shutdown().await;
    let expected = format!(
        "{}\n",
        serde_json::to_string_pretty(&served).expect("serialise")
    );
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    if std::env::var_os("SVC_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &expected).expect("write service/openapi.json");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "service/openapi.json is not what GET /v1/openapi.json serves: run \
         SVC_UPDATE_OPENAPI=1 cargo test -p svc-service --test it committed_openapi and commit it"
    );
}

#[tokio::test]
async fn serve_runs_the_api_and_exits_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("dir");
    // Named ahead (the environment sets it), out of the range other tests' servers get.
    let port = svc_test_support::ports::reserved_port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-service"))
        .arg("serve")
        .env("SVC_DB", dir.path().join("s.db"))
        .env("SVC_LISTEN", format!("127.0.0.1:{port}"))
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .expect("spawn serve");
    let url = format!("http://127.0.0.1:{port}/v1/openapi.json");
    let client = reqwest::Client::new();
    let mut up = false;
    for _ in 0..200 {
        if let Ok(response) = client.get(&url).send().await {
            assert_eq!(response.status().as_u16(), 200);
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(up, "serve did not come up");
    let pid = child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("exits after SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status:?}");
}
