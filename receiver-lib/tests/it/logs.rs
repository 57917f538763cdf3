//! What the logs say about a delivery: every event of it carries its webhook id, so
//! that rejections can be matched with the service's delivery list, and no reason
//! is printed twice.

use std::sync::Arc;

use axum::Router;
use svc_contract::{ManualClock, sign};
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, WebhookReceiver, inbox_route, webhook_route};
use svc_receiver::dedup::MemoryDedupStore;
use svc_receiver::inbox::{InboxAdmin, InboxPolicy, process_next};
use svc_receiver::sqlite::SqliteInbox;

use crate::helpers::{
    Logs, SECRET, T, client, event_body, post, post_with_the_signature_twice, spawn, verifier,
    webhook_id,
};

/// A direct-mode route whose handler logs an event of its own, then succeeds.
async fn direct_route() -> std::net::SocketAddr {
    let handler = |received: Received| async move {
        tracing::info!(call_id = %received.event.call_id, "user code ran");
        Ok::<(), String>(())
    };
    let receiver = WebhookReceiver::new(verifier(), MemoryDedupStore::default(), handler)
        .with_clock(Arc::new(ManualClock::new(T)));
    spawn(Router::new().route("/webhooks", webhook_route(receiver))).await
}

#[tokio::test]
async fn a_rejected_delivery_is_logged_with_its_webhook_id_when_it_has_one() {
    let (logs, _logging) = Logs::capture();
    let addr = direct_route().await;
    let client = client();
    let body = event_body("svc_call_bad");
    let wrong = sign("whsec_not_this_one", T, &body);
    assert_eq!(
        post(
            &client,
            addr,
            Some("wh_bad_sig"),
            Some(&wrong),
            body.clone()
        )
        .await
        .0,
        401
    );
    let rejected = logs.lines_with("webhook delivery rejected");
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert!(
        rejected[0].contains("webhook_id=wh_bad_sig"),
        "{rejected:?}"
    );
    assert!(rejected[0].contains("no signature matches"), "{rejected:?}");

    // No id at all: still logged, with no id to show.
    assert_eq!(post(&client, addr, None, Some(&wrong), body).await.0, 401);
    let rejected = logs.lines_with("webhook delivery rejected");
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert!(!rejected[1].contains("webhook_id="), "{rejected:?}");
}

#[tokio::test]
async fn user_code_and_decode_warnings_log_under_the_deliverys_webhook_id() {
    let (logs, _logging) = Logs::capture();
    let addr = direct_route().await;
    // A reason code this version does not know: decoding warns about it.
    let body = String::from_utf8(event_body("svc_call_new_reason"))
        .expect("utf-8")
        .replace(
            r#""success":true"#,
            r#""success":false,"reason":"NEW_CODE","reasonMessage":"m""#,
        )
        .into_bytes();
    let header = sign(SECRET, T, &body);
    let answer = post(&client(), addr, Some("wh_traced"), Some(&header), body).await;
    assert_eq!(answer.0, 200);
    for needle in ["unknown call.scored reason code", "user code ran"] {
        let lines = logs.lines_with(needle);
        assert_eq!(lines.len(), 1, "{needle}: {}", logs.text());
        assert!(lines[0].contains("webhook_id=wh_traced"), "{lines:?}");
    }
}

#[tokio::test]
async fn inbox_rejections_and_handler_failures_carry_the_webhook_id() {
    let (logs, _logging) = Logs::capture();
    let dir = tempfile::tempdir().expect("dir");
    let inbox =
        SqliteInbox::open(dir.path().join("inbox.db"), InboxPolicy::default()).expect("open");
    let receiver =
        InboxReceiver::new(verifier(), inbox.clone()).with_clock(Arc::new(ManualClock::new(T)));
    let addr = spawn(Router::new().route("/webhooks", inbox_route(receiver))).await;
    let client = client();
    let body = event_body("svc_call_inbox");
    let header = sign(SECRET, T, &body);
    assert_eq!(
        post(
            &client,
            addr,
            Some("wh_stored"),
            Some(&header),
            body.clone()
        )
        .await
        .0,
        200
    );
    // The same signed delivery under another id is a replay.
    assert_eq!(
        post(&client, addr, Some("wh_replay"), Some(&header), body)
            .await
            .0,
        401
    );
    let replay = logs.lines_with("replay");
    assert_eq!(replay.len(), 1, "{}", logs.text());
    assert!(replay[0].contains("webhook_id=wh_replay"), "{replay:?}");

    let handler = |_: Received| async {
        tracing::info!("user code ran");
        Err::<(), _>("downstream unavailable")
    };
    process_next(&inbox, &handler, &ManualClock::new(T))
        .await
        .expect("step");
    for needle in ["user code ran", "webhook handler failed"] {
        let lines = logs.lines_with(needle);
        assert_eq!(lines.len(), 1, "{needle}: {}", logs.text());
        assert!(lines[0].contains("webhook_id=wh_stored"), "{lines:?}");
    }
    assert!(inbox.contains(&webhook_id("wh_stored")).await.expect("db"));
}

#[tokio::test]
async fn a_repeated_signature_header_is_explained_once() {
    let (logs, _logging) = Logs::capture();
    let addr = direct_route().await;
    let body = event_body("svc_call_twice");
    let header = sign(SECRET, T, &body);
    let status = post_with_the_signature_twice(&client(), addr, "wh_twice", &header, body).await;
    assert_eq!(status, 400);
    let text = logs.text();
    assert_eq!(
        text.matches("sent more than once").count(),
        1,
        "the reason is printed once: {text}"
    );
}
