//! `practice` against wiremock (the redeem call) and a small fake of the live transport built
//! here with tokio-tungstenite on 127.0.0.1:0, following BRIEF section 3 frame by frame.

use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use svc_fixtures::{bodies, respond};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use wiremock::matchers::{bearer_token, method, path};
use wiremock::{Mock, MockServer};

use crate::helpers::Sandbox;

const TICKET: &str = "tkt_fixture_0001";

/// How the fake live server behaves after `ready`.
#[derive(Clone, Copy)]
enum Behaviour {
    Normal,
    ErrorOnFirstSay,
    CeilingOnFirstSay,
}

/// Starts the fake live server; returns its `ws://` URL and the frames it received.
async fn live_server(behaviour: Behaviour) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!(
        "ws://{}/v1/live/ext_fx0001",
        listener.local_addr().expect("addr")
    );
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    tokio::spawn(async move {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
            return;
        };
        let send = |v: Value| Message::text(v.to_string());
        let mut says = 0;
        while let Some(Ok(Message::Text(text))) = ws.next().await {
            let frame: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
            log.lock().expect("log").push(frame.clone());
            match frame["type"].as_str() {
                Some("auth") if frame["ticket"] == TICKET => {
                    let _ = ws.send(send(json!({ "type": "ready", "callId": "svc_call_fx0001", "persona": { "name": "Margaret Ellis" } }))).await;
                    let _ = ws
                        .send(send(json!({ "type": "persona", "text": "Hello?" })))
                        .await;
                }
                Some("auth") => {
                    let _ = ws.send(send(json!({ "type": "error", "code": "INVALID_TOKEN", "message": "bad ticket" }))).await;
                    let _ = ws.close(None).await;
                    return;
                }
                Some("say") => {
                    says += 1;
                    if let (Behaviour::ErrorOnFirstSay, 1) = (behaviour, says) {
                        let _ = ws.send(send(json!({ "type": "error", "code": "INTERNAL_ERROR", "message": "persona crashed" }))).await;
                        let _ = ws.close(None).await;
                        return;
                    }
                    if let (Behaviour::CeilingOnFirstSay, 1) = (behaviour, says) {
                        let _ = ws.send(send(json!({ "type": "ended", "callId": "svc_call_fx0001", "durationSec": 7200 }))).await;
                        let _ = ws.close(None).await;
                        return;
                    }
                    let reply = format!("You said: {}", frame["text"].as_str().unwrap_or(""));
                    let _ = ws
                        .send(send(json!({ "type": "persona", "text": reply })))
                        .await;
                }
                Some("end") => {
                    let _ = ws.send(send(json!({ "type": "ended", "callId": "svc_call_fx0001", "durationSec": 42 }))).await;
                    let _ = ws.close(None).await;
                    return;
                }
                _ => {}
            }
        }
    });
    (url, received)
}

async fn redeem_server(connection_url: &str) -> MockServer {
    let server = MockServer::start().await;
    let mut session = bodies::roleplay_session();
    session["connectionUrl"] = json!(connection_url);
    Mock::given(method("POST"))
        .and(path("/v1/roleplay/session"))
        .and(bearer_token("the.session.jwt"))
        .respond_with(respond::json(200, session))
        .named("redeem")
        .mount(&server)
        .await;
    server
}

fn practice_sandbox(server: &MockServer) -> Sandbox {
    Sandbox::new().env("SVC_BASE_URL", &svc_fixtures::base_url(server))
}

#[tokio::test]
async fn practice_says_each_script_line_waits_for_replies_and_prints_the_ended_call() {
    let (url, frames) = live_server(Behaviour::Normal).await;
    let server = redeem_server(&url).await;
    let sandbox = practice_sandbox(&server);
    let script = sandbox.write(
        "script.txt",
        "Hi, this is Dana from Acme.\n\nCan I ask about your current plan?\n",
    );
    let run = sandbox
        .run(&[
            "--json",
            "practice",
            "--token",
            "the.session.jwt",
            "--difficulty",
            "Elite",
            "--state",
            "FL",
            "--script",
            script.to_str().expect("path"),
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.json(),
        json!({ "callId": "svc_call_fx0001", "durationSec": 42, "persona": { "name": "Margaret Ellis" } })
    );
    let frames = frames.lock().expect("frames").clone();
    assert_eq!(
        frames,
        vec![
            json!({ "type": "auth", "ticket": TICKET }),
            json!({ "type": "say", "text": "Hi, this is Dana from Acme." }),
            json!({ "type": "say", "text": "Can I ask about your current plan?" }),
            json!({ "type": "end" }),
        ]
    );
    let redeem = &server.received_requests().await.unwrap_or_default()[0];
    let body: Value = serde_json::from_slice(&redeem.body).expect("json");
    assert_eq!(
        body,
        json!({ "drillKey": "ma-full-sale", "difficulty": "Elite", "filters": { "state": "FL" } })
    );
}

#[tokio::test]
async fn practice_silent_connects_and_ends_without_speaking() {
    let (url, frames) = live_server(Behaviour::Normal).await;
    let server = redeem_server(&url).await;
    let run = practice_sandbox(&server)
        .run(&["practice", "--token", "the.session.jwt", "--silent"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("svc_call_fx0001") && run.stdout.contains("42"),
        "{run:?}"
    );
    assert!(run.stderr.contains("Margaret Ellis: Hello?"), "{run:?}");
    let types: Vec<Value> = frames
        .lock()
        .expect("frames")
        .iter()
        .map(|f| f["type"].clone())
        .collect();
    assert_eq!(types, vec![json!("auth"), json!("end")]);
}

#[tokio::test]
async fn a_spent_token_is_token_already_used_with_exit_4() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/roleplay/session"))
        .respond_with(respond::error("TOKEN_ALREADY_USED"))
        .named("spent token")
        .mount(&server)
        .await;
    let run = practice_sandbox(&server)
        .run(&["practice", "--token", "the.session.jwt", "--silent"])
        .await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("TOKEN_ALREADY_USED"));
    assert!(
        !run.stderr.contains("the.session.jwt"),
        "the token is never printed"
    );
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1,
        "redeem is never retried"
    );
}

#[tokio::test]
async fn a_rejected_ticket_is_invalid_token_and_the_spent_token_must_be_minted_again() {
    let (url, _) = live_server(Behaviour::Normal).await;
    let server = MockServer::start().await;
    let mut session = bodies::roleplay_session();
    session["connectionUrl"] = json!(url);
    session["connectionTicket"] = json!("tkt_wrong");
    Mock::given(method("POST"))
        .and(path("/v1/roleplay/session"))
        .respond_with(respond::json(200, session))
        .named("redeem")
        .mount(&server)
        .await;
    let run = practice_sandbox(&server)
        .run(&["practice", "--token", "t", "--silent"])
        .await;
    // The session token was consumed by the redeem, so a rerun cannot succeed: exit 1.
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("INVALID_TOKEN"), "{run:?}");
    assert!(run.stderr.contains("mint a new one"), "{run:?}");
}

#[tokio::test]
async fn an_error_frame_mid_call_surfaces_its_code_and_says_to_mint_a_new_token() {
    let (url, _) = live_server(Behaviour::ErrorOnFirstSay).await;
    let server = redeem_server(&url).await;
    let sandbox = practice_sandbox(&server);
    let script = sandbox.write("script.txt", "Hello\n");
    let run = sandbox
        .run(&[
            "practice",
            "--token",
            "the.session.jwt",
            "--script",
            script.to_str().expect("path"),
        ])
        .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("INTERNAL_ERROR: persona crashed"),
        "{run:?}"
    );
    assert!(run.stderr.contains("mint a new one"), "{run:?}");
}

#[tokio::test]
async fn a_live_endpoint_that_is_not_there_is_service_unavailable() {
    let server = redeem_server("ws://127.0.0.1:9/v1/live/ext_gone").await;
    let run = practice_sandbox(&server)
        .run(&["practice", "--token", "the.session.jwt", "--silent"])
        .await;
    // The token was spent by the redeem: the same command cannot succeed again.
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("SERVICE_UNAVAILABLE"), "{run:?}");
    assert!(run.stderr.contains("mint a new one"), "{run:?}");
}

#[tokio::test]
async fn a_plain_ws_transport_to_another_host_is_refused_unless_insecure_http() {
    // TEST-NET-3: nothing answers there, so a connection attempt would hang until the timeout.
    let server = redeem_server("ws://203.0.113.5:9/v1/live/ext_far").await;
    let started = std::time::Instant::now();
    let run = practice_sandbox(&server)
        .run(&[
            "practice",
            "--token",
            "the.session.jwt",
            "--silent",
            "--reply-timeout",
            "20",
        ])
        .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("INSECURE_TRANSPORT"), "{run:?}");
    assert!(run.stderr.contains("--insecure-http"), "{run:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "refused before connecting"
    );

    let server = redeem_server("ws://203.0.113.5:9/v1/live/ext_far").await;
    let run = practice_sandbox(&server)
        .run(&[
            "practice",
            "--token",
            "the.session.jwt",
            "--silent",
            "--reply-timeout",
            "1",
            "--insecure-http",
        ])
        .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("SERVICE_UNAVAILABLE"),
        "allowed, then tried: {run:?}"
    );
}

/// A redeem server answering every redeem with `code`.
async fn failing_redeem(code: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/roleplay/session"))
        .respond_with(respond::error(code))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_redeem_failure_after_the_token_was_spent_says_to_mint_a_new_one() {
    for code in ["SERVICE_UNAVAILABLE", "INTERNAL_ERROR", "DRILL_NOT_FOUND"] {
        let server = failing_redeem(code).await;
        let run = practice_sandbox(&server)
            .run(&["practice", "--token", "the.session.jwt", "--silent"])
            .await;
        assert_eq!(
            run.code, 1,
            "{code}: not 75, a rerun cannot succeed: {run:?}"
        );
        assert!(run.stderr.contains(code), "{run:?}");
        assert!(run.stderr.contains("svc-cli session mint"), "{run:?}");
    }
    // Raised before redemption: the token is kept, the usual classes apply.
    let server = failing_redeem("TOKEN_EXPIRED").await;
    let run = practice_sandbox(&server)
        .run(&["practice", "--token", "the.session.jwt", "--silent"])
        .await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(!run.stderr.contains("spent"), "{run:?}");
    let server = failing_redeem("TOKEN_ALREADY_USED").await;
    let run = practice_sandbox(&server)
        .run(&["practice", "--token", "the.session.jwt", "--silent"])
        .await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("svc-cli session mint"), "{run:?}");
}

#[tokio::test]
async fn practice_needs_a_script_or_silent() {
    let run = Sandbox::new()
        .env("SVC_BASE_URL", "http://127.0.0.1:9/v1")
        .run(&["practice", "--token", "t"])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
}

/// Issue 44: an empty token is refused before anything is sent (it used to come back 401).
#[tokio::test]
async fn an_empty_token_is_a_usage_error_and_sends_nothing() {
    let server = MockServer::start().await;
    for token in ["", "  "] {
        let run = Sandbox::new()
            .env("SVC_BASE_URL", &svc_fixtures::base_url(&server))
            .run(&["practice", "--token", token, "--silent"])
            .await;
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains("--token is empty"), "{run:?}");
    }
    let sent = server.received_requests().await.unwrap_or_default();
    assert!(sent.is_empty(), "nothing reaches the service: {sent:?}");
}

#[tokio::test]
async fn a_call_ended_by_the_service_mid_script_reports_the_ended_frame() {
    let (url, frames) = live_server(Behaviour::CeilingOnFirstSay).await;
    let server = redeem_server(&url).await;
    let sandbox = practice_sandbox(&server);
    let script = sandbox.write("script.txt", "First line\nSecond line\n");
    let run = sandbox
        .run(&[
            "--json",
            "practice",
            "--token",
            "the.session.jwt",
            "--script",
            script.to_str().expect("path"),
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["durationSec"], json!(7200));
    assert_eq!(
        frames.lock().expect("frames").len(),
        2,
        "auth and the first say only"
    );
}
