//! The `call.scored` webhook: signed bodies verified with the receiver crate, the earlier mint
//! form's labels echoed only when sent, the retry with the same id and never a third attempt,
//! immediate secret rotation, nothing queued without an endpoint, and a pending retry surviving
//! a restart.

use std::time::Duration;

use serde_json::{Value, json};
use svc_contract::{Keyring, SigningSecret, Verifier};
use svc_service::credentials::SigningSecret as TenantSecret;
use svc_service::db::TenantChange;

use crate::helpers::{TestApp, TestTenant};
use crate::practice_helpers::*;

async fn with_endpoint(app: &TestApp, sink: &WebhookSink) -> (TestTenant, String) {
    let (tenant, _) = tenant_with_rep(app).await;
    app.change(&tenant, TenantChange::WebhookUrl(Some(sink.url.clone())))
        .await;
    let secret = TenantSecret::generate();
    app.change(&tenant, TenantChange::SigningSecret(secret.clone()))
        .await;
    (tenant, secret.expose().to_owned())
}

fn verify(app: &TestApp, secret: &str, received: &Received) -> svc_contract::CallScored {
    let verifier = Verifier::new(Keyring::single(SigningSecret::new(secret).expect("secret")));
    let now = app.clock.now().timestamp();
    let delivery = verifier
        .verify(received.signature().as_bytes(), &received.body, now)
        .expect("signature verifies");
    delivery.decode().expect("a call.scored body")
}

#[tokio::test]
async fn a_scored_call_sends_a_signed_body_without_score_or_transcript() {
    let app = practice_app(|_| {}).await;
    let mut sink = WebhookSink::start().await;
    let (tenant, secret) = with_endpoint(&app, &sink).await;
    let (call_id, _) = run_call(&app, &tenant, &["Hi, my name is Sam"], 30).await;
    let received = sink.next().await;
    assert!(received.webhook_id().starts_with("wh_"));
    assert_eq!(received.headers["content-type"], "application/json");
    let event = verify(&app, &secret, &received);
    assert!(event.success);
    assert_eq!(event.call_id, call_id);
    assert_eq!(event.platform_agent_id.as_deref(), Some("rep-1"));
    assert!(event.request_id.starts_with("req_"));
    let body = received.json();
    let mut keys: Vec<&str> = body
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "agencyId",
            "agentId",
            "callId",
            "event",
            "occurredAt",
            "platformAgencyId",
            "platformAgentId",
            "requestId",
            "source",
            "success"
        ]
    );
    wait_scored(&app, &tenant, &call_id).await;
    sink.assert_silent(Duration::from_millis(300)).await;
}

/// Runs a short call on a token minted with `mint_body`; returns its delivery's verified event
/// and raw JSON body.
async fn delivery_for(
    app: &TestApp,
    tenant: &TestTenant,
    secret: &str,
    sink: &mut WebhookSink,
    mint_body: Value,
) -> (svc_contract::CallScored, Value) {
    let token = minted_token(app, tenant, mint_body).await;
    let (call_id, _) = run_call_with(app, &token, &["Hi, my name is Sam"], 30).await;
    let received = sink.next().await;
    let event = verify(app, secret, &received);
    assert_eq!(event.call_id, call_id);
    (event, received.json())
}

/// A token minted without the earlier form's labels gives exactly the contract's keys (the test
/// above); one minted with them gets them echoed, each only when it was sent.
#[tokio::test]
async fn earlier_form_labels_are_echoed_on_the_body_only_when_the_token_carried_them() {
    let app = practice_app(|_| {}).await;
    let mut sink = WebhookSink::start().await;
    let (tenant, secret) = with_endpoint(&app, &sink).await;

    let both = json!({ "externalUserId": "rep-1", "externalAgencyId": "west-team" });
    let (event, body) = delivery_for(&app, &tenant, &secret, &mut sink, both).await;
    assert_eq!(event.external_user_id.as_deref(), Some("rep-1"));
    assert_eq!(event.external_agency_id.as_deref(), Some("west-team"));
    assert!(
        event.agency_id.starts_with("svc_agency_"),
        "the agency label does not replace the roster's agency"
    );
    assert_eq!(body["externalUserId"], "rep-1");
    assert_eq!(body["externalAgencyId"], "west-team");

    let user_only = json!({ "platformAgentId": "rep-1", "externalUserId": "u-9" });
    let (event, body) = delivery_for(&app, &tenant, &secret, &mut sink, user_only).await;
    assert_eq!(event.external_user_id.as_deref(), Some("u-9"));
    assert_eq!(event.external_agency_id, None);
    assert!(
        body.get("externalAgencyId").is_none(),
        "an unsent label is left out, not null"
    );
}

#[tokio::test]
async fn a_silent_call_sends_success_false_with_scoring_incomplete() {
    let app = practice_app(|_| {}).await;
    let mut sink = WebhookSink::start().await;
    let (tenant, secret) = with_endpoint(&app, &sink).await;
    let (call_id, _) = run_call(&app, &tenant, &[], 30).await;
    let event = verify(&app, &secret, &sink.next().await);
    assert!(!event.success);
    assert_eq!(event.call_id, call_id);
    assert_eq!(
        event.reason,
        Some(svc_contract::FailureReason::ScoringIncomplete)
    );
    assert!(
        event
            .reason_message
            .is_some_and(|m| m.contains("never spoke"))
    );
    app.get(&tenant, &format!("/v1/calls/{call_id}"))
        .await
        .expect_error(404, "CALL_NOT_FOUND");
}

#[tokio::test]
async fn a_failed_delivery_is_retried_once_with_the_same_id_then_never_again() {
    let app = practice_app(|_| {}).await;
    let mut sink = WebhookSink::start().await;
    sink.answer(500);
    let (tenant, secret) = with_endpoint(&app, &sink).await;
    run_call(&app, &tenant, &["Hi, my name is Sam"], 30).await;
    let first = sink.next().await;
    wait_delivery(&app, &tenant, "pending", 1).await;
    sink.assert_silent(Duration::from_millis(1500)).await; // not before the retry delay
    app.clock.advance(chrono::Duration::seconds(1));
    let second = sink.next().await;
    assert_eq!(second.webhook_id(), first.webhook_id());
    assert_eq!(second.body, first.body);
    assert_ne!(
        second.signature(),
        first.signature(),
        "signed afresh at send time"
    );
    verify(&app, &secret, &second);
    wait_delivery(&app, &tenant, "failed", 2).await;
    app.clock.advance(chrono::Duration::minutes(30));
    sink.assert_silent(Duration::from_millis(2500)).await;
    let deliveries = app
        .db
        .list_deliveries(Some(tenant.id.clone()), 10)
        .await
        .expect("deliveries");
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].state, "failed");
    assert_eq!(
        deliveries[0]
            .attempts
            .iter()
            .map(|a| a.status)
            .collect::<Vec<_>>(),
        [Some(500), Some(500)]
    );
}

#[tokio::test]
async fn a_pending_retry_is_signed_with_the_rotated_secret() {
    let app = practice_app(|_| {}).await;
    let mut sink = WebhookSink::start().await;
    sink.answer(503);
    let (tenant, old_secret) = with_endpoint(&app, &sink).await;
    run_call(&app, &tenant, &["Hi, my name is Sam"], 30).await;
    let first = sink.next().await;
    verify(&app, &old_secret, &first);
    wait_delivery(&app, &tenant, "pending", 1).await;
    let rotated = TenantSecret::generate();
    app.change(&tenant, TenantChange::SigningSecret(rotated.clone()))
        .await;
    sink.answer(200);
    app.clock.advance(chrono::Duration::seconds(1));
    let retry = sink.next().await;
    verify(&app, rotated.expose(), &retry);
    let old = Verifier::new(Keyring::single(
        SigningSecret::new(&old_secret).expect("secret"),
    ));
    assert!(
        old.verify(
            retry.signature().as_bytes(),
            &retry.body,
            app.clock.now().timestamp()
        )
        .is_err()
    );
}

#[tokio::test]
async fn without_an_endpoint_nothing_is_queued_even_if_one_is_added_later() {
    let app = practice_app(|_| {}).await;
    let mut sink = WebhookSink::start().await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let (call_id, _) = run_call(&app, &tenant, &["Hi, my name is Sam"], 30).await;
    wait_scored(&app, &tenant, &call_id).await;
    app.change(&tenant, TenantChange::WebhookUrl(Some(sink.url.clone())))
        .await;
    sink.assert_silent(Duration::from_millis(500)).await;
    assert!(
        app.db
            .list_deliveries(Some(tenant.id.clone()), 10)
            .await
            .expect("deliveries")
            .is_empty()
    );
}

#[tokio::test]
async fn a_pending_retry_survives_a_restart() {
    let app = practice_app(|_| {}).await;
    let mut sink = WebhookSink::start().await;
    sink.answer(500);
    let (tenant, secret) = with_endpoint(&app, &sink).await;
    run_call(&app, &tenant, &["Hi, my name is Sam"], 30).await;
    let first = sink.next().await;
    wait_delivery(&app, &tenant, "pending", 1).await;
    let app = app.restart().await;
    sink.answer(204);
    sink.assert_silent(Duration::from_millis(300)).await;
    app.clock.advance(chrono::Duration::seconds(1));
    let retry = sink.next().await;
    assert_eq!(retry.webhook_id(), first.webhook_id());
    verify(&app, &secret, &retry);
    wait_delivery(&app, &tenant, "delivered", 2).await;
}

#[tokio::test]
async fn the_operator_lists_deliveries_with_every_attempt() {
    let app = practice_app(|_| {}).await;
    let mut sink = WebhookSink::start().await;
    sink.answer(500);
    let (tenant, _) = with_endpoint(&app, &sink).await;
    let (call_id, _) = run_call(&app, &tenant, &["Hi, my name is Sam"], 30).await;
    let first = sink.next().await;
    wait_delivery(&app, &tenant, "pending", 1).await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-service"))
        .args(["deliveries", "list", "--json", "--db"])
        .arg(&app.config.db_path)
        .env_remove("SVC_DB")
        .env("RUST_LOG", "warn")
        .output()
        .await
        .expect("run svc-service");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    let delivery = &listed[0];
    assert_eq!(delivery["webhookId"], first.webhook_id().as_str());
    assert_eq!(delivery["callId"], call_id.as_str());
    assert_eq!(delivery["state"], "pending");
    assert_eq!(delivery["nextAttemptAt"], "2026-01-01T00:00:31.000Z");
    let attempt = &delivery["attempts"][0];
    assert_eq!(attempt["status"], 500);
    assert_eq!(attempt["error"], "HTTP 500");
    assert!(attempt["latencyMs"].as_i64().is_some());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(!text.contains("whsec_"), "no secret in the listing");
}

#[tokio::test]
async fn a_live_call_left_behind_by_a_restart_is_reported_as_not_scored() {
    let app = practice_app(|_| {}).await;
    let mut sink = WebhookSink::start().await;
    let (tenant, secret) = with_endpoint(&app, &sink).await;
    let token = token(&app, &tenant).await;
    let started = redeem(
        &app,
        &token,
        serde_json::json!({ "drillKey": "ma-full-sale" }),
    )
    .await
    .expect(200);
    let app = app.restart().await;
    let event = verify(&app, &secret, &sink.next().await);
    assert_eq!(event.call_id, started["callId"].as_str().expect("callId"));
    assert!(!event.success);
    assert!(
        event
            .reason_message
            .is_some_and(|m| m.contains("never completed"))
    );
}

#[tokio::test]
async fn a_server_shutdown_ends_connected_calls_cleanly_and_they_are_scored() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let (call_id, mut client) = start_call(&app, &token).await;
    client.say("Hi, my name is Sam").await;
    app.clock.advance(chrono::Duration::seconds(9));
    let app = app.restart().await;
    let ended = client
        .recv()
        .await
        .expect("ended before the server stopped");
    assert_eq!(ended["type"], "ended");
    assert_eq!(ended["durationSec"], 9);
    wait_scored(&app, &tenant, &call_id).await;
}
