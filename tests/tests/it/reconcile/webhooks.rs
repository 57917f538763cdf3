//! The tenant's side of webhook delivery in the reconcile tests: the embedded `webhook serve`
//! receiver writing into the store, behind a proxy (the tenant's webhook URL) that can lose
//! deliveries or their answers and re-send a captured one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::Value;
use svc_cli::receiver::ReceiverConfig;
use svc_contract::{Keyring, SigningSecret};
use svc_store::Store;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The headers a delivery carries and the proxy passes on.
const DELIVERY_HEADERS: [&str; 3] = [
    "content-type",
    "x-service-signature",
    "x-service-webhook-id",
];

/// Serves `svc_cli::receiver::run` (what `webhook serve` runs) on port 0, writing into
/// `store`, until the returned handle is dropped.
pub(super) async fn receiver(store: &Store, secret: &str) -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let config = ReceiverConfig {
        store: store.clone(),
        keyring: Keyring::single(SigningSecret::new(secret).expect("the tenant's secret")),
        path: "/webhooks".into(),
        client: None,
        inbox_lease: std::time::Duration::from_secs(300),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        svc_cli::receiver::run(config, listener, async move {
            let _ = stopped.await;
        })
        .await
        .expect("the receiver runs");
    });
    Receiver {
        url: format!("http://{addr}/webhooks"),
        _stop: stop,
    }
}

/// The embedded receiver; stops when dropped.
pub(super) struct Receiver {
    url: String,
    _stop: oneshot::Sender<()>,
}

impl Receiver {
    /// A receiver the test started itself at `url`, which stops when `stop` is dropped.
    pub(super) fn at(url: String, stop: oneshot::Sender<()>) -> Self {
        Self { url, _stop: stop }
    }
}

/// A delivery the proxy passed on, as the service sent it, with the receiver's answer.
#[derive(Debug, Clone)]
pub(super) struct Forwarded {
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
    pub(super) status: StatusCode,
}

impl Forwarded {
    pub(super) fn webhook_id(&self) -> String {
        header(&self.headers, "x-service-webhook-id")
    }

    pub(super) fn call_id(&self) -> String {
        let body: Value = serde_json::from_slice(&self.body).expect("a JSON body");
        body["callId"].as_str().expect("callId").to_owned()
    }
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers[name].to_str().expect("an ASCII header").to_owned()
}

#[derive(Clone)]
struct ProxyState {
    target: String,
    http: reqwest::Client,
    down: Arc<AtomicBool>,
    lose_answers: Arc<AtomicBool>,
    forwarded: Arc<Mutex<Vec<Forwarded>>>,
}

/// The tenant's webhook endpoint: passes each delivery on to the receiver and answers with
/// the receiver's status; answers 500 without passing it on while it is down, or after
/// passing it on while it loses answers (a timeout on the way back).
pub(super) struct Proxy {
    pub(super) url: String,
    state: ProxyState,
    _receiver: Receiver,
}

impl Proxy {
    pub(super) async fn start(receiver: Receiver) -> Self {
        let state = ProxyState {
            target: receiver.url.clone(),
            http: reqwest::Client::new(),
            down: Arc::new(AtomicBool::new(false)),
            lose_answers: Arc::new(AtomicBool::new(false)),
            forwarded: Arc::default(),
        };
        let app = Router::new()
            .route("/hook", post(forward))
            .with_state(state.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            url: format!("http://{addr}/hook"),
            state,
            _receiver: receiver,
        }
    }

    /// While down, every delivery is answered 500 and lost.
    pub(super) fn set_down(&self, down: bool) {
        self.state.down.store(down, Ordering::SeqCst);
    }

    /// While losing answers, every delivery reaches the receiver and the service gets 500.
    pub(super) fn set_lose_answers(&self, lose: bool) {
        self.state.lose_answers.store(lose, Ordering::SeqCst);
    }

    /// The deliveries passed on so far.
    pub(super) fn forwarded(&self) -> Vec<Forwarded> {
        self.state
            .forwarded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// POSTs `body` with `headers` to the proxy, as the service would; returns the status.
    pub(super) async fn send(&self, headers: &HeaderMap, body: &[u8]) -> StatusCode {
        let mut request = self.state.http.post(&self.url).body(body.to_vec());
        for name in DELIVERY_HEADERS {
            if let Some(value) = headers.get(name) {
                request = request.header(name, value.as_bytes());
            }
        }
        let response = request.send().await.expect("the proxy answers");
        StatusCode::from_u16(response.status().as_u16()).expect("a status")
    }
}

async fn forward(State(state): State<ProxyState>, headers: HeaderMap, body: Bytes) -> StatusCode {
    if state.down.load(Ordering::SeqCst) {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    let mut request = state.http.post(&state.target).body(body.clone());
    for name in DELIVERY_HEADERS {
        if let Some(value) = headers.get(name) {
            request = request.header(name, value.as_bytes());
        }
    }
    let Ok(response) = request.send().await else {
        return StatusCode::BAD_GATEWAY;
    };
    let status =
        StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    state
        .forwarded
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(Forwarded {
            headers,
            body,
            status,
        });
    if state.lose_answers.load(Ordering::SeqCst) {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    status
}
