//! The outbox driven directly with `drain` and a manual clock: the real five-minute retry
//! delay, a signature made at send time that passes the receiver's 5-minute tolerance on the
//! retry, and never a third attempt.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use svc_contract::{Keyring, SigningSecret, Verifier};
use svc_service::Clock;
use svc_service::credentials::{ApiKey, SigningSecret as TenantSecret};
use svc_service::db::{Db, NewTenant};
use svc_service::webhook::client::WebhookClient;
use svc_service::webhook::outbox::{Outbox, Outcome};

use crate::practice_helpers::WebhookSink;

#[tokio::test]
async fn drain_applies_the_five_minute_retry_then_gives_up() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("outbox.db")).await.expect("open");
    let mut sink = WebhookSink::start().await;
    sink.answer(502);
    let secret = TenantSecret::generate();
    db.create_tenant(NewTenant {
        id: "ten_outbox".into(),
        webhook_url: Some(sink.url.clone()),
        signing_secret: secret.clone(),
        ..NewTenant::new("outbox", ApiKey::generate().hash())
    })
    .await
    .expect("tenant");
    let clock = Clock::manual(
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .expect("date"),
    );
    let client = WebhookClient::new(true).expect("client");
    let outbox = Outbox::new(db.clone(), client, clock.clone(), Duration::from_secs(300));
    let now = clock.now().timestamp_millis();
    db.enqueue_delivery(
        "wh_drain",
        "ten_outbox",
        "svc_call_1",
        r#"{"event":"call.scored"}"#.into(),
        now,
    )
    .await
    .expect("enqueue");

    assert_eq!(outbox.drain().await.expect("drain"), [Outcome::Retried]);
    let first = sink.next().await;
    assert_eq!(outbox.drain().await.expect("drain"), []);
    clock.advance(chrono::Duration::seconds(299));
    assert_eq!(
        outbox.drain().await.expect("drain"),
        [],
        "not before five minutes"
    );
    clock.advance(chrono::Duration::seconds(1));
    assert_eq!(
        outbox.try_deliver_next().await.expect("attempt"),
        Outcome::Failed
    );
    let retry = sink.next().await;
    assert_eq!(retry.webhook_id(), "wh_drain");
    assert_eq!(first.webhook_id(), "wh_drain");
    let verifier = Verifier::new(Keyring::single(
        SigningSecret::new(secret.expose()).expect("secret"),
    ));
    let at_retry = clock.now().timestamp();
    assert!(
        verifier
            .verify(retry.signature().as_bytes(), &retry.body, at_retry)
            .is_ok()
    );
    assert!(
        verifier
            .verify(first.signature().as_bytes(), &first.body, at_retry + 1)
            .is_err(),
        "the first signature is stale by then"
    );
    clock.advance(chrono::Duration::days(1));
    assert_eq!(
        outbox.try_deliver_next().await.expect("attempt"),
        Outcome::Empty
    );
    sink.assert_silent(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn deliveries_another_process_queues_go_out_without_waiting_for_the_idle_check() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("outbox.db");
    let db = Db::open(&path).await.expect("open");
    let mut sink = WebhookSink::start().await;
    db.create_tenant(NewTenant {
        id: "ten_outside".into(),
        webhook_url: Some(sink.url.clone()),
        signing_secret: TenantSecret::generate(),
        ..NewTenant::new("outside", ApiKey::generate().hash())
    })
    .await
    .expect("tenant");
    let client = WebhookClient::new(true).expect("client");
    let outbox = Outbox::new(db.clone(), client, Clock::System, Duration::from_secs(300));
    // Another connection to the file, as `svc-cli sandbox trigger` or the operator's
    // `calls ingest-real` in a process of their own.
    let other = Db::open(&path).await.expect("open again");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(outbox.run(async move {
        let _ = stopped.await;
    }));
    // Right after the start (the loops found nothing and sleep until their next idle check,
    // 5 s away), then once they have long been idle.
    for (id, after) in [("wh_outside_1", 50), ("wh_outside_2", 700)] {
        tokio::time::sleep(Duration::from_millis(after)).await;
        other
            .enqueue_delivery(
                id,
                "ten_outside",
                "svc_call_outside",
                r#"{"event":"call.scored"}"#.into(),
                Utc::now().timestamp_millis(),
            )
            .await
            .expect("enqueue");
        let sent = sink
            .within(Duration::from_secs(3))
            .await
            .unwrap_or_else(|| panic!("{id} sent well before the loops' next idle check"));
        assert_eq!(sent.webhook_id(), id);
    }
    let _ = stop.send(());
    running.await.expect("the outbox stops");
}
