//! `SinkHandler` behind `svc-receiver`'s direct route, against `svc-fixtures`' fake of the
//! calls API: a scored event's call is read and stored once however often it is delivered,
//! a call the service refuses for good (404) is answered 200 and left to reconcile, a service
//! that is down fails the delivery (the sender retries), and a not-scored event stores
//! nothing.

use std::sync::Arc;

use svc_client::CallId;
use svc_contract::{Keyring, SigningSecret, Verifier};
use svc_fixtures::calls::{Calls, DetailFault, ROLEPLAY};
use svc_fixtures::faults;
use svc_fixtures::webhooks::{Event, Sender};
use svc_receiver::axum::{WebhookReceiver, webhook_route};
use svc_receiver::dedup::MemoryDedupStore;
use svc_reconcile::{Arrival, MemorySink, Sink, SinkHandler};
use wiremock::MockServer;

const SECRET: &str = "whsec_sink_handler_test";

/// Serves the direct route with a `SinkHandler` over `sink` on port 0; returns a sender of
/// signed deliveries to it.
pub(super) async fn receiver<S: Sink>(server: &MockServer, sink: Arc<S>) -> Sender {
    let secret = SigningSecret::new(SECRET).expect("secret");
    let handler = SinkHandler::new(super::engine::client(server, 0), sink);
    let receiver = WebhookReceiver::new(
        Verifier::new(Keyring::single(secret)),
        MemoryDedupStore::default(),
        handler,
    );
    let app = axum::Router::new().route("/webhooks", webhook_route(receiver));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/webhooks", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Sender::new(url, SECRET)
}

#[tokio::test]
async fn a_scored_event_stores_its_call_once_as_delivered_and_its_retry_changes_nothing() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let id = calls.add(ROLEPLAY, chrono::Utc::now() - chrono::Duration::minutes(5));
    let sink = Arc::new(MemorySink::default());
    let sender = receiver(&server, sink.clone()).await;
    let event = Event::scored(&calls, &id).expect("a listed call");

    let first = sender.deliver(&event).await.expect("delivered");
    assert_eq!(first.status, 200);
    let retry = sender.retry(&first).await.expect("the sender's retry");
    assert_eq!(retry.status, 200);

    let held = sink.calls();
    assert_eq!(held.len(), 1, "{held:?}");
    let call = &held[&CallId::from_service(id.clone())];
    assert_eq!(call.arrival, Arrival::Webhook);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&call.detail.json).expect("JSON"),
        calls.detail(&id).expect("the served detail"),
        "the detail exactly as served"
    );
    assert_eq!(call.changes, 0);
}

#[tokio::test]
async fn a_call_the_service_refuses_for_good_is_acknowledged_and_left_to_reconcile() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let id = calls.add(ROLEPLAY, chrono::Utc::now() - chrono::Duration::minutes(5));
    calls.fail_detail(&id, DetailFault::NotFound);
    let sink = Arc::new(MemorySink::default());
    let sender = receiver(&server, sink.clone()).await;
    let event = Event::scored(&calls, &id).expect("a listed call");

    let answer = sender.deliver(&event).await.expect("delivered");
    assert_eq!(answer.status, 200, "retrying would not heal a 404");
    assert!(sink.calls().is_empty());
}

#[tokio::test]
async fn a_service_that_is_down_fails_the_delivery_so_the_sender_retries() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let id = calls.add(ROLEPLAY, chrono::Utc::now() - chrono::Duration::minutes(5));
    let sink = Arc::new(MemorySink::default());
    let sender = receiver(&server, sink.clone()).await;
    let event = Event::scored(&calls, &id).expect("a listed call");

    let down = faults::error(&server, "SERVICE_UNAVAILABLE")
        .route("GET", "/calls/{callId}")
        .mount_as_scoped()
        .await;
    let failed = sender.deliver(&event).await.expect("delivered");
    assert!(failed.status >= 500, "{failed:?}");
    assert!(sink.calls().is_empty());
    drop(down);

    let retry = sender.retry(&failed).await.expect("the sender's retry");
    assert_eq!(retry.status, 200, "the claim was released for the retry");
    assert_eq!(sink.calls().len(), 1);
}

#[tokio::test]
async fn a_not_scored_event_stores_nothing() {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let sink = Arc::new(MemorySink::default());
    let sender = receiver(&server, sink.clone()).await;

    let answer = sender
        .deliver(&Event::not_scored(&calls))
        .await
        .expect("delivered");
    assert_eq!(answer.status, 200);
    assert!(sink.calls().is_empty());
    assert_eq!(calls.detail_requests(), 0, "nothing to read");
}
