//! One trace per delivery, from the service to the tenant's commit (issue 41, item 4): the real
//! `svc-cli sandbox` (the service, in-process) and `svc-cli webhook serve`, each exporting its
//! spans over OTLP/HTTP JSON to a collector served here; the service's attempt span and the
//! receiver's spans share one trace id, the receiver's are children of the attempt, and the
//! ledger's commit is inside the worker's; a resend the operator asks for is an attempt of the
//! same trace, and the receiver's span of its arrival a child of it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use serde_json::Value;
use svc_test_support::webhook_serve;

use crate::helpers::{Sandbox as TestDir, webhook_serve_command};
use crate::sandbox::{Running, deliveries_when_idle, ingest_one, real_calls_agency};
use crate::webhook_serve::terminate;

/// A span as the collector received it.
#[derive(Debug, Clone)]
struct Span {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: Vec<(String, String)>,
}

impl Span {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// An OTLP/HTTP JSON collector on the loopback: every span posted to `/v1/traces`.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Collector {
    async fn start() -> (Self, String) {
        let collector = Self::default();
        let spans = Arc::clone(&collector.spans);
        let app = Router::new().route(
            "/v1/traces",
            post(move |body: Bytes| {
                let spans = Arc::clone(&spans);
                async move {
                    let request: Value = serde_json::from_slice(&body).expect("OTLP JSON");
                    spans.lock().expect("spans").extend(spans_of(&request));
                    "{}"
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (collector, format!("http://{addr}"))
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().expect("spans").clone()
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The spans of an `ExportTraceServiceRequest` in its JSON form.
fn spans_of(request: &Value) -> Vec<Span> {
    let mut found = Vec::new();
    for resource in request["resourceSpans"].as_array().into_iter().flatten() {
        let service = resource["resource"]["attributes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["key"] == "service.name")
            .map(|a| text(&a["value"]["stringValue"]))
            .unwrap_or_default();
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                let attributes = span["attributes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| {
                        let value = a["value"]
                            .as_object()
                            .and_then(|v| v.values().next())
                            .map(text)
                            .unwrap_or_default();
                        (text(&a["key"]), value)
                    })
                    .collect();
                found.push(Span {
                    service: service.clone(),
                    name: text(&span["name"]),
                    trace_id: text(&span["traceId"]),
                    span_id: text(&span["spanId"]),
                    parent_span_id: text(&span["parentSpanId"]),
                    attributes,
                });
            }
        }
    }
    found
}

fn otlp_env(endpoint: &str, service: &str) -> Vec<(String, String)> {
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_SERVICE_NAME", service),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn ledger_count(store: &std::path::Path, webhook_id: &str) -> i64 {
    rusqlite::Connection::open(store)
        .and_then(|conn| {
            conn.query_row(
                "SELECT COUNT(*) FROM deliveries WHERE webhook_id = ?1",
                [webhook_id],
                |r| r.get(0),
            )
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn one_trace_runs_from_the_services_attempt_to_the_receivers_commit() {
    let (collector, endpoint) = Collector::start().await;

    // The service (the sandbox, and the operator's ingest beside it), exporting as `service`;
    // a first start makes its tenant and signing secret.
    let mut dir = TestDir::new();
    for (key, value) in otlp_env(&endpoint, "service") {
        dir = dir.env(&key, &value);
    }
    dir.write(
        "roster.csv",
        "platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId\n\
         agency-1,First Agency,Ada,Lovelace,ada@example.com,1234567,rep-ada\n",
    );
    dir.write("call.wav", b"RIFF\x1c\x00\x00\x00WAVEfmt fake-pcm");
    let first = Running::start(&dir, &["--roster", "roster.csv"]).await;
    let secret = first.export("SVC_SIGNING_SECRET").to_owned();
    let (code, log) = first.interrupt().await;
    assert_eq!(code, 0, "{log}");

    // The tenant's receiver, exporting as `tenant-receiver`.
    let home = tempfile::tempdir().expect("dir");
    let store = home.path().join("store.db");
    let receiver_env = otlp_env(&endpoint, "tenant-receiver");
    let env: Vec<(&str, &str)> = receiver_env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut command = webhook_serve_command(home.path(), &store, &secret, &env, &[]);
    let mut receiving = webhook_serve::start(&mut command, Duration::from_secs(30)).await;

    // The sandbox sends a real call's webhook to it.
    let sandbox = Running::start(&dir, &["--webhook-url", &receiving.url()]).await;
    let agency = real_calls_agency(&sandbox, &dir, "agency-1", "First Agency").await;
    let call_id = ingest_one(&dir, "d-traced", &agency).await;
    let listed = deliveries_when_idle(&dir, "30s").await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let webhook_id = listed.json()["attempts"]
        .as_array()
        .and_then(|attempts| attempts.iter().find(|a| a["callId"] == call_id.as_str()))
        .and_then(|a| a["webhookId"].as_str())
        .unwrap_or_else(|| panic!("an attempt for {call_id}: {listed:?}"))
        .to_owned();
    for _ in 0..500 {
        if ledger_count(&store, &webhook_id) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        ledger_count(&store, &webhook_id),
        1,
        "recorded in the ledger"
    );
    // The operator resends it: one more attempt of the same delivery, in the same trace.
    let resent = dir
        .run(&[
            "--json",
            "sandbox",
            "resend",
            &webhook_id,
            "--db",
            "sandbox.db",
        ])
        .await;
    assert_eq!(resent.code, 0, "{resent:?}");
    assert_eq!(resent.json()["attempts"][0]["resend"], true, "{resent:?}");
    // Both stop cleanly, sending their last spans as they exit.
    let (code, log) = sandbox.interrupt().await;
    assert_eq!(code, 0, "{log}");
    assert_eq!(terminate(&mut receiving.child).await, 0);

    let spans = collector.spans();
    let of = |service: &str, name: &str| -> Vec<Span> {
        spans
            .iter()
            .filter(|s| {
                s.service == service
                    && s.name == name
                    && (s.attribute("webhook_id") == Some(webhook_id.as_str())
                        || s.attribute("call_id") == Some(call_id.as_str()))
            })
            .cloned()
            .collect()
    };
    let attempts = of("service", "webhook_attempt");
    assert_eq!(attempts.len(), 2, "the attempt and the resend: {spans:#?}");
    let (resends, attempts): (Vec<Span>, Vec<Span>) = attempts
        .into_iter()
        .partition(|a| a.attribute("resend") == Some("true"));
    assert_eq!(resends.len(), 1, "{resends:#?} {attempts:#?}");
    let (attempt, resend) = (&attempts[0], &resends[0]);
    assert_eq!(
        attempt.attribute("outcome"),
        Some("delivered"),
        "{attempt:?}"
    );
    assert_eq!(attempt.trace_id.len(), 32, "{attempt:?}");
    // The trace starts at the call's scoring (in the ingest), kept with the outbox row.
    let scoring = of("service", "call_scoring");
    assert_eq!(scoring.len(), 1, "{spans:#?}");
    assert_eq!(scoring[0].trace_id, attempt.trace_id);
    assert_eq!(attempt.parent_span_id, scoring[0].span_id);
    // The resend too, with the request it made carrying its span.
    assert_eq!(resend.attribute("outcome"), Some("resent"), "{resend:?}");
    assert_eq!(resend.trace_id, attempt.trace_id, "{resend:?}");
    assert_eq!(resend.parent_span_id, scoring[0].span_id, "{resend:?}");
    let resend_arrivals = of("tenant-receiver", "webhook_delivery")
        .into_iter()
        .filter(|d| d.parent_span_id == resend.span_id)
        .count();
    assert_eq!(resend_arrivals, 1, "the resend's arrival: {spans:#?}");

    // The route's and the worker's spans: in the attempt's trace, children of the attempt.
    let deliveries: Vec<Span> = of("tenant-receiver", "webhook_delivery")
        .into_iter()
        .filter(|d| d.parent_span_id != resend.span_id)
        .collect();
    assert_eq!(deliveries.len(), 2, "{spans:#?}");
    for delivery in &deliveries {
        assert_eq!(delivery.trace_id, attempt.trace_id, "{delivery:?}");
        assert_eq!(delivery.parent_span_id, attempt.span_id, "{delivery:?}");
    }
    let worker = deliveries
        .iter()
        .find(|d| d.attribute("outcome") == Some("done"))
        .unwrap_or_else(|| panic!("the worker's span: {deliveries:#?}"));
    assert_eq!(worker.attribute("attempt"), Some("1"), "{worker:?}");
    assert!(
        deliveries
            .iter()
            .any(|d| d.attribute("outcome") == Some("accepted")),
        "the route's span: {deliveries:#?}"
    );
    // The tenant's commit, inside the worker's span.
    let commits = of("tenant-receiver", "ledger_commit");
    assert_eq!(commits.len(), 1, "{spans:#?}");
    assert_eq!(commits[0].trace_id, attempt.trace_id);
    assert_eq!(commits[0].parent_span_id, worker.span_id);
    assert_eq!(commits[0].attribute("inserted"), Some("true"));
}

/// A protocol this build does not speak is refused before anything runs, with a clear message.
#[tokio::test]
async fn an_otlp_protocol_not_built_in_is_a_usage_error() {
    let dir = TestDir::new()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    let run = dir.run(&["completions", "bash"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\" is not supported: use http/protobuf"),
        "{run:?}"
    );
}
