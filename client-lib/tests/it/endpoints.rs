//! The endpoints: retries and 429, pagination, lenient reads, error envelope, redaction.

use std::time::Duration;

use futures_util::TryStreamExt;
use serde_json::json;
use svc_client::{
    AgencyRef, ApiKey, CallQuery, CallSource, Client, ClientError, ErrorClass, MintFor,
    RegisterAgent, RetryPolicy,
};
use svc_fixtures::{bodies, faults, happy, paging, respond};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{client, recording_policy, requests_to};

fn roleplay_query() -> CallQuery {
    CallQuery::new(CallSource::Roleplay, "2026-01-01T00:00:00Z")
}

#[tokio::test]
async fn internal_error_on_a_read_is_retried_with_growing_backoff_then_succeeds() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    faults::error(&server, "INTERNAL_ERROR")
        .route("GET", "/calls")
        .times(2)
        .mount()
        .await;
    let (policy, waits) = recording_policy(3);
    let page = client(&server, policy)
        .calls_page(&roleplay_query(), None)
        .await
        .expect("page after retries");
    assert_eq!(page.data.len(), 1);
    let waits = waits.lock().expect("waits").clone();
    assert_eq!(waits.len(), 2, "two retries");
    // Equal jitter: retry n waits between half and all of 100ms * 2^n.
    assert!(
        waits[0] >= Duration::from_millis(50) && waits[0] <= Duration::from_millis(100),
        "{waits:?}"
    );
    assert!(
        waits[1] >= Duration::from_millis(100) && waits[1] <= Duration::from_millis(200),
        "{waits:?}"
    );
    assert_eq!(requests_to(&server, "GET", "/v1/calls").await.len(), 3);
}

#[tokio::test]
async fn service_unavailable_on_a_read_is_retried() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    faults::error(&server, "SERVICE_UNAVAILABLE")
        .route("GET", "/calls/svc_call_fx0001")
        .times(1)
        .mount()
        .await;
    let (policy, waits) = recording_policy(3);
    let call = client(&server, policy)
        .call(&bodies::ROLEPLAY_CALL_ID.parse().expect("call id"))
        .await
        .expect("call after retry");
    assert_eq!(call.row.id, bodies::ROLEPLAY_CALL_ID);
    assert_eq!(waits.lock().expect("waits").len(), 1);
}

#[tokio::test]
async fn internal_error_on_register_is_not_retried() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    faults::error(&server, "INTERNAL_ERROR")
        .route("POST", "/agents")
        .times(1)
        .mount()
        .await;
    let (policy, waits) = recording_policy(3);
    let body = RegisterAgent {
        first_name: Some("Dana".into()),
        last_name: Some("Reyes".into()),
        email: None,
        npn: Some("12345678".into()),
        platform_agent_id: None,
        agency: AgencyRef::Platform("acme-1".into()),
    };
    let error = client(&server, policy)
        .register_agent(&body)
        .await
        .expect_err("500 surfaces");
    assert_eq!(error.code(), Some("INTERNAL_ERROR"));
    assert_eq!(error.class(), ErrorClass::Temporary);
    assert!(waits.lock().expect("waits").is_empty());
    assert_eq!(requests_to(&server, "POST", "/v1/agents").await.len(), 1);
}

#[tokio::test]
async fn rate_limit_waits_exactly_the_retry_after_the_service_asked_for() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    faults::rate_limited(&server)
        .route("POST", "/session")
        .retry_after(7)
        .times(1)
        .mount()
        .await;
    let (policy, waits) = recording_policy(3);
    let token = client(&server, policy)
        .mint_session(&MintFor::PlatformAgentId("rep-1001".into()))
        .await
        .expect("token");
    assert!(!token.token.is_empty());
    assert_eq!(*waits.lock().expect("waits"), vec![Duration::from_secs(7)]);
    assert_eq!(requests_to(&server, "POST", "/v1/session").await.len(), 2);
}

#[tokio::test]
async fn rate_limit_longer_than_the_cap_is_returned_as_a_temporary_error() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    faults::rate_limited(&server)
        .route("GET", "/calls")
        .retry_after(3600)
        .times(1)
        .mount()
        .await;
    let (policy, waits) = recording_policy(3);
    let error = client(&server, policy)
        .calls_page(&roleplay_query(), None)
        .await
        .expect_err("429 surfaces");
    let api = error.api().expect("api error");
    assert_eq!(
        (api.status, api.retry_after),
        (429, Some(Duration::from_secs(3600)))
    );
    assert_eq!(error.class(), ErrorClass::Temporary);
    assert!(waits.lock().expect("waits").is_empty());
    // The message says how long to wait, so whoever reads it knows when to run again.
    assert!(error.to_string().contains("retry after 3600 s"), "{error}");
}

#[tokio::test]
async fn tenant_quota_exceeded_is_never_retried_and_is_not_temporary() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/session"))
        .respond_with(respond::error("TENANT_QUOTA_EXCEEDED"))
        .named("quota spent")
        .mount(&server)
        .await;
    let (policy, waits) = recording_policy(3);
    let error = client(&server, policy)
        .mint_session(&MintFor::AgentId(
            "svc_agent_fx0001".parse().expect("agent id"),
        ))
        .await
        .expect_err("403");
    assert_eq!(error.code(), Some("TENANT_QUOTA_EXCEEDED"));
    assert_eq!(error.class(), ErrorClass::Failure);
    assert!(waits.lock().expect("waits").is_empty());
    assert_eq!(requests_to(&server, "POST", "/v1/session").await.len(), 1);
}

#[tokio::test]
async fn connection_reset_on_a_read_is_retried() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    faults::connection_reset(&server)
        .route("GET", "/agents")
        .times(1)
        .mount()
        .await;
    let (policy, waits) = recording_policy(3);
    let page = client(&server, policy)
        .agents_page(&Default::default(), None)
        .await
        .expect("page after reset");
    assert_eq!(page.data.len(), 2);
    assert_eq!(waits.lock().expect("waits").len(), 1);
}

#[tokio::test]
async fn a_slow_response_times_out_and_the_read_is_retried() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    faults::slow(&server, Duration::from_secs(3))
        .route("GET", "/calls")
        .respond_with(respond::json(200, bodies::calls_page_roleplay()))
        .times(1)
        .mount()
        .await;
    let (policy, waits) = recording_policy(2);
    let client = Client::builder(svc_fixtures::base_url(&server))
        .api_key(ApiKey::new(svc_fixtures::API_KEY))
        .timeout(Duration::from_millis(300))
        .retry(policy)
        .build()
        .expect("client");
    let page = client
        .calls_page(&roleplay_query(), None)
        .await
        .expect("second attempt answers");
    assert_eq!(page.data.len(), 1);
    assert_eq!(waits.lock().expect("waits").len(), 1);
}

#[tokio::test]
async fn retries_stop_at_the_limit_and_return_the_last_error() {
    let server = MockServer::start().await;
    faults::error(&server, "INTERNAL_ERROR")
        .route("GET", "/calls")
        .times(50)
        .mount()
        .await;
    let (policy, _) = recording_policy(2);
    let error = client(&server, policy)
        .calls_page(&roleplay_query(), None)
        .await
        .expect_err("keeps failing");
    assert_eq!(error.code(), Some("INTERNAL_ERROR"));
    assert_eq!(requests_to(&server, "GET", "/v1/calls").await.len(), 3);
}

#[tokio::test]
async fn errors_carry_code_message_request_id_and_details() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/agents"))
        .respond_with(respond::error("AGENT_ALREADY_EXISTS"))
        .named("already exists")
        .mount(&server)
        .await;
    let body = RegisterAgent {
        first_name: None,
        last_name: None,
        email: Some("a@b.example".into()),
        npn: None,
        platform_agent_id: None,
        agency: AgencyRef::Service("svc_agency_fx0001".parse().expect("agency id")),
    };
    let error = client(&server, RetryPolicy::none())
        .register_agent(&body)
        .await
        .expect_err("409");
    let api = error.api().expect("api error");
    assert_eq!(api.status, 409);
    assert_eq!(api.code, "AGENT_ALREADY_EXISTS");
    assert!(!api.message.is_empty());
    // The fixtures give every response a fresh request id, in the header and the envelope.
    assert!(
        api.request_id
            .as_deref()
            .is_some_and(|id| id.starts_with("req_")),
        "{api:?}"
    );
    assert_eq!(api.detail("agencyId"), Some("svc_agency_fx0001"));
    assert_eq!(api.detail("matchedOn"), Some("npn"));
}

#[tokio::test]
async fn an_error_without_an_envelope_keeps_status_and_request_id_header() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/calls/svc_call_x"))
        .respond_with(
            ResponseTemplate::new(502)
                .insert_header("x-service-request-id", "req_gateway")
                .set_body_string("bad gateway"),
        )
        .named("gateway error")
        .mount(&server)
        .await;
    let error = client(&server, RetryPolicy::none())
        .call(&"svc_call_x".parse().expect("call id"))
        .await
        .expect_err("502");
    let api = error.api().expect("api error");
    assert_eq!(
        (api.code.as_str(), api.request_id.as_deref()),
        ("HTTP_502", Some("req_gateway"))
    );
}

#[tokio::test]
async fn the_calls_stream_follows_every_cursor_in_order() {
    let server = MockServer::start().await;
    let paged = paging::mount_paged_calls(&server, "roleplay", 7, 3).await;
    let rows: Vec<_> = client(&server, RetryPolicy::none())
        .calls(roleplay_query())
        .try_collect()
        .await
        .expect("all pages");
    let ids: Vec<_> = rows.into_iter().map(|r| r.id.into_string()).collect();
    assert_eq!(ids, paged.ids);
    assert_eq!(requests_to(&server, "GET", "/v1/calls").await.len(), 3);
}

#[tokio::test]
async fn a_row_repeated_by_a_shifted_page_is_yielded_once() {
    let server = MockServer::start().await;
    let expected = faults::shifting_calls_page(&server).await;
    let rows: Vec<_> = client(&server, RetryPolicy::none())
        .calls(roleplay_query())
        .try_collect()
        .await
        .expect("pages");
    assert_eq!(
        rows.into_iter()
            .map(|r| r.id.into_string())
            .collect::<Vec<_>>(),
        expected
    );
}

#[tokio::test]
async fn reads_keep_unknown_score_keys_turn_keys_and_sources() {
    let server = MockServer::start().await;
    let mut detail = bodies::call_real_call();
    detail["source"] = json!("coaching_call");
    detail["score"]["energy"] = json!({ "level": "high" });
    // The service is the source of truth for its ids: one of an unexpected shape is still read.
    detail["agentId"] = json!("legacy-agent-7");
    Mock::given(method("GET"))
        .and(path("/v1/calls/svc_call_fx0002"))
        .respond_with(respond::json(200, detail))
        .named("call with a new source")
        .mount(&server)
        .await;
    let call = client(&server, RetryPolicy::none())
        .call(&"svc_call_fx0002".parse().expect("call id"))
        .await
        .expect("lenient read");
    assert_eq!(
        call.row.agent_id.as_ref().map(|id| id.as_str()),
        Some("legacy-agent-7")
    );
    assert_eq!(call.row.source, CallSource::Other("coaching_call".into()));
    assert_eq!(call.score.extra["energy"], json!({ "level": "high" }));
    assert!(call.score.compliance_scorecard.is_some());
    assert_eq!(call.transcript[1].extra["speakerConfidence"], json!(0.97));
    assert_eq!(call.transcript[1].start_time, Some(2.9));
    let round_trip = serde_json::to_value(&call).expect("serialise");
    assert_eq!(round_trip["score"]["energy"], json!({ "level": "high" }));
    assert_eq!(round_trip["source"], json!("coaching_call"));
}

#[test]
fn known_sources_decode_to_their_variants_and_encode_back_as_sent() {
    use svc_client::{CallRow, Page};
    for (body, expected, wire) in [
        (
            bodies::calls_page_roleplay(),
            CallSource::Roleplay,
            "roleplay",
        ),
        (
            bodies::calls_page_real_call(),
            CallSource::RealCall,
            "real_call",
        ),
    ] {
        let page: Page<CallRow> = serde_json::from_value(body).expect("decodes");
        assert_eq!(page.data[0].source, expected);
        assert_eq!(expected.to_string(), wire);
        let round_trip = serde_json::to_value(&page).expect("serialise");
        assert_eq!(round_trip["data"][0]["source"], json!(wire));
    }
}

#[test]
fn secrets_are_redacted_in_debug_output() {
    let key = ApiKey::new("svc_live_super_secret");
    assert!(!format!("{key:?}").contains("super_secret"));
    let client = Client::builder("http://127.0.0.1:9/v1")
        .api_key(key)
        .build()
        .expect("client");
    assert!(!format!("{client:?}").contains("super_secret"));
    let token: svc_client::SessionToken = serde_json::from_value(
        json!({ "token": "jwt.secret.sig", "expiresAt": "2026-01-01T00:00:00.000Z" }),
    )
    .expect("token");
    assert!(!format!("{token:?}").contains("jwt.secret"));
}

#[test]
fn a_base_url_must_be_http_and_end_in_v1() {
    for bad in [
        "http://127.0.0.1:8080",
        "ftp://127.0.0.1/v1",
        "not a url",
        "http://127.0.0.1/v2",
    ] {
        let error = Client::builder(bad).build().expect_err(bad);
        assert!(
            matches!(error, ClientError::BaseUrl { .. }),
            "{bad}: {error}"
        );
    }
    for good in [
        "http://127.0.0.1:8080/v1",
        "https://api.example.test/v1/",
        "http://127.0.0.1/prefix/v1",
    ] {
        assert!(Client::builder(good).build().is_ok(), "{good}");
    }
}

#[test]
fn every_success_fixture_decodes_with_the_client_types() {
    use svc_client::{
        Agency, Agent, CallDetail, CallRow, LiveSession, Page, Registered, SessionToken,
    };
    let decode = |name: &str, result: Result<(), serde_json::Error>| {
        assert!(result.is_ok(), "{name}: {result:?}")
    };
    decode(
        "agency",
        serde_json::from_value::<Agency>(bodies::agency()).map(drop),
    );
    decode(
        "agent",
        serde_json::from_value::<Agent>(bodies::agent()).map(drop),
    );
    decode(
        "register_agent",
        serde_json::from_value::<Registered>(bodies::register_agent()).map(drop),
    );
    decode(
        "agents_page",
        serde_json::from_value::<Page<Agent>>(bodies::agents_page()).map(drop),
    );
    decode(
        "session_token",
        serde_json::from_value::<SessionToken>(bodies::session_token()).map(drop),
    );
    decode(
        "roleplay_session",
        serde_json::from_value::<LiveSession>(bodies::roleplay_session()).map(drop),
    );
    decode(
        "calls_page_roleplay",
        serde_json::from_value::<Page<CallRow>>(bodies::calls_page_roleplay()).map(drop),
    );
    decode(
        "calls_page_real_call",
        serde_json::from_value::<Page<CallRow>>(bodies::calls_page_real_call()).map(drop),
    );
    decode(
        "call_roleplay",
        serde_json::from_value::<CallDetail>(bodies::call_roleplay()).map(drop),
    );
    decode(
        "call_real_call",
        serde_json::from_value::<CallDetail>(bodies::call_real_call()).map(drop),
    );
}
