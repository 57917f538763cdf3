//! Operations: `--metrics-listen` serves `/metrics` with the requests, deliveries,
//! outbox and live calls of a known sequence; `/healthz` answers on the API listener; the
//! `serve` binary with `--log-format json` writes one JSON object per line, and its text logs
//! into a file are plain text.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use svc_service::db::TenantChange;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::helpers::{TestApp, TestTenant};
use crate::practice_helpers::{
    WebhookSink, practice_app, run_call, start_call, tenant_with_rep, token,
};

/// A free loopback port for `--metrics-listen`, which the server binds a moment later (out of
/// the range other tests' servers on port 0 get).
fn free_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], svc_test_support::ports::reserved_port()))
}

/// `name{labels}` → value of a Prometheus text exposition.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample");
            (series.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

async fn scrape(metrics: SocketAddr) -> BTreeMap<String, f64> {
    let response = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .expect("scrape");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().expect("text");
    assert!(content_type.starts_with("text/plain; version=0.0.4"));
    samples(&response.text().await.expect("body"))
}

/// Scrapes until `series` has `value` (the outbox works in the background), for up to 10 s.
async fn scrape_until(metrics: SocketAddr, series: &str, value: f64) -> BTreeMap<String, f64> {
    let mut last = BTreeMap::new();
    for _ in 0..100 {
        last = scrape(metrics).await;
        if last.get(series) == Some(&value) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{series} never reached {value}: {last:#?}");
}

async fn with_sink(app: &TestApp, sink: &WebhookSink) -> TestTenant {
    let (tenant, _) = tenant_with_rep(app).await;
    app.change(&tenant, TenantChange::WebhookUrl(Some(sink.url.clone())))
        .await;
    tenant
}

#[tokio::test]
async fn metrics_count_requests_deliveries_the_outbox_and_live_calls() {
    let metrics = free_port();
    let app = practice_app(|config| config.metrics_listen = Some(metrics)).await;
    let mut sink = WebhookSink::start().await;
    let tenant = with_sink(&app, &sink).await;
    let t = &tenant.id;

    app.get(&tenant, "/v1/agents").await.expect(200);
    let anonymous = app
        .client
        .get(app.url("/v1/agents"))
        .send()
        .await
        .expect("get");
    assert_eq!(anonymous.status(), 401);
    let lost = app
        .client
        .get(app.url("/v1/no-such-thing/42"))
        .send()
        .await
        .expect("get");
    assert_eq!(lost.status(), 404);
    let health = app
        .client
        .get(app.url("/healthz"))
        .send()
        .await
        .expect("get");
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.expect("body"), "ok\n");

    // One call delivered; one whose first attempt and retry both fail.
    run_call(&app, &tenant, &["Hi, my name is Sam"], 30).await;
    sink.next().await;
    let delivered =
        format!(r#"svc_service_webhook_deliveries_total{{tenant="{t}",outcome="delivered"}}"#);
    scrape_until(metrics, &delivered, 1.0).await;
    sink.answer(500);
    run_call(&app, &tenant, &["Hi, my name is Sam"], 30).await;
    sink.next().await;
    let retried =
        format!(r#"svc_service_webhook_deliveries_total{{tenant="{t}",outcome="retried"}}"#);
    let figures = scrape_until(metrics, &retried, 1.0).await;
    let pending = format!(r#"svc_service_webhook_outbox_pending{{tenant="{t}"}}"#);
    assert_eq!(figures[&pending], 1.0, "the retry waits in the outbox");
    app.clock.advance(chrono::Duration::seconds(1));
    sink.next().await;
    let failed =
        format!(r#"svc_service_webhook_deliveries_total{{tenant="{t}",outcome="failed"}}"#);
    let figures = scrape_until(metrics, &failed, 1.0).await;
    assert_eq!(figures[&delivered], 1.0);
    assert_eq!(figures[&retried], 1.0);
    assert_eq!(figures[&pending], 0.0, "given up: nothing pending");
    let live = format!(r#"svc_service_live_calls{{tenant="{t}"}}"#);
    assert_eq!(figures[&live], 0.0);

    let requests = |method: &str, route: &str, status: u16| {
        let series = format!(
            r#"svc_service_http_requests_total{{method="{method}",route="{route}",status="{status}"}}"#
        );
        figures.get(&series).copied().unwrap_or(0.0)
    };
    assert_eq!(requests("GET", "/v1/agents", 200), 1.0);
    assert_eq!(requests("GET", "/v1/agents", 401), 1.0);
    assert_eq!(
        requests("GET", "unmatched", 404),
        1.0,
        "no route: no path label"
    );
    assert_eq!(requests("GET", "/healthz", 200), 1.0);
    assert_eq!(
        requests("POST", "/v1/session", 200),
        2.0,
        "two tokens minted"
    );
    assert_eq!(
        figures[r#"svc_service_http_request_duration_seconds_count{method="GET",route="/v1/agents"}"#],
        2.0
    );
    assert_eq!(
        figures[r#"svc_service_http_request_duration_seconds_bucket{method="GET",route="/v1/agents",le="+Inf"}"#],
        2.0,
        "a true histogram"
    );
    assert!(
        !figures.keys().any(|k| k.contains("/v1/no-such-thing")),
        "paths never become labels"
    );

    // A call live now.
    let token = token(&app, &tenant).await;
    let (_call_id, _client) = start_call(&app, &token).await;
    let figures = scrape(metrics).await;
    assert_eq!(figures[&live], 1.0);
    let healthz = reqwest::get(format!("http://{metrics}/healthz"))
        .await
        .expect("healthz");
    assert_eq!(healthz.status(), 200);
    app.shutdown().await;
}

#[tokio::test]
async fn without_metrics_listen_healthz_is_there_and_metrics_is_not() {
    let app = practice_app(|_| {}).await;
    let health = app
        .client
        .get(app.url("/healthz"))
        .send()
        .await
        .expect("get");
    assert_eq!(health.status(), 200);
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .expect("get");
    assert_eq!(metrics.status(), 404, "never on the API listener");
    app.shutdown().await;
}

#[tokio::test]
async fn serve_with_log_format_json_writes_one_object_per_line() {
    let dir = tempfile::tempdir().expect("dir");
    let metrics = free_port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-service"))
        .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json"])
        .arg("--db")
        .arg(dir.path().join("svc.db"))
        .arg("--metrics-listen")
        .arg(metrics.to_string())
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn svc-service");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut logged = Vec::new();
    let api = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("read") {
            logged.push(line.clone());
            let value: Value = serde_json::from_str(&line).expect("a JSON line");
            if value["message"] == "serving the v1 API" {
                let address = value["fields"]["address"].as_str().expect("address");
                assert!(!address.starts_with("Some("), "{line}");
                return address.to_owned();
            }
        }
        panic!("svc-service exited before serving: {logged:?}");
    })
    .await
    .expect("serves");
    let health = reqwest::get(format!("http://{api}/healthz"))
        .await
        .expect("get");
    assert_eq!(health.status(), 200);
    let scraped = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .expect("get");
    assert_eq!(scraped.status(), 200);
    let pid = child.id().expect("running").to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    while let Some(line) = lines.next_line().await.expect("read") {
        logged.push(line);
    }
    let status = child.wait().await.expect("exit");
    assert!(status.success(), "{status:?}");
    for line in &logged {
        let value: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
        let time = value["time"].as_str().expect("time");
        chrono::DateTime::parse_from_rfc3339(time).expect("RFC 3339");
        assert!(
            value["level"].is_string() && value["message"].is_string(),
            "{line}"
        );
        assert!(value["fields"].is_object(), "{line}");
    }
    assert!(
        logged.iter().any(|l| l.contains("\"serving metrics\"")),
        "{logged:?}"
    );
    assert!(
        logged.iter().any(|l| l.contains("\"shutting down\"")),
        "{logged:?}"
    );
}

/// Text logs sent to a file carry no ANSI colour codes (svc-cli's never did) and name the
/// addresses plainly, not as `Some(…)` (issue "Every command in the docs works as pasted").
#[tokio::test]
async fn serve_logs_plain_text_with_plain_addresses_when_stderr_is_a_file() {
    let dir = tempfile::tempdir().expect("dir");
    let (api, metrics) = (free_port(), free_port());
    let log_path = dir.path().join("serve.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-service"))
        .arg("serve")
        .arg("--listen")
        .arg(api.to_string())
        .arg("--metrics-listen")
        .arg(metrics.to_string())
        .arg("--db")
        .arg(dir.path().join("svc.db"))
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("spawn svc-service");
    let client = reqwest::Client::new();
    let mut up = false;
    for _ in 0..400 {
        if let Ok(response) = client.get(format!("http://{api}/healthz")).send().await {
            assert_eq!(response.status(), 200);
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(up, "serve did not come up");
    let pid = child.id().expect("running").to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits after SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    let logged = std::fs::read_to_string(&log_path).expect("read the log");
    assert!(
        !logged.contains('\u{1b}'),
        "no ANSI escape codes: {logged:?}"
    );
    let serving = logged
        .lines()
        .find(|line| line.contains("serving the v1 API"))
        .unwrap_or_else(|| panic!("no start line: {logged}"));
    assert!(serving.contains(&format!("address={api}")), "{serving}");
    let metrics_line = logged
        .lines()
        .find(|line| line.contains("serving metrics"))
        .unwrap_or_else(|| panic!("no metrics line: {logged}"));
    assert!(
        metrics_line.contains(&format!("address={metrics}")),
        "{metrics_line}"
    );
    assert!(!logged.contains("Some("), "{logged}");
}

/// OTLP over gRPC is not built in: asked for it, `serve` stops before serving, with a clear
/// message and the usage exit code, rather than running without the traces it was told to send.
#[tokio::test]
async fn serve_refuses_an_otlp_protocol_it_cannot_speak() {
    let dir = tempfile::tempdir().expect("dir");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-service"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg("--db")
        .arg(dir.path().join("svc.db"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run svc-service");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\" is not supported"),
        "{stderr}"
    );
    assert!(!dir.path().join("svc.db").exists(), "nothing was started");
}
