//! Shared helpers: the fixture vectors, a sample event, a loopback server.

use std::net::SocketAddr;
use std::path::Path;

use svc_contract::{Keyring, SigningSecret, Verifier};

pub(crate) const SECRET: &str = "whsec_fixture";
pub(crate) const T: i64 = 1_767_225_600;

pub(crate) fn vectors() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/webhooks/vectors.json");
    let text = std::fs::read_to_string(path).expect("fixtures/webhooks/vectors.json");
    serde_json::from_str(&text).expect("vectors are JSON")
}

pub(crate) fn body_of(vector: &serde_json::Value) -> Vec<u8> {
    match vector.get("body_hex").and_then(|v| v.as_str()) {
        Some(hex_body) => hex::decode(hex_body).expect("body_hex"),
        None => vector["body"].as_str().expect("body").as_bytes().to_vec(),
    }
}

/// A webhook id from test text (always valid there).
pub(crate) fn webhook_id(text: &str) -> svc_contract::WebhookId {
    svc_contract::WebhookId::parse(text.as_bytes()).expect("id")
}

/// `PRAGMA integrity_check` of the SQLite file at `path`, read on a connection of its own
/// (it checks the tables' CHECK constraints too, which the crate's writer connection skips).
pub(crate) fn integrity(path: &Path) -> String {
    rusqlite::Connection::open(path)
        .expect("the file")
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity check")
}

pub(crate) fn verifier() -> Verifier {
    Verifier::new(Keyring::single(SigningSecret::new(SECRET).expect("secret")))
}

/// A realistic compact `call.scored` body with the given call id.
pub(crate) fn event_body(call_id: &str) -> Vec<u8> {
    format!(
        r#"{{"event":"call.scored","success":true,"callId":"{call_id}","source":"roleplay","agentId":"svc_agent_1","agencyId":"svc_agency_1","platformAgentId":"rep-1","platformAgencyId":null,"occurredAt":"2026-01-01T00:00:00Z","requestId":"req_{call_id}"}}"#
    )
    .into_bytes()
}

/// Serves `router` on 127.0.0.1 on a free port.
pub(crate) async fn spawn(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    addr
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

/// Posts a delivery; `header` None leaves the signature header out.
pub(crate) async fn post(
    client: &reqwest::Client,
    addr: SocketAddr,
    id: Option<&str>,
    header: Option<&str>,
    body: Vec<u8>,
) -> (u16, String) {
    let mut request = client
        .post(format!("http://{addr}/webhooks"))
        .header("content-type", "application/json");
    if let Some(id) = id {
        request = request.header("x-service-webhook-id", id);
    }
    if let Some(header) = header {
        request = request.header("x-service-signature", header);
    }
    let response = request.body(body).send().await.expect("send");
    let status = response.status().as_u16();
    (status, response.text().await.expect("text"))
}

/// Posts a delivery under `id` whose signature header is sent twice (the same `header`
/// both times); the status.
pub(crate) async fn post_with_the_signature_twice(
    client: &reqwest::Client,
    addr: SocketAddr,
    id: &str,
    header: &str,
    body: Vec<u8>,
) -> u16 {
    client
        .post(format!("http://{addr}/webhooks"))
        .header("x-service-webhook-id", id)
        .header("x-service-signature", header)
        .header("x-service-signature", header)
        .body(body)
        .send()
        .await
        .expect("send")
        .status()
        .as_u16()
}

/// A handler that sends each delivery's call id on the channel it comes with, and succeeds.
pub(crate) fn call_id_reporter() -> (
    impl svc_receiver::EventHandler,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |received: svc_receiver::Received| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(received.event.call_id);
            Ok::<(), String>(())
        }
    };
    (handler, rx)
}

/// Log lines written while a test runs (in svc-test-support).
pub(crate) use svc_test_support::logs::Logs;
