//! Benchmark: outbox throughput delivering 10 000 queued events to a local receiver.

mod practice_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::routing::post;
use practice_common::*;
use svc_service::config::Config;
use svc_service::credentials::ApiKey;
use svc_service::db::{Db, NewTenant};

const EVENTS: usize = 10_000;

#[tokio::main]
async fn main() {
    let received = Arc::new(AtomicUsize::new(0));
    let counter = received.clone();
    let app = axum::Router::new().route(
        "/hook",
        post(move || {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::Relaxed);
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let sink = format!("http://{}/hook", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The events are queued before the server starts, so its worker drains a full backlog.
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("outbox.db");
    let db = Db::open(&path).await.expect("open");
    let tenant = NewTenant {
        webhook_url: Some(sink),
        ..NewTenant::new("bench", ApiKey::generate().hash())
    };
    let tenant_id = tenant.id.clone();
    db.create_tenant(tenant).await.expect("tenant");
    let body = r#"{"event":"call.scored","success":true,"callId":"svc_call_x","source":"roleplay","agentId":"svc_agent_x","agencyId":"svc_agency_x","platformAgentId":null,"platformAgencyId":null,"occurredAt":"2026-01-01T00:00:00.000Z","requestId":"req_x"}"#;
    for i in 0..EVENTS {
        let id = svc_service::ids::webhook_id();
        db.enqueue_delivery(
            &id,
            &tenant_id,
            &format!("svc_call_{i}"),
            body.to_string(),
            0,
        )
        .await
        .expect("enqueue");
    }
    let mut config = Config::new(&path);
    config.allow_http_webhooks = true;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let started = Instant::now();
    tokio::spawn(svc_service::run(config, listener, std::future::pending()));
    let mut h = histogram();
    let mut last = 0;
    let mut tick = Instant::now();
    while received.load(Ordering::Relaxed) < EVENTS {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let now = received.load(Ordering::Relaxed);
        if now > last {
            let _ = h.record(micros(tick.elapsed()) / (now - last) as u64);
            last = now;
            tick = Instant::now();
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "outbox stalled at {now}"
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    header();
    row(
        "deliver 10 000 queued (per event)",
        EVENTS as u64,
        Some(EVENTS as f64 / elapsed),
        &h,
    );
}
