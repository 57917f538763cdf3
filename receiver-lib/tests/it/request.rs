//! The verify-only path in one call (`verify_request`), the one status type of both error
//! enums, and the opt-in that acknowledges events this version does not know.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use svc_contract::{
    Clock, MalformedHeader, ManualClock, SigningSecret, SystemClock, UnknownEvents, VerifyError,
    sign, verify_request,
};
use svc_receiver::axum::{InboxReceiver, WebhookReceiver, inbox_route, webhook_route};
use svc_receiver::dedup::MemoryDedupStore;
use svc_receiver::inbox::{InboxAdmin, InboxPolicy};
use svc_receiver::sqlite::SqliteInbox;
use svc_receiver::{ReceiveError, Received};

use crate::helpers::{Logs, SECRET, T, client, event_body, post, spawn, verifier};

fn headers(signatures: &[&str]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for signature in signatures {
        headers.append(
            "x-service-signature",
            signature.parse().expect("header value"),
        );
    }
    headers
}

#[test]
fn verify_request_reads_the_header_and_the_clock_itself() {
    let secret = SigningSecret::new(SECRET).expect("secret");
    let body = event_body("svc_call_one_call");
    let now = SystemClock.now();
    let event =
        verify_request(&secret, &headers(&[&sign(SECRET, now, &body)]), &body).expect("valid");
    assert_eq!(event.call_id, "svc_call_one_call");

    // Signed at the fixed test time, long past: the system clock is read, and refuses it.
    let old = verify_request(&secret, &headers(&[&sign(SECRET, T, &body)]), &body);
    assert!(
        matches!(old, Err(VerifyError::TimestampTooOld { .. })),
        "{old:?}"
    );
    // The explicit clock stays, for tests and replays.
    let replayed = verifier()
        .verify_request_at(&headers(&[&sign(SECRET, T, &body)]), &body, T)
        .expect("valid at T");
    assert_eq!(replayed, event);
}

#[test]
fn verify_request_refuses_a_missing_or_repeated_header() {
    let secret = SigningSecret::new(SECRET).expect("secret");
    let body = event_body("svc_call_headers");
    assert_eq!(
        verify_request(&secret, &HeaderMap::new(), &body),
        Err(VerifyError::MissingHeader)
    );
    let header = sign(SECRET, SystemClock.now(), &body);
    let repeated = verify_request(&secret, &headers(&[&header, &header]), &body);
    assert_eq!(
        repeated,
        Err(VerifyError::MalformedHeader(MalformedHeader::Repeated))
    );
}

#[test]
fn both_error_types_answer_the_same_status_type() {
    let verify = VerifyError::MissingHeader;
    let receive = ReceiveError::from(VerifyError::MissingHeader);
    let both: [StatusCode; 2] = [verify.http_status(), receive.http_status()];
    assert_eq!(both, [StatusCode::BAD_REQUEST; 2]);
    assert_eq!(ReceiveError::Replayed.http_status(), 401);
}

/// A body that verifies but names an event v1 does not have, with fields of its own.
fn other_event() -> Vec<u8> {
    br#"{"event":"call.deleted","callId":"svc_call_gone","deletedAt":"2026-01-01T00:00:00Z"}"#
        .to_vec()
}

#[test]
fn an_event_of_another_kind_is_named_not_reported_as_a_missing_field() {
    let body = other_event();
    let header = sign(SECRET, T, &body);
    let err = verifier()
        .verify(header.as_bytes(), &body, T)
        .expect("signature holds")
        .decode()
        .expect_err("not call.scored");
    assert_eq!(
        err,
        VerifyError::UnknownEvent {
            event: "call.deleted".into()
        }
    );
    assert_eq!(err.http_status(), 400);
}

#[tokio::test]
async fn unknown_events_are_refused_by_default_and_acknowledged_on_request() {
    let runs = Arc::new(AtomicUsize::new(0));
    let route = |unknown: UnknownEvents| {
        let runs = Arc::clone(&runs);
        let handler = move |_: Received| {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), String>(()) }
        };
        let receiver = WebhookReceiver::new(
            verifier().with_unknown_events(unknown),
            MemoryDedupStore::default(),
            handler,
        )
        .with_clock(Arc::new(ManualClock::new(T)));
        Router::new().route("/webhooks", webhook_route(receiver))
    };
    let (logs, _logging) = Logs::capture();
    let refusing = spawn(route(UnknownEvents::default())).await;
    let acknowledging = spawn(route(UnknownEvents::Acknowledge)).await;
    let client = client();
    let body = other_event();
    let header = sign(SECRET, T, &body);

    let refused = post(
        &client,
        refusing,
        Some("wh_u1"),
        Some(&header),
        body.clone(),
    )
    .await;
    assert_eq!(refused, (400, r#"{"error":"unknown event"}"#.to_owned()));
    let acknowledged = post(&client, acknowledging, Some("wh_u2"), Some(&header), body).await;
    assert_eq!(acknowledged, (200, String::new()));
    assert_eq!(runs.load(Ordering::SeqCst), 0, "user code never sees it");
    let lines = logs.lines_with("acknowledged, not processed");
    assert_eq!(lines.len(), 1, "{}", logs.text());
    assert!(
        lines[0].contains("webhook_id=wh_u2") && lines[0].contains("call.deleted"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn an_acknowledged_unknown_event_is_not_stored_in_the_inbox() {
    let dir = tempfile::tempdir().expect("dir");
    let inbox =
        SqliteInbox::open(dir.path().join("inbox.db"), InboxPolicy::default()).expect("open");
    let receiver = InboxReceiver::new(
        verifier().with_unknown_events(UnknownEvents::Acknowledge),
        inbox.clone(),
    )
    .with_clock(Arc::new(ManualClock::new(T)));
    let addr = spawn(Router::new().route("/webhooks", inbox_route(receiver))).await;
    let body = other_event();
    let header = sign(SECRET, T, &body);
    let answer = post(&client(), addr, Some("wh_u3"), Some(&header), body).await;
    assert_eq!(answer.0, 200);
    assert_eq!(inbox.counts().await.expect("counts"), (0, 0, 0));
}
