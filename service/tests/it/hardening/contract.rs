//! Contract deviations from the audit.

use reqwest::Method;
use serde_json::json;
use svc_service::db::ScoredCall;

use crate::helpers::spawn_app;
use crate::practice_helpers::{practice_app, redeem, tenant_with_rep, token};

#[tokio::test]
async fn a_json_array_is_not_a_request_body() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.post(
        &tenant,
        "/v1/agencies",
        json!(["ag-1", "Named by position"]),
    )
    .await
    .expect_error(400, "INVALID_REQUEST");
    // Nothing was created: registering into it finds no agency.
    app.post(
        &tenant,
        "/v1/agents",
        json!({ "firstName": "A", "lastName": "B", "platformAgentId": "r", "platformAgencyId": "ag-1" }),
    )
    .await
    .expect_error(404, "AGENCY_NOT_FOUND");
    for path in ["/v1/agents", "/v1/session"] {
        app.post(&tenant, path, json!(["x", "y"]))
            .await
            .expect_error(400, "INVALID_REQUEST");
    }
    let reply = app
        .send(
            Method::POST,
            "/v1/agencies",
            Some(&tenant.key),
            Some(json!("a string")),
        )
        .await;
    reply.expect_error(400, "INVALID_REQUEST");
}

#[tokio::test]
async fn a_redeem_with_an_array_body_leaves_the_token_unspent() {
    let app = practice_app(|_| {}).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    redeem(&app, &token, json!(["ma-full-sale"]))
        .await
        .expect_error(400, "INVALID_REQUEST");
    redeem(&app, &token, json!({ "drillKey": "ma-full-sale" }))
        .await
        .expect(200);
}

#[tokio::test]
async fn window_bounds_finer_than_a_millisecond_hold_exactly() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let agency = app.agency(&tenant, "ag-1").await;
    let agent = app
        .agent(&tenant, "ag-1", json!({ "platformAgentId": "rep-1" }))
        .await;
    // A practice call that ended at 2026-01-01T00:00:12.236Z.
    let ended = 1_767_225_612_236_i64;
    app.db
        .insert_scored_calls(vec![ScoredCall {
            id: "svc_call_edge".into(),
            tenant_id: tenant.id.clone(),
            source: "roleplay".into(),
            agent_id: agent["id"].as_str().expect("id").into(),
            agency_id: agency["id"].as_str().expect("id").into(),
            platform_agent_id: Some("rep-1".into()),
            platform_agency_id: Some("ag-1".into()),
            drill_key: Some("ma-full-sale".into()),
            started_at: ended - 60_000,
            duration_sec: 60,
            transcript: "[]".into(),
            score: json!({"overallScore": 50, "summary": "s", "feedback": "f"}).to_string(),
        }])
        .await
        .expect("seed");
    let listed = |query: &str| {
        let path = format!("/v1/calls?source=roleplay&{query}");
        let (app, tenant) = (&app, &tenant);
        async move {
            let page = app.get(tenant, &path).await.expect(200);
            page["data"].as_array().map_or(0, Vec::len)
        }
    };
    // from is inclusive: .2365 is after .236, so the call is outside.
    assert_eq!(listed("from=2026-01-01T00:00:12.2365Z").await, 0);
    assert_eq!(listed("from=2026-01-01T00:00:12.236Z").await, 1);
    assert_eq!(listed("from=2026-01-01T00:00:12.2359Z").await, 1);
    // to is inclusive: .2365 is after .236, so the call is inside; .2359 is before it.
    assert_eq!(
        listed("from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:12.2365Z").await,
        1
    );
    assert_eq!(
        listed("from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:12.2359Z").await,
        0
    );
    // A window within one millisecond is valid (bounds are inclusive) and holds no call.
    for window in [
        "from=2026-01-01T00:00:12.2361Z&to=2026-01-01T00:00:12.2369Z",
        "from=2026-01-01T00:00:12.2365Z&to=2026-01-01T00:00:12.2365Z",
    ] {
        assert_eq!(listed(window).await, 0, "{window}");
    }
    app.get(
        &tenant,
        "/v1/calls?source=roleplay&from=2026-01-01T00:00:12.2369Z&to=2026-01-01T00:00:12.2361Z",
    )
    .await
    .expect_error(400, "INVALID_REQUEST");
}

/// An endpoint that takes ten seconds (on the manual clock) to fail.
async fn slow_failing_endpoint(clock: svc_service::Clock) -> String {
    use axum::http::StatusCode;
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let clock = clock.clone();
            async move {
                clock.advance(chrono::Duration::seconds(10));
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/hook")
}

#[tokio::test]
async fn the_retry_delay_counts_from_the_failed_attempt() {
    use std::time::Duration;

    use chrono::{TimeZone, Utc};
    use svc_service::credentials::{ApiKey, SigningSecret};
    use svc_service::db::{Db, NewTenant};
    use svc_service::webhook::client::WebhookClient;
    use svc_service::webhook::outbox::{Outbox, Outcome};

    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("outbox.db")).await.expect("open");
    let clock = svc_service::Clock::manual(
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .expect("date"),
    );
    let url = slow_failing_endpoint(clock.clone()).await;
    db.create_tenant(NewTenant {
        id: "ten_retry".into(),
        webhook_url: Some(url),
        signing_secret: SigningSecret::generate(),
        ..NewTenant::new("retry", ApiKey::generate().hash())
    })
    .await
    .expect("tenant");
    let client = WebhookClient::new(true).expect("client");
    let outbox = Outbox::new(db.clone(), client, clock.clone(), Duration::from_secs(300));
    let queued = clock.now().timestamp_millis();
    db.enqueue_delivery("wh_slow", "ten_retry", "svc_call_1", "{}".into(), queued)
        .await
        .expect("enqueue");
    assert_eq!(outbox.drain().await.expect("drain"), [Outcome::Retried]);
    // The attempt started at 0 s and failed at 10 s: the retry is due at 310 s, not 300 s.
    clock.advance(chrono::Duration::seconds(289));
    assert_eq!(outbox.drain().await.expect("drain"), [], "at 299 s");
    clock.advance(chrono::Duration::seconds(10));
    assert_eq!(outbox.drain().await.expect("drain"), [], "at 309 s");
    clock.advance(chrono::Duration::seconds(1));
    assert_eq!(
        outbox.drain().await.expect("drain"),
        [Outcome::Failed],
        "at 310 s"
    );
}

#[tokio::test]
async fn a_call_scored_while_its_tenant_is_inactive_is_never_delivered_but_reads_once_reactivated()
{
    // Decided by the contract's "until an endpoint is registered and active,
    // nothing is sent and nothing is queued": the tenant reconciles with GET /calls.
    use svc_service::db::TenantChange;

    use crate::practice_helpers::{GOOD_CALL, WebhookSink, end_call, start_call, wait_outcome};

    let app = practice_app(|config| config.allow_http_webhooks = true).await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let mut sink = WebhookSink::start().await;
    app.change(&tenant, TenantChange::WebhookUrl(Some(sink.url.clone())))
        .await;
    let token = token(&app, &tenant).await;
    let (call_id, mut client) = start_call(&app, &token).await;
    for line in GOOD_CALL {
        client.say(line).await;
    }
    app.change(&tenant, TenantChange::Active(false)).await;
    end_call(client).await;
    assert_eq!(wait_outcome(&app, &call_id).await, "scored");
    app.change(&tenant, TenantChange::Active(true)).await;
    sink.assert_silent(std::time::Duration::from_millis(300))
        .await;
    let queued = app
        .db
        .list_deliveries(Some(tenant.id.clone()), 10)
        .await
        .expect("deliveries");
    assert!(queued.is_empty(), "nothing queued: {queued:?}");
    app.get(&tenant, &format!("/v1/calls/{call_id}"))
        .await
        .expect(200);
}
