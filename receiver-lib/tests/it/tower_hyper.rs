//! The tower layer around a plain `tower::Service` (a `service_fn`), served by hyper without
//! axum, over a real socket with a real HTTP client.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use svc_contract::{ManualClock, sign};
use svc_receiver::tower::{Verified, VerifyWebhookLayer};
use tokio::sync::mpsc;
use tower::{Layer, service_fn};

use crate::helpers::{SECRET, T, client, event_body, post, verifier};

/// Serves the layer around a `service_fn` that reports what it got (the verified delivery and
/// the body it read) and answers 202 with the call id.
async fn serve() -> (SocketAddr, mpsc::UnboundedReceiver<(Verified, Bytes)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let inner = service_fn(move |request: Request<Full<Bytes>>| {
        let tx = tx.clone();
        async move {
            let verified = request.extensions().get::<Verified>().cloned();
            let body = request.into_body().collect().await?.to_bytes();
            let Some(verified) = verified else {
                return Ok::<_, Infallible>(Response::new(Full::from("no Verified")));
            };
            let call_id = verified.event.call_id.clone();
            let _ = tx.send((verified, body));
            let mut response = Response::new(Full::from(call_id));
            *response.status_mut() = http::StatusCode::ACCEPTED;
            Ok(response)
        }
    });
    let service = VerifyWebhookLayer::new(verifier())
        .with_clock(ManualClock::new(T))
        .layer(inner);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, rx)
}

#[tokio::test]
async fn hyper_serves_the_layer_around_a_service_fn_without_axum() {
    let (addr, mut seen) = serve().await;
    let client = client();
    let body = event_body("svc_call_hyper");
    let header = sign(SECRET, T, &body);

    let (status, text) = post(&client, addr, Some("wh_hyper"), Some(&header), body.clone()).await;

    assert_eq!((status, text.as_str()), (202, "svc_call_hyper"));
    let (verified, received) = seen.try_recv().expect("the service was called");
    assert_eq!(received.as_ref(), &body[..]);
    assert_eq!(verified.webhook_id.as_str(), "wh_hyper");
    assert_eq!(verified.event.call_id, "svc_call_hyper");
    assert_eq!(verified.timestamp, T);
}

#[tokio::test]
async fn hyper_gets_the_routes_refusals_and_the_service_is_not_called() {
    let (addr, mut seen) = serve().await;
    let client = client();
    let body = event_body("svc_call_hyper_refused");
    let oversized = vec![b' '; verifier().max_body_bytes() + 1];
    let refused = [
        (
            sign("whsec_other", T, &body),
            body.clone(),
            401,
            "invalid signature",
        ),
        (
            sign(SECRET, T - 301, &body),
            body.clone(),
            401,
            "signature timestamp outside tolerance",
        ),
        (
            sign(SECRET, T, &oversized),
            oversized,
            413,
            "body too large",
        ),
    ];
    for (header, body, status, text) in refused {
        let answer = post(&client, addr, Some("wh_refused"), Some(&header), body).await;
        assert_eq!(answer, (status, format!(r#"{{"error":"{text}"}}"#)));
    }
    let answer = post(&client, addr, Some("wh_refused"), None, body).await;
    assert_eq!(
        answer,
        (400, r#"{"error":"missing signature header"}"#.to_owned())
    );
    assert!(seen.try_recv().is_err(), "the service was called");
}
