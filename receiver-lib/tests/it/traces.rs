//! One trace per delivery (feature `opentelemetry`): the route's and the inbox worker's
//! `webhook_delivery` spans are children of the sender's span its `traceparent` names, with the
//! webhook id, attempt and outcome, and user code's own spans inside the worker's; a delivery
//! with a malformed `traceparent` is received all the same, in a trace of its own.

use std::sync::Arc;

use axum::Router;
use opentelemetry::Value;
use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use svc_contract::{ManualClock, sign};
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, inbox_route};
use svc_receiver::inbox::{InboxPolicy, Step, process_next};
use svc_receiver::sqlite::SqliteInbox;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::helpers::{SECRET, T, client, event_body, spawn, verifier};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SENDER_SPAN: &str = "00f067aa0ba902b7";

/// Spans of this thread's tasks, collected in memory until the guard is dropped.
struct Collected {
    provider: SdkTracerProvider,
    exporter: InMemorySpanExporter,
    _default: tracing::subscriber::DefaultGuard,
}

impl Collected {
    fn start() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        let subscriber = tracing_subscriber::registry().with(layer);
        Self {
            provider,
            exporter,
            _default: tracing::subscriber::set_default(subscriber),
        }
    }

    fn spans(&self) -> Vec<SpanData> {
        let _ = self.provider.force_flush();
        self.exporter.get_finished_spans().expect("spans")
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn delivery_spans_of(spans: &[SpanData], webhook_id: &str) -> Vec<SpanData> {
    spans
        .iter()
        .filter(|s| {
            s.name == "webhook_delivery"
                && attribute(s, "webhook_id") == Some(Value::from(webhook_id.to_owned()))
        })
        .cloned()
        .collect()
}

async fn post_traced(addr: std::net::SocketAddr, id: &str, traceparent: &str) -> u16 {
    let body = event_body(&format!("svc_call_{id}"));
    client()
        .post(format!("http://{addr}/webhooks"))
        .header("x-service-webhook-id", id)
        .header("x-service-signature", sign(SECRET, T, &body))
        .header("traceparent", traceparent)
        .body(body)
        .send()
        .await
        .expect("send")
        .status()
        .as_u16()
}

#[tokio::test]
async fn the_route_and_the_worker_continue_the_senders_trace_with_user_code_inside() {
    let collected = Collected::start();
    let dir = tempfile::tempdir().expect("dir");
    let inbox =
        SqliteInbox::open(dir.path().join("inbox.db"), InboxPolicy::default()).expect("inbox");
    let receiver = InboxReceiver::new(verifier(), inbox.clone()).with_clock(ManualClock::new(T));
    let addr = spawn(Router::new().route("/webhooks", inbox_route(receiver))).await;
    let traceparent = format!("00-{TRACE_ID}-{SENDER_SPAN}-01");
    assert_eq!(post_traced(addr, "wh_traced", &traceparent).await, 200);
    // Not a traceparent: received all the same, not linked to anything.
    assert_eq!(
        post_traced(addr, "wh_untraced", "00-not-a-trace-01").await,
        200
    );

    let handler = |received: Received| async move {
        // The tenant's own span, inside the delivery's.
        let _commit =
            tracing::info_span!("tenant_commit", call_id = %received.event.call_id).entered();
        Ok::<(), String>(())
    };
    let clock = Arc::new(ManualClock::new(T + 1));
    while let Step::Settled(_) = process_next(&inbox, &handler, &clock).await.expect("step") {}

    let spans = collected.spans();
    let traced = delivery_spans_of(&spans, "wh_traced");
    assert_eq!(traced.len(), 2, "the route's and the worker's: {traced:#?}");
    for span in &traced {
        assert_eq!(span.span_context.trace_id().to_string(), TRACE_ID);
        assert_eq!(span.parent_span_id.to_string(), SENDER_SPAN);
        assert!(span.parent_span_is_remote);
    }
    let outcome = |span: &SpanData| attribute(span, "outcome").map(|v| v.to_string());
    let route = traced
        .iter()
        .find(|s| outcome(s).as_deref() == Some("accepted"))
        .expect("the route's span, outcome accepted");
    let worker = traced
        .iter()
        .find(|s| outcome(s).as_deref() == Some("done"))
        .expect("the worker's span, outcome done");
    assert_eq!(
        attribute(worker, "attempt")
            .map(|v| v.to_string())
            .as_deref(),
        Some("1")
    );
    assert_eq!(attribute(route, "attempt"), None);

    let commit = spans
        .iter()
        .find(|s| {
            s.name == "tenant_commit"
                && attribute(s, "call_id") == Some(Value::from("svc_call_wh_traced".to_owned()))
        })
        .expect("the tenant's span");
    assert_eq!(commit.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(commit.parent_span_id, worker.span_context.span_id());

    let untraced = delivery_spans_of(&spans, "wh_untraced");
    assert_eq!(untraced.len(), 2, "{untraced:#?}");
    for span in &untraced {
        assert_eq!(span.parent_span_id, SpanId::INVALID, "a trace of its own");
        assert_ne!(span.span_context.trace_id().to_string(), TRACE_ID);
    }
}
