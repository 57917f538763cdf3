//! The rep console's HTTP surface, without a browser: the page and its assets, the
//! console's own backend minting tokens with a key that never appears in any answer, and the
//! guard against other sites (rebound hosts, foreign origins, no CORS).

use reqwest::header::{
    ACCESS_CONTROL_ALLOW_ORIGIN, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HOST, ORIGIN,
};
use serde_json::{Value, json};

use crate::browser::RunningSandbox;
use crate::helpers::Sandbox as TestDir;

fn console_base(sandbox: &RunningSandbox) -> String {
    sandbox.console_url.trim_end_matches("/console").to_owned()
}

async fn body_of(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

#[tokio::test]
async fn the_console_serves_its_page_and_mints_tokens_without_ever_showing_the_key() {
    let dir = TestDir::new();
    let sandbox = RunningSandbox::start(&dir).await;
    let base = console_base(&sandbox);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    assert_ne!(
        base,
        sandbox.api_origin(),
        "the console has an origin of its own"
    );

    let page = http.get(&sandbox.console_url).send().await.expect("page");
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
    let policy = page.headers()[CONTENT_SECURITY_POLICY]
        .to_str()
        .expect("policy")
        .to_owned();
    assert!(
        policy.contains(&format!("script-src 'self' {}", sandbox.api_origin())),
        "{policy}"
    );
    let (_, html) = body_of(page).await;
    assert!(html.contains(&format!(r#"content="{}""#, sandbox.base_url)));
    let mut everything = html.clone();
    for (path, content_type) in [
        ("/console/console.js", "text/javascript; charset=utf-8"),
        ("/console/console.css", "text/css; charset=utf-8"),
        ("/console/favicon.svg", "image/svg+xml"),
    ] {
        let response = http.get(format!("{base}{path}")).send().await.expect(path);
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()[CONTENT_TYPE], content_type, "{path}");
        everything.push_str(&body_of(response).await.1);
    }
    let root = http.get(format!("{base}/")).send().await.expect("root");
    assert_eq!(root.status(), 303);
    assert_eq!(root.headers()["location"], "/console");

    let (status, agents) = body_of(
        http.get(format!("{base}/console/api/agents"))
            .send()
            .await
            .expect("agents"),
    )
    .await;
    assert_eq!(status, 200, "{agents}");
    let agents: Value = serde_json::from_str(&agents).expect("JSON");
    assert_eq!(agents["truncated"], false);
    let picked: Vec<&str> = agents["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["platformAgentId"].as_str())
        .collect();
    assert_eq!(picked, ["rep-ada", "rep-grace"]);
    assert_eq!(agents["agents"][0]["name"], "Ada Lovelace");
    everything.push_str(&agents.to_string());

    let minted = http
        .post(format!("{base}/console/api/token"))
        .header(ORIGIN, &base)
        .json(&json!({ "platformAgentId": "rep-ada" }))
        .send()
        .await
        .expect("mint");
    assert_eq!(minted.status(), 200);
    assert_eq!(minted.headers()[CACHE_CONTROL], "no-store");
    let (_, token) = body_of(minted).await;
    let token: Value = serde_json::from_str(&token).expect("JSON");
    assert_eq!(
        token
            .as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["expiresAt".to_owned(), "token".to_owned()])
    );
    everything.push_str(&token.to_string());

    let by_agent_id = http
        .post(format!("{base}/console/api/token"))
        .json(&json!({ "agentId": agents["agents"][1]["agentId"] }))
        .send()
        .await
        .expect("mint by agentId");
    assert_eq!(by_agent_id.status(), 200);

    assert!(
        !everything.contains(&sandbox.api_key),
        "the API key is in nothing the console serves"
    );
    assert!(!everything.contains("svc_live_"));
}

#[tokio::test]
async fn the_console_refuses_other_sites_and_explains_bad_requests() {
    let dir = TestDir::new();
    let sandbox = RunningSandbox::start(&dir).await;
    let base = console_base(&sandbox);
    let http = reqwest::Client::new();
    let error = |body: &str| -> (String, String) {
        let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        (
            value["error"]["code"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            value["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };

    // A page of another site, through DNS rebinding or a cross-origin POST.
    let (status, body) = body_of(
        http.get(&sandbox.console_url)
            .header(HOST, "rebind.example:8788")
            .send()
            .await
            .expect("rebound"),
    )
    .await;
    assert_eq!(status, 403);
    assert!(error(&body).1.contains("DNS rebinding"), "{body}");
    let (status, body) = body_of(
        http.post(format!("{base}/console/api/token"))
            .header(ORIGIN, "https://attacker.example")
            .json(&json!({ "platformAgentId": "rep-ada" }))
            .send()
            .await
            .expect("foreign origin"),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(error(&body).0, "FORBIDDEN");
    let preflight = http
        .request(
            reqwest::Method::OPTIONS,
            format!("{base}/console/api/token"),
        )
        .header(ORIGIN, "https://attacker.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .expect("preflight");
    assert!(
        preflight
            .headers()
            .get(ACCESS_CONTROL_ALLOW_ORIGIN)
            .is_none()
    );

    // Requests the console cannot act on, in the service's words where the service refused.
    for (body, status, code) in [
        (
            json!({ "platformAgentId": "nobody" }),
            404,
            "AGENT_NOT_FOUND",
        ),
        (
            json!({ "platformAgentId": "rep-ada", "agentId": "svc_agent_x" }),
            400,
            "INVALID_REQUEST",
        ),
        (json!({ "agentId": "rep-ada" }), 400, "INVALID_REQUEST"),
        (json!({ "apiKey": "x" }), 400, "INVALID_REQUEST"),
    ] {
        let (got, text) = body_of(
            http.post(format!("{base}/console/api/token"))
                .json(&body)
                .send()
                .await
                .expect("mint"),
        )
        .await;
        assert_eq!(
            (got, error(&text).0.as_str()),
            (status, code),
            "{body}: {text}"
        );
    }
    for (path, status, code) in [
        ("/console/api/calls/svc_call_nothing", 404, "CALL_NOT_FOUND"),
        ("/console/api/calls/not-a-call", 400, "INVALID_REQUEST"),
        ("/console/nothing-here", 404, "NOT_FOUND"),
    ] {
        let (got, text) =
            body_of(http.get(format!("{base}{path}")).send().await.expect(path)).await;
        assert_eq!(
            (got, error(&text).0.as_str()),
            (status, code),
            "{path}: {text}"
        );
    }
}

#[tokio::test]
async fn the_service_serves_its_sdk_to_any_origin() {
    let dir = TestDir::new();
    let sandbox = RunningSandbox::start(&dir).await;
    let http = reqwest::Client::new();
    for (path, content_type, needle) in [
        (
            "/sdk/v1/svc-sdk.js",
            "text/javascript; charset=utf-8",
            "export class SvcCall",
        ),
        (
            "/sdk/v1/svc-sdk.d.ts",
            "text/plain; charset=utf-8",
            "export declare class SvcCall",
        ),
    ] {
        let response = http
            .get(format!("{}{path}", sandbox.api_origin()))
            .header(ORIGIN, "https://app.example")
            .send()
            .await
            .expect(path);
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()[CONTENT_TYPE], content_type);
        assert_eq!(response.headers()[ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert!(response.headers().contains_key("x-service-request-id"));
        assert!(body_of(response).await.1.contains(needle), "{path}");
    }
}

#[tokio::test]
async fn a_second_sandbox_still_starts_when_the_default_console_port_is_taken() {
    let (first_dir, second_dir) = (TestDir::new(), TestDir::new());
    let first = RunningSandbox::start_with(&first_dir, &[]).await;
    let second = RunningSandbox::start_with(&second_dir, &[]).await;
    assert_ne!(first.console_url, second.console_url);
    for sandbox in [&first, &second] {
        let page = reqwest::get(&sandbox.console_url).await.expect("console");
        assert_eq!(page.status(), 200, "{}", sandbox.console_url);
    }
}
