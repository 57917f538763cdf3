//! What the client refuses to do with the service's connection: follow a
//! redirect (the API key would go along), send the key in clear to a host that is not
//! loopback, or read a response body of any size.

use std::time::Duration;

use serde_json::Value;
use svc_client::{ApiKey, CallId, Client, ClientError, MAX_BODY_BYTES};
use svc_fixtures::bodies::{self, ROLEPLAY_CALL_ID};
use svc_fixtures::{API_KEY, happy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{Sandbox, client, recording_policy, requests_to};

fn call_id() -> CallId {
    ROLEPLAY_CALL_ID.parse().expect("call id")
}

/// Answers `GET /v1/calls/{ROLEPLAY_CALL_ID}` with a redirect to the same call under
/// `/moved`, on the same host, where the call itself is served.
async fn redirecting_server(status: u16) -> MockServer {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    let target = format!("{}/moved/v1/calls/{ROLEPLAY_CALL_ID}", server.uri());
    Mock::given(method("GET"))
        .and(path(format!("/v1/calls/{ROLEPLAY_CALL_ID}")))
        .respond_with(ResponseTemplate::new(status).insert_header("location", target.as_str()))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/moved/v1/calls/{ROLEPLAY_CALL_ID}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(bodies::call_roleplay()))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_the_key_never_reaches_its_target() {
    let server = redirecting_server(302).await;
    let (policy, waits) = recording_policy(3);
    let error = client(&server, policy)
        .call(&call_id())
        .await
        .expect_err("a redirect is an error");
    let ClientError::Redirect { status, location } = &error else {
        panic!("expected a redirect error, got {error:?}");
    };
    assert_eq!(*status, 302);
    assert!(
        location
            .as_deref()
            .is_some_and(|l| l.ends_with("/moved/v1/calls/svc_call_fx0001")),
        "{location:?}"
    );
    assert!(waits.lock().expect("waits").is_empty(), "not retried");
    let moved = format!("/moved/v1/calls/{ROLEPLAY_CALL_ID}");
    assert!(requests_to(&server, "GET", &moved).await.is_empty());
}

#[tokio::test]
async fn calls_show_answered_with_a_redirect_exits_2_naming_where_it_points() {
    let server = redirecting_server(301).await;
    let run = Sandbox::for_server(&server)
        .run(&["calls", "show", ROLEPLAY_CALL_ID])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("redirect") && run.stderr.contains("/moved/v1/calls/"),
        "{run:?}"
    );
    let moved = format!("/moved/v1/calls/{ROLEPLAY_CALL_ID}");
    assert!(requests_to(&server, "GET", &moved).await.is_empty());
}

#[tokio::test]
async fn reconcile_answered_with_a_redirect_stops_with_exit_2() {
    let server = MockServer::start().await;
    let target = format!("{}/moved/v1/calls", server.uri());
    Mock::given(method("GET"))
        .and(path("/v1/calls"))
        .respond_with(ResponseTemplate::new(308).insert_header("location", target.as_str()))
        .mount(&server)
        .await;
    let sandbox = Sandbox::for_server(&server);
    let store = sandbox.path("calls.db");
    let store = store.to_str().expect("utf-8 path");
    let run = sandbox
        .run(&[
            "--json",
            "reconcile",
            "--store",
            store,
            "--source",
            "roleplay",
        ])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.contains("redirect"), "{run:?}");
    assert!(
        requests_to(&server, "GET", "/moved/v1/calls")
            .await
            .is_empty()
    );
}

#[test]
fn plain_http_is_refused_for_a_host_that_is_not_loopback_unless_allowed() {
    let build = |url: &str, allow: bool| {
        Client::builder(url)
            .api_key(ApiKey::new(API_KEY))
            .allow_insecure_http(allow)
            .build()
    };
    for url in [
        "http://127.0.0.1:8080/v1",
        "http://127.8.9.10/v1",
        "http://localhost:8080/v1",
        "http://LocalHost/v1",
        "http://[::1]:8080/v1",
        "https://svc.example.test/v1",
        "https://10.0.0.1/v1",
    ] {
        assert!(build(url, false).is_ok(), "{url} is allowed");
    }
    for url in [
        "http://svc.example.test/v1",
        "http://10.0.0.1/v1",
        "http://0.0.0.0:8080/v1",
        "http://[::2]/v1",
        "http://[::ffff:10.0.0.1]/v1",
        "http://localhost.example.test/v1",
        "http://128.0.0.1/v1",
    ] {
        let refused = build(url, false).expect_err(url);
        assert!(
            matches!(refused, ClientError::InsecureHttp { .. }),
            "{url}: {refused:?}"
        );
        assert!(
            refused.to_string().contains("allow plain HTTP explicitly"),
            "{refused}"
        );
        assert!(build(url, true).is_ok(), "{url} with allow_insecure_http");
    }
}

/// The wiremock server under a name that is not loopback: Linux connects `0.0.0.0` to the
/// local host, so the request still reaches the server on 127.0.0.1.
fn unspecified_base_url(server: &MockServer) -> String {
    let port = server.address().port();
    format!("http://0.0.0.0:{port}/v1")
}

#[tokio::test]
async fn the_cli_refuses_plain_http_to_a_host_that_is_not_loopback_unless_insecure_http() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    let list = [
        "calls",
        "list",
        "--source",
        "roleplay",
        "--from",
        "2026-01-01T00:00:00Z",
    ];
    let base_url = unspecified_base_url(&server);
    let sandbox = |env: &[(&str, &str)]| {
        env.iter().fold(
            Sandbox::new()
                .env("SVC_BASE_URL", &base_url)
                .env("SVC_API_KEY", API_KEY),
            |sandbox, (key, value)| sandbox.env(key, value),
        )
    };

    let refused = sandbox(&[]).run(&list).await;
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused.stderr.contains("--insecure-http")
            && refused.stderr.contains("SVC_INSECURE_HTTP")
            && refused.stderr.contains("http://0.0.0.0:"),
        "{refused:?}"
    );
    assert!(requests_to(&server, "GET", "/v1/calls").await.is_empty());
    let falsey = sandbox(&[("SVC_INSECURE_HTTP", "0")]).run(&list).await;
    assert_eq!(falsey.code, 2, "{falsey:?}");

    let by_flag = sandbox(&[])
        .run(&[&["--insecure-http"][..], &list].concat())
        .await;
    assert_eq!(by_flag.code, 0, "{by_flag:?}");
    assert!(by_flag.stdout.contains("svc_call_fx0001"), "{by_flag:?}");
    for value in ["1", "true"] {
        let by_env = sandbox(&[("SVC_INSECURE_HTTP", value)]).run(&list).await;
        assert_eq!(by_env.code, 0, "SVC_INSECURE_HTTP={value}: {by_env:?}");
    }
    assert_eq!(requests_to(&server, "GET", "/v1/calls").await.len(), 3);
}

#[tokio::test]
async fn config_set_refuses_a_plain_http_base_url_unless_insecure_http() {
    let sandbox = Sandbox::new();
    let url = "http://svc.example.test/v1";
    let refused = sandbox.run(&["--base-url", url, "config", "set"]).await;
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("--insecure-http"), "{refused:?}");
    let saved = sandbox
        .run(&["--insecure-http", "--base-url", url, "config", "set"])
        .await;
    assert_eq!(saved.code, 0, "{saved:?}");
}

/// A call detail whose JSON text is exactly `len` bytes long.
fn detail_of_len(len: usize) -> Vec<u8> {
    let mut detail = bodies::call_roleplay();
    detail["padding"] = Value::String(String::new());
    let base = serde_json::to_vec(&detail).expect("json").len();
    detail["padding"] = Value::String("x".repeat(len - base));
    let bytes = serde_json::to_vec(&detail).expect("json");
    assert_eq!(bytes.len(), len);
    bytes
}

async fn server_answering_the_call_with(body: Vec<u8>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/calls/{ROLEPLAY_CALL_ID}")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "application/json"))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_body_of_exactly_the_limit_is_read_and_one_byte_more_is_refused() {
    assert_eq!(MAX_BODY_BYTES, 16 * 1024 * 1024);
    let (policy, _) = recording_policy(0);
    let server = server_answering_the_call_with(detail_of_len(MAX_BODY_BYTES)).await;
    let call = client(&server, policy.clone()).call(&call_id()).await;
    assert!(call.is_ok(), "{call:?}");

    let server = server_answering_the_call_with(detail_of_len(MAX_BODY_BYTES + 1)).await;
    let error = client(&server, policy)
        .call(&call_id())
        .await
        .expect_err("over the limit");
    assert!(
        matches!(error, ClientError::BodyTooLarge { limit } if limit == MAX_BODY_BYTES),
        "{error:?}"
    );
    assert!(error.to_string().contains("16 MiB"), "{error}");

    let run = Sandbox::for_server(&server)
        .run(&["calls", "show", ROLEPLAY_CALL_ID])
        .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("16 MiB"), "{run:?}");
}

/// Serves one request with a chunked body (no length announced) that would run to 64 MiB;
/// returns its address and how many body bytes it wrote before the client hung up.
async fn endless_chunked_server() -> (String, tokio::task::JoinHandle<usize>) {
    const TOTAL: usize = 64 << 20;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut request = Vec::new();
        let mut buf = [0; 4096];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return 0,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        if socket.write_all(head.as_bytes()).await.is_err() {
            return 0;
        }
        let chunk = [b' '; 64 * 1024];
        let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
        framed.extend_from_slice(&chunk);
        framed.extend_from_slice(b"\r\n");
        let mut sent = 0;
        while sent < TOTAL {
            if socket.write_all(&framed).await.is_err() {
                return sent;
            }
            sent += chunk.len();
        }
        let _ = socket.write_all(b"0\r\n\r\n").await;
        sent
    });
    (format!("http://{address}/v1"), task)
}

#[tokio::test]
async fn a_body_with_no_length_is_cut_off_at_the_limit_not_read_to_its_end() {
    let (base_url, server) = endless_chunked_server().await;
    let (policy, _) = recording_policy(0);
    let client = Client::builder(base_url)
        .api_key(ApiKey::new(API_KEY))
        .timeout(Duration::from_secs(30))
        .retry(policy)
        .max_body_bytes(1 << 20)
        .build()
        .expect("client");
    let error = client.call(&call_id()).await.expect_err("over the limit");
    assert!(
        matches!(error, ClientError::BodyTooLarge { limit } if limit == 1 << 20),
        "{error:?}"
    );
    drop(client);
    let sent = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server stops once the client hangs up")
        .expect("server task");
    // What the server wrote past the limit is at most what the sockets' buffers hold.
    assert!(sent < 16 << 20, "the server wrote {sent} bytes");
}
