//! The tower layer in front of an axum router: what reaches the handler (the event, the body
//! bytes unchanged), and that every refusal is the route's own answer, the handler not called.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::routing;
use svc_contract::{Keyring, ManualClock, SigningSecret, UnknownEvents, Verifier, sign};
use svc_receiver::axum::{WebhookReceiver, webhook_route};
use svc_receiver::dedup::MemoryDedupStore;
use svc_receiver::tower::{Verified, VerifyWebhookLayer};

use crate::helpers::{Logs, SECRET, T, client, event_body, post, spawn, verifier};

/// What the handler saw, one entry per call.
type Seen = Arc<Mutex<Vec<(Verified, Bytes)>>>;

/// A router whose one handler takes the extractor and the raw body, behind the layer.
async fn layered(verifier: Verifier) -> (SocketAddr, Seen) {
    let seen = Seen::default();
    let record = Arc::clone(&seen);
    let handler = move |verified: Verified, body: Bytes| async move {
        let call_id = verified.event.call_id.clone();
        tracing::info!(%call_id, "handling a scored call");
        record.lock().expect("seen").push((verified, body));
        format!("scored {call_id}")
    };
    let layer = VerifyWebhookLayer::new(verifier).with_clock(ManualClock::new(T));
    // On the route (POST) only: another method is still 405, not a refused delivery.
    let router = Router::new().route("/webhooks", routing::post(handler).route_layer(layer));
    (spawn(router).await, seen)
}

/// The direct-mode route with the same verifier and clock, for the answers to compare.
async fn route(verifier: Verifier) -> SocketAddr {
    let handler = |_: svc_receiver::Received| async { Ok::<(), String>(()) };
    let receiver = WebhookReceiver::new(verifier, MemoryDedupStore::default(), handler)
        .with_clock(Arc::new(ManualClock::new(T)));
    spawn(Router::new().route("/webhooks", webhook_route(receiver))).await
}

#[tokio::test]
async fn a_valid_delivery_reaches_the_handler_with_its_event_and_the_same_bytes() {
    let (addr, seen) = layered(verifier()).await;
    // Spaced JSON with a trailing newline: signed as sent, so the bytes must stay as they are.
    let spaced = String::from_utf8(event_body("svc_call_layer")).expect("utf-8");
    let mut body = spaced.replace(r#"","#, r#"", "#).into_bytes();
    body.push(b'\n');
    let header = sign(SECRET, T - 20, &body);

    let (status, text) = post(
        &client(),
        addr,
        Some("wh_layer_1"),
        Some(&header),
        body.clone(),
    )
    .await;

    assert_eq!((status, text.as_str()), (200, "scored svc_call_layer"));
    let seen = seen.lock().expect("seen");
    let [(verified, received_body)] = &seen[..] else {
        panic!("the handler ran {} times", seen.len());
    };
    assert_eq!(received_body.as_ref(), &body[..]);
    assert_eq!(verified.webhook_id.as_str(), "wh_layer_1");
    assert_eq!(verified.event.call_id, "svc_call_layer");
    assert_eq!((verified.timestamp, verified.received_at), (T - 20, T));
    let received = verified.received(received_body.as_ref());
    assert_eq!(&*received.body, &body[..]);
    assert_eq!(received.webhook_id, verified.webhook_id);
}

#[tokio::test]
async fn every_refusal_is_the_routes_answer_and_never_reaches_the_handler() {
    let (layer, seen) = layered(verifier()).await;
    let route = route(verifier()).await;
    let body = event_body("svc_call_refused");
    let good = sign(SECRET, T, &body);
    let oversized = vec![b' '; verifier().max_body_bytes() + 1];
    let cases = [
        (
            "bad signature",
            Some("wh_1"),
            Some(sign("whsec_other", T, &body)),
            body.clone(),
            401,
        ),
        (
            "stale timestamp",
            Some("wh_2"),
            Some(sign(SECRET, T - 301, &body)),
            body.clone(),
            401,
        ),
        (
            "future timestamp",
            Some("wh_3"),
            Some(sign(SECRET, T + 301, &body)),
            body.clone(),
            401,
        ),
        ("no signature header", Some("wh_4"), None, body.clone(), 400),
        (
            "malformed signature header",
            Some("wh_5"),
            Some("t=1,v1=zz".into()),
            body.clone(),
            400,
        ),
        ("no webhook id", None, Some(good.clone()), body.clone(), 400),
        (
            "invalid webhook id",
            Some(" "),
            Some(good.clone()),
            body.clone(),
            400,
        ),
        (
            "body over the limit",
            Some("wh_6"),
            Some(sign(SECRET, T, &oversized)),
            oversized,
            413,
        ),
        (
            "not a call.scored body",
            Some("wh_7"),
            Some(sign(SECRET, T, b"{}")),
            b"{}".to_vec(),
            400,
        ),
    ];
    let client = client();
    for (case, id, header, body, status) in cases {
        let from_layer = post(&client, layer, id, header.as_deref(), body.clone()).await;
        let from_route = post(&client, route, id, header.as_deref(), body).await;
        assert_eq!(from_layer.0, status, "{case}: {from_layer:?}");
        assert_eq!(
            from_layer, from_route,
            "{case}: the layer answers as the route"
        );
        assert!(
            from_layer.1.starts_with(r#"{"error":""#),
            "{case}: {from_layer:?}"
        );
    }
    assert!(seen.lock().expect("seen").is_empty(), "the handler ran");
}

#[tokio::test]
async fn a_streamed_body_over_the_limit_is_413_without_a_content_length() {
    let (addr, seen) = layered(verifier().with_max_body_bytes(1024)).await;
    let chunks = (0..8).map(|_| Ok::<_, std::io::Error>(vec![b' '; 512]));
    let response = client()
        .post(format!("http://{addr}/webhooks"))
        .header("x-service-webhook-id", "wh_stream")
        .header("x-service-signature", sign(SECRET, T, b"{}"))
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 413);
    assert_eq!(
        response.text().await.expect("text"),
        r#"{"error":"body too large"}"#
    );
    assert!(seen.lock().expect("seen").is_empty());
}

#[tokio::test]
async fn an_unknown_event_acknowledged_is_200_without_the_handler() {
    let verifier = Verifier::new(Keyring::single(SigningSecret::new(SECRET).expect("secret")))
        .with_unknown_events(UnknownEvents::Acknowledge);
    let (addr, seen) = layered(verifier).await;
    let body = br#"{"event":"call.transcribed","callId":"svc_call_x"}"#.to_vec();
    let header = sign(SECRET, T, &body);
    let (status, text) = post(&client(), addr, Some("wh_unknown"), Some(&header), body).await;
    assert_eq!((status, text.as_str()), (200, ""));
    assert!(seen.lock().expect("seen").is_empty());
}

#[tokio::test]
async fn the_extractor_without_the_layer_answers_503_and_logs_why() {
    let (logs, _guard) = Logs::capture();
    let ran = Arc::new(Mutex::new(false));
    let flag = Arc::clone(&ran);
    let handler = move |_: Verified| async move {
        *flag.lock().expect("flag") = true;
    };
    let addr = spawn(Router::new().route("/webhooks", routing::post(handler))).await;
    let body = event_body("svc_call_unlayered");
    let header = sign(SECRET, T, &body);

    let (status, text) = post(&client(), addr, Some("wh_unlayered"), Some(&header), body).await;

    assert_eq!(
        (status, text.as_str()),
        (503, r#"{"error":"delivery not verified"}"#)
    );
    assert!(!*ran.lock().expect("flag"), "the handler ran unverified");
    let lines = logs.lines_with("VerifyWebhookLayer is not in front of this route");
    assert_eq!(lines.len(), 1, "{}", logs.text());
    assert!(lines[0].contains("ERROR"), "{}", lines[0]);
}

#[tokio::test]
async fn another_method_is_405_not_a_refused_delivery() {
    let (addr, seen) = layered(verifier()).await;
    let response = client()
        .get(format!("http://{addr}/webhooks"))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 405);
    assert!(seen.lock().expect("seen").is_empty());
}

#[tokio::test]
async fn the_refusal_and_the_handlers_own_logs_carry_the_webhook_id() {
    let (logs, _guard) = Logs::capture();
    let (addr, _seen) = layered(verifier()).await;
    let client = client();
    let body = event_body("svc_call_logged");
    let good = sign(SECRET, T, &body);
    let wrong = sign("whsec_other", T, &body);

    assert_eq!(
        post(&client, addr, Some("wh_logged"), Some(&good), body.clone())
            .await
            .0,
        200
    );
    assert_eq!(
        post(&client, addr, Some("wh_forged"), Some(&wrong), body)
            .await
            .0,
        401
    );

    let handled = logs.lines_with("handling a scored call");
    assert_eq!(handled.len(), 1, "{}", logs.text());
    assert!(handled[0].contains("webhook_id=wh_logged"), "{handled:?}");
    let rejected = logs.lines_with("webhook delivery rejected");
    assert_eq!(rejected.len(), 1, "{}", logs.text());
    assert!(rejected[0].contains("webhook_id=wh_forged"), "{rejected:?}");
    assert!(rejected[0].contains("no signature matches"), "{rejected:?}");
}

#[test]
fn the_layer_debug_shows_no_secret() {
    let layer = VerifyWebhookLayer::new(verifier());
    let shown = format!("{layer:?} {:?}", tower::Layer::layer(&layer, ()));
    assert!(shown.contains("VerifyWebhookLayer"), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
}

/// The layer's refusals are counted under `mode="layer"`, and a delivery it hands on is not
/// (what becomes of it is the handler's); every check is timed.
#[cfg(feature = "metrics")]
#[tokio::test]
async fn the_layer_counts_its_refusals_only() {
    use metrics_util::MetricKind;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use svc_receiver::metrics::{DELIVERIES, VERIFY_SECONDS};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (addr, _seen) = layered(verifier()).await;
    let client = client();
    let body = event_body("svc_call_counted");
    let good = sign(SECRET, T, &body);
    let stale = sign(SECRET, T - 301, &body);
    post(&client, addr, Some("wh_counted"), Some(&good), body.clone()).await;
    post(&client, addr, Some("wh_stale"), Some(&stale), body.clone()).await;
    post(
        &client,
        addr,
        Some("wh_stale_2"),
        Some(&stale),
        body.clone(),
    )
    .await;
    post(&client, addr, Some("wh_unsigned"), None, body).await;

    let mut counted = Vec::new();
    let mut timed = 0;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let labels: Vec<String> = key
            .key()
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        match (key.kind(), key.key().name(), value) {
            (MetricKind::Counter, DELIVERIES, DebugValue::Counter(n)) => {
                counted.push(format!("{} {n}", labels.join(",")));
            }
            (MetricKind::Histogram, VERIFY_SECONDS, DebugValue::Histogram(samples)) => {
                assert_eq!(labels, ["mode=layer"]);
                timed += samples.len();
            }
            _ => {}
        }
    }
    counted.sort();
    assert_eq!(
        counted,
        [
            "mode=layer,outcome=bad_header 1",
            "mode=layer,outcome=stale 2"
        ]
    );
    assert_eq!(timed, 4);
}
