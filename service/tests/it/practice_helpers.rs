//! Helpers of the practice-call tests: a server that keeps its database across restarts,
//! minting and redeeming, a live WebSocket client, a webhook sink that records deliveries and
//! can switch the status it answers, and polling for a call's outcome.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use svc_service::config::Config;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::helpers::{Reply, TestApp, TestTenant, spawn_app_with};

/// Settings of every practice test server: plain-HTTP webhooks, a one-second retry delay.
pub(crate) fn practice_config(config: &mut Config) {
    config.allow_http_webhooks = true;
    config.webhook_retry_delay_secs = 1;
}

/// A server with the practice settings and `adjust` on top.
pub(crate) async fn practice_app(adjust: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_with(|config| {
        practice_config(config);
        adjust(config);
    })
    .await
}

/// A tenant with one agency `ag-1` and one rep `rep-1`; returns the tenant and the agent.
pub(crate) async fn tenant_with_rep(app: &TestApp) -> (TestTenant, Value) {
    let tenant = app.tenant().await;
    app.agency(&tenant, "ag-1").await;
    let agent = app
        .agent(&tenant, "ag-1", json!({ "platformAgentId": "rep-1" }))
        .await;
    (tenant, agent)
}

/// `POST /v1/session` with `body`.
pub(crate) async fn mint(app: &TestApp, tenant: &TestTenant, body: Value) -> Reply {
    app.post(tenant, "/v1/session", body).await
}

/// Mints a token for `rep-1` and returns it.
pub(crate) async fn token(app: &TestApp, tenant: &TestTenant) -> String {
    minted_token(app, tenant, json!({ "platformAgentId": "rep-1" })).await
}

/// Mints a token with the request `body` (which must succeed) and returns it.
pub(crate) async fn minted_token(app: &TestApp, tenant: &TestTenant, body: Value) -> String {
    let minted = mint(app, tenant, body).await.expect(200);
    minted["token"].as_str().expect("token").to_owned()
}

/// `POST /v1/roleplay/session` with the session token.
pub(crate) async fn redeem(app: &TestApp, token: &str, body: Value) -> Reply {
    app.send(
        Method::POST,
        "/v1/roleplay/session",
        Some(token),
        Some(body),
    )
    .await
}

/// A live call's socket.
pub(crate) struct LiveClient {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl LiveClient {
    /// Connects to `connection_url` and sends the auth frame.
    pub(crate) async fn connect(connection_url: &str, ticket: &str) -> LiveClient {
        let (socket, _) = tokio_tungstenite::connect_async(connection_url)
            .await
            .expect("websocket connects");
        let mut client = LiveClient { socket };
        client
            .send(json!({ "type": "auth", "ticket": ticket }))
            .await;
        client
    }

    /// Sends one JSON frame.
    pub(crate) async fn send(&mut self, frame: Value) {
        self.socket
            .send(Message::text(frame.to_string()))
            .await
            .expect("frame sent");
    }

    /// Sends raw text.
    pub(crate) async fn send_text(&mut self, text: &str) {
        self.socket
            .send(Message::text(text.to_owned()))
            .await
            .expect("frame sent");
    }

    /// The next JSON frame, or `None` once the server closed.
    pub(crate) async fn recv(&mut self) -> Option<Value> {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(10), self.socket.next())
                .await
                .expect("a frame in time");
            match next {
                Some(Ok(Message::Text(text))) => {
                    return Some(serde_json::from_str(&text).expect("JSON frame"));
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Reads until the server closes: the JSON frames seen on the way, and the close frame's
    /// code and reason (when it sent one).
    pub(crate) async fn until_closed(&mut self) -> (Vec<Value>, Option<(u16, String)>) {
        let mut frames = Vec::new();
        loop {
            let next = tokio::time::timeout(Duration::from_secs(10), self.socket.next())
                .await
                .expect("a frame in time");
            match next {
                Some(Ok(Message::Text(text))) => {
                    frames.push(serde_json::from_str(&text).expect("JSON frame"));
                }
                Some(Ok(Message::Close(close))) => {
                    let close = close.map(|c| (u16::from(c.code), c.reason.to_string()));
                    return (frames, close);
                }
                None | Some(Err(_)) => return (frames, None),
                Some(Ok(_)) => {}
            }
        }
    }

    /// Says `text` and returns the persona's reply text.
    pub(crate) async fn say(&mut self, text: &str) -> String {
        self.send(json!({ "type": "say", "text": text })).await;
        let frame = self.recv().await.expect("a reply");
        assert_eq!(frame["type"], "persona", "{frame}");
        frame["text"].as_str().expect("text").to_owned()
    }

    /// Drops the connection without an end frame.
    pub(crate) async fn drop_connection(self) {
        drop(self.socket);
    }
}

/// Redeems `token` for `ma-full-sale`, connects, and reads `ready` and the greeting.
pub(crate) async fn start_call(app: &TestApp, token: &str) -> (String, LiveClient) {
    let started = redeem(app, token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect(200);
    let url = started["connectionUrl"].as_str().expect("url");
    let mut client =
        LiveClient::connect(url, started["connectionTicket"].as_str().expect("ticket")).await;
    let ready = client.recv().await.expect("ready");
    assert_eq!(ready["type"], "ready", "{ready}");
    assert_eq!(ready["callId"], started["callId"]);
    let greeting = client.recv().await.expect("greeting");
    assert_eq!(greeting["type"], "persona", "{greeting}");
    (
        started["callId"].as_str().expect("callId").to_owned(),
        client,
    )
}

/// Ends the call and returns the `ended` frame.
pub(crate) async fn end_call(mut client: LiveClient) -> Value {
    client.send(json!({ "type": "end" })).await;
    let ended = client.recv().await.expect("ended");
    assert_eq!(ended["type"], "ended", "{ended}");
    ended
}

/// The lines of a complete, compliant enrollment call.
pub(crate) const GOOD_CALL: &[&str] = &[
    "Hi, my name is Sam, a licensed insurance agent calling from Acme Health. This call is recorded.",
    "We do not offer every plan available in your area; contact Medicare.gov or 1-800-MEDICARE for all of your options.",
    "Is it okay if I ask which doctors you see and what prescriptions you take?",
    "This plan has a $0 premium, $5 copays and dental benefits.",
    "I understand. With a $0 premium your costs go down.",
    "Shall we get you enrolled?",
    "Great question, your doctor is in the network.",
    "Can we get you enrolled with a January effective date?",
];

/// Runs a whole call saying `lines`, advancing the clock `secs` before ending; returns the
/// call id and the `ended` frame.
pub(crate) async fn run_call(
    app: &TestApp,
    tenant: &TestTenant,
    lines: &[&str],
    secs: i64,
) -> (String, Value) {
    let token = token(app, tenant).await;
    run_call_with(app, &token, lines, secs).await
}

/// [`run_call`] on an already minted `token`.
pub(crate) async fn run_call_with(
    app: &TestApp,
    token: &str,
    lines: &[&str],
    secs: i64,
) -> (String, Value) {
    let (call_id, mut client) = start_call(app, token).await;
    for line in lines {
        client.say(line).await;
    }
    app.clock.advance(chrono::Duration::seconds(secs));
    let ended = end_call(client).await;
    (call_id, ended)
}

/// Polls GET /v1/calls/{id} until it is 200 (scored) and returns the detail.
pub(crate) async fn wait_scored(app: &TestApp, tenant: &TestTenant, call_id: &str) -> Value {
    for _ in 0..500 {
        let reply = app.get(tenant, &format!("/v1/calls/{call_id}")).await;
        if reply.status == 200 {
            return reply.body;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("call {call_id} was not scored in time");
}

/// Waits until the call has an outcome stored (scored or not) in the database.
pub(crate) async fn wait_outcome(app: &TestApp, call_id: &str) -> String {
    for _ in 0..500 {
        let state = app.db.call_state(call_id).await.expect("read state");
        if let Some(state) = state.filter(|s| s == "scored" || s == "not_scored") {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("call {call_id} has no outcome in time");
}

/// Waits until the tenant's only delivery is in `state` (`pending`, `delivered`, `failed`)
/// with `attempts` attempts logged.
pub(crate) async fn wait_delivery(
    app: &TestApp,
    tenant: &TestTenant,
    state: &str,
    attempts: usize,
) {
    for _ in 0..500 {
        let rows = app
            .db
            .list_deliveries(Some(tenant.id.clone()), 10)
            .await
            .expect("deliveries");
        if rows
            .first()
            .is_some_and(|d| d.state == state && d.attempts.len() == attempts)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the delivery did not reach {state} after {attempts} attempts");
}

/// One delivery received by the sink.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Received {
    pub(crate) fn webhook_id(&self) -> String {
        self.headers["x-service-webhook-id"]
            .to_str()
            .expect("ascii")
            .to_owned()
    }

    pub(crate) fn signature(&self) -> String {
        self.headers["x-service-signature"]
            .to_str()
            .expect("ascii")
            .to_owned()
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
}

/// A webhook receiver on loopback that reports each delivery over a channel.
pub(crate) struct WebhookSink {
    pub(crate) url: String,
    status: Arc<AtomicU16>,
    received: mpsc::UnboundedReceiver<Received>,
}

impl WebhookSink {
    pub(crate) async fn start() -> WebhookSink {
        let status = Arc::new(AtomicU16::new(200));
        let (tx, received) = mpsc::unbounded_channel();
        let answer = status.clone();
        let app = Router::new().route(
            "/hook",
            post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let tx = tx.clone();
                let answer = answer.clone();
                async move {
                    let _ = tx.send(Received {
                        headers,
                        body: body.to_vec(),
                    });
                    StatusCode::from_u16(answer.load(Ordering::SeqCst)).unwrap_or(StatusCode::OK)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind sink");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        WebhookSink {
            url: format!("http://{addr}/hook"),
            status,
            received,
        }
    }

    /// Sets the status answered from now on.
    pub(crate) fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    /// The next delivery (waits up to 10 s).
    pub(crate) async fn next(&mut self) -> Received {
        tokio::time::timeout(Duration::from_secs(10), self.received.recv())
            .await
            .expect("a delivery in time")
            .expect("sink open")
    }

    /// The next delivery, if one arrives within `wait`.
    pub(crate) async fn within(&mut self, wait: Duration) -> Option<Received> {
        tokio::time::timeout(wait, self.received.recv())
            .await
            .ok()
            .flatten()
    }

    /// Asserts nothing arrives within `wait`.
    pub(crate) async fn assert_silent(&mut self, wait: Duration) {
        if let Ok(Some(extra)) = tokio::time::timeout(wait, self.received.recv()).await {
            panic!(
                "unexpected delivery: {}",
                String::from_utf8_lossy(&extra.body)
            );
        }
    }
}
