//! Fairness between tenants: a tenant whose endpoint accepts connections
//! and never answers does not hold up another tenant's webhook.

use std::time::{Duration, Instant};

use serde_json::json;
use svc_service::db::TenantChange;

use crate::practice_helpers::{WebhookSink, practice_app, tenant_with_rep};

/// An endpoint that accepts every connection and never answers; returns its URL and a count
/// of the connections it holds.
async fn black_hole() -> (String, tokio::sync::watch::Receiver<usize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (count, held_count) = tokio::sync::watch::channel(0);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
            let _ = count.send(held.len());
        }
    });
    (format!("http://{addr}/hook"), held_count)
}

#[tokio::test]
async fn a_tenant_with_a_dead_endpoint_does_not_delay_another_tenants_webhook() {
    let app = practice_app(|config| config.allow_http_webhooks = true).await;
    let (stuck, _) = tenant_with_rep(&app).await;
    let (hole, mut held) = black_hole().await;
    app.change(&stuck, TenantChange::WebhookUrl(Some(hole)))
        .await;
    let other = app.tenant().await;
    let mut sink = WebhookSink::start().await;
    app.change(&other, TenantChange::WebhookUrl(Some(sink.url.clone())))
        .await;
    let now = app.clock.now().timestamp_millis();
    for n in 0..40 {
        app.db
            .enqueue_delivery(
                &format!("wh_stuck_{n}"),
                &stuck.id,
                "svc_call_s",
                "{}".into(),
                now,
            )
            .await
            .expect("enqueue");
    }
    // The stuck tenant's attempts start and hang (the workers pick them up within 5 s).
    tokio::time::timeout(Duration::from_secs(10), held.wait_for(|n| *n >= 2))
        .await
        .expect("the stuck tenant's attempts start")
        .expect("the endpoint runs");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(*held.borrow(), 2, "at most two of one tenant in flight");
    let queued = Instant::now();
    app.db
        .enqueue_delivery(
            "wh_other",
            &other.id,
            "svc_call_o",
            json!({}).to_string(),
            now,
        )
        .await
        .expect("enqueue");
    let received = tokio::time::timeout(Duration::from_secs(5), sink.next())
        .await
        .expect("the other tenant's webhook arrives");
    assert_eq!(received.webhook_id(), "wh_other");
    assert!(
        queued.elapsed() < Duration::from_secs(1),
        "delayed {:?} behind the stuck tenant",
        queued.elapsed()
    );
}
