//! Runs the real `svc-cli webhook serve` binary: signed deliveries are recorded once in the
//! store's ledger, bad signatures are refused, failure events are kept, `--fetch` stores the
//! call's detail, and SIGTERM answers the request in flight before exiting 0.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use svc_contract::{CallScored, CallSource, FailureReason, sign};
use svc_test_support::webhook_serve;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;
use wiremock::MockServer;

use crate::helpers::{WEBHOOK_SERVE, webhook_serve_command};

const SECRET: &str = "whsec_serve_test_secret_0123456789";

/// A running `webhook serve` and the address it listens on.
struct Serving {
    child: Child,
    url: String,
    addr: String,
    _dir: tempfile::TempDir,
    store: std::path::PathBuf,
}

async fn serve(extra_env: &[(&str, &str)], extra_args: &[&str]) -> Serving {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store.db");
    let mut command = webhook_serve_command(dir.path(), &store, SECRET, extra_env, extra_args);
    let started = webhook_serve::start(&mut command, Duration::from_secs(30)).await;
    Serving {
        url: started.url(),
        addr: started.addr(),
        child: started.child,
        _dir: dir,
        store,
    }
}

fn body(event: &CallScored) -> Vec<u8> {
    serde_json::to_vec(event).expect("serialise")
}

fn scored(call_id: &str) -> CallScored {
    CallScored::scored(
        call_id,
        CallSource::Roleplay,
        "svc_agent_1",
        "svc_agency_1",
        "2026-03-01T10:05:30.000Z",
        "req_1",
    )
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

async fn post(url: &str, webhook_id: &str, body: &[u8], secret: &str) -> u16 {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("x-service-signature", sign(secret, now(), body))
        .header("x-service-webhook-id", webhook_id)
        .body(body.to_vec())
        .send()
        .await
        .expect("post")
        .status()
        .as_u16()
}

fn count(store: &Path, sql: &str) -> i64 {
    let conn = Connection::open(store).expect("open store");
    conn.query_row(sql, [], |r| r.get(0)).expect("query")
}

async fn wait_for(store: &Path, sql: &str, expected: i64) {
    for _ in 0..300 {
        if count(store, sql) == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{sql} never reached {expected} (now {})", count(store, sql));
}

pub(crate) async fn terminate(child: &mut Child) -> i32 {
    let pid = child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits after SIGTERM")
        .expect("wait");
    status.code().unwrap_or(-1)
}

#[tokio::test]
async fn signed_deliveries_are_recorded_once_and_a_bad_signature_is_refused() {
    let mut serving = serve(&[], &[]).await;
    let first = body(&scored("svc_call_1"));
    assert_eq!(post(&serving.url, "wh_1", &first, SECRET).await, 200);
    // The sender's retry: same id, signed afresh.
    assert_eq!(post(&serving.url, "wh_1", &first, SECRET).await, 200);
    assert_eq!(
        post(
            &serving.url,
            "wh_2",
            &body(&scored("svc_call_2")),
            "whsec_wrong"
        )
        .await,
        401
    );
    let failed =
        body(&scored("svc_call_3").not_scored(FailureReason::ScoringIncomplete, "rep never spoke"));
    assert_eq!(post(&serving.url, "wh_3", &failed, SECRET).await, 200);
    wait_for(&serving.store, "SELECT COUNT(*) FROM deliveries", 2).await;

    assert_eq!(terminate(&mut serving.child).await, 0, "SIGTERM exits 0");
    let conn = Connection::open(&serving.store).expect("open store");
    let (id_count, raw): (i64, String) = conn
        .query_row(
            "SELECT COUNT(*), body FROM deliveries WHERE webhook_id = 'wh_1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("wh_1");
    assert_eq!(id_count, 1, "the duplicate is not recorded twice");
    assert_eq!(raw.as_bytes(), first.as_slice(), "the raw body is kept");
    let (success, reason, message): (bool, String, String) = conn
        .query_row(
            "SELECT success, reason, reason_message FROM deliveries WHERE webhook_id = 'wh_3'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("the failure event is recorded");
    assert_eq!(
        (success, reason.as_str(), message.as_str()),
        (false, "SCORING_INCOMPLETE", "rep never spoke")
    );
    assert_eq!(
        count(
            &serving.store,
            "SELECT COUNT(*) FROM deliveries WHERE webhook_id = 'wh_2'"
        ),
        0,
        "a bad signature records nothing"
    );
}

#[tokio::test]
async fn sigterm_answers_the_request_in_flight_before_exiting() {
    let mut serving = serve(&[], &[]).await;
    let payload = body(&scored("svc_call_slow"));
    let mut stream = tokio::net::TcpStream::connect(&serving.addr)
        .await
        .expect("connect");
    let head = format!(
        "POST /webhooks HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         x-service-signature: {}\r\nx-service-webhook-id: wh_slow\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        serving.addr,
        sign(SECRET, now(), &payload),
        payload.len()
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let (start, rest) = payload.split_at(payload.len() / 2);
    stream.write_all(start).await.expect("half the body");
    stream.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_millis(200)).await;

    let pid = serving.child.id().expect("running").to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    tokio::time::sleep(Duration::from_millis(200)).await;
    stream.write_all(rest).await.expect("the rest of the body");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("response");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let status = tokio::time::timeout(Duration::from_secs(30), serving.child.wait())
        .await
        .expect("exits")
        .expect("wait");
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        count(
            &serving.store,
            "SELECT COUNT(*) FROM deliveries WHERE webhook_id = 'wh_slow'"
        ),
        1,
        "the delivery answered during shutdown is recorded"
    );
}

#[tokio::test]
async fn with_fetch_the_detail_of_each_scored_call_is_stored() {
    let server = MockServer::start().await;
    svc_fixtures::happy::mount(&server).await;
    let base = svc_fixtures::base_url(&server);
    let mut serving = serve(
        &[
            ("SVC_BASE_URL", &base),
            ("SVC_API_KEY", svc_fixtures::API_KEY),
        ],
        &["--fetch"],
    )
    .await;
    let call_id = svc_fixtures::bodies::ROLEPLAY_CALL_ID;
    assert_eq!(
        post(&serving.url, "wh_fetch", &body(&scored(call_id)), SECRET).await,
        200
    );
    wait_for(&serving.store, "SELECT COUNT(*) FROM calls", 1).await;
    assert_eq!(terminate(&mut serving.child).await, 0);
    let conn = Connection::open(&serving.store).expect("open store");
    let (detail, delivery): (String, String) = conn
        .query_row("SELECT detail_json, delivery FROM calls", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("the call");
    let detail: serde_json::Value = serde_json::from_str(&detail).expect("json");
    assert_eq!(detail, svc_fixtures::bodies::call_roleplay());
    assert_eq!(delivery, "webhook");
}

/// `--fetch` stores calls through `svc_reconcile::SinkHandler` after the ledger row: a detail
/// the service refuses for good (404) leaves the delivery in the ledger and the call to
/// reconcile, and a detail that fails for now (503 past the client's retries) is retried from
/// the inbox until the call is stored, once.
#[tokio::test]
async fn with_fetch_a_404_detail_is_left_to_reconcile_and_a_503_is_retried_until_stored() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, ResponseTemplate};

    let server = MockServer::start().await;
    let call_id = svc_fixtures::bodies::ROLEPLAY_CALL_ID;
    let unavailable = serde_json::json!({
        "error": { "code": "INTERNAL_ERROR", "message": "try again", "requestId": "req_1" }
    });
    // Reads are not retried by the client (--retries 0): the 503 fails the inbox's attempt,
    // which tries the entry again after its first backoff (5 s; the doubling after further
    // failures is svc-receiver's, tested there).
    Mock::given(method("GET"))
        .and(path(format!("/v1/calls/{call_id}")))
        .respond_with(ResponseTemplate::new(503).set_body_json(&unavailable))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/calls/svc_call_gone"))
        .respond_with(ResponseTemplate::new(404).set_body_json(serde_json::json!({
            "error": { "code": "CALL_NOT_FOUND", "message": "no such call", "requestId": "req_2" }
        })))
        .with_priority(1)
        .mount(&server)
        .await;
    svc_fixtures::happy::mount(&server).await;
    let base = svc_fixtures::base_url(&server);
    let mut serving = serve(
        &[
            ("SVC_BASE_URL", &base),
            ("SVC_API_KEY", svc_fixtures::API_KEY),
        ],
        &["--fetch", "--retries", "0"],
    )
    .await;
    let gone = body(&scored("svc_call_gone"));
    assert_eq!(post(&serving.url, "wh_gone", &gone, SECRET).await, 200);
    let flaky = body(&scored(call_id));
    assert_eq!(post(&serving.url, "wh_flaky", &flaky, SECRET).await, 200);
    // Both deliveries are in the ledger at once, whatever their calls' details do.
    wait_for(&serving.store, "SELECT COUNT(*) FROM deliveries", 2).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while count(&serving.store, "SELECT COUNT(*) FROM calls") < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the call was never stored after its detail came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reads = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path() == format!("/v1/calls/{call_id}"))
        .count();
    assert_eq!(
        reads, 2,
        "the first attempt met a 503, the second stored the call"
    );
    assert_eq!(terminate(&mut serving.child).await, 0);
    assert_eq!(
        count(
            &serving.store,
            &format!("SELECT COUNT(*) FROM calls WHERE id = '{call_id}' AND delivery = 'webhook'")
        ),
        1,
        "stored once, as delivered by its webhook"
    );
    assert_eq!(
        count(
            &serving.store,
            "SELECT COUNT(*) FROM calls WHERE id = 'svc_call_gone'"
        ),
        0,
        "a refused detail is left to reconcile"
    );
    assert_eq!(
        count(&serving.store, "SELECT COUNT(*) FROM deliveries"),
        2,
        "each delivery once in the ledger"
    );
}

#[tokio::test]
async fn a_missing_secret_or_store_directory_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let run = |args: Vec<String>, env: Vec<(&'static str, &'static str)>| {
        std::process::Command::new(env!("CARGO_BIN_EXE_svc-cli"))
            .args(args)
            .env_clear()
            .env("HOME", dir.path())
            .envs(env)
            .output()
            .expect("run")
    };
    let store = dir.path().join("store.db").display().to_string();
    let mut args: Vec<String> = WEBHOOK_SERVE.iter().map(|s| (*s).to_owned()).collect();
    args.extend(["--store".to_owned(), store.clone()]);
    let unset = run(args.clone(), vec![]);
    assert_eq!(unset.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unset.stderr).contains("WH is not set"));
    let bad = run(args, vec![("WH", "not-a-secret")]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        !String::from_utf8_lossy(&bad.stderr).contains("not-a-secret"),
        "never echoed"
    );

    let mut missing: Vec<String> = WEBHOOK_SERVE.iter().map(|s| (*s).to_owned()).collect();
    let nowhere = dir.path().join("nowhere/store.db").display().to_string();
    missing.extend(["--store".to_owned(), nowhere]);
    let out = run(missing, vec![("WH", SECRET)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}
