//! What a caller sets on the builder (its own `reqwest::Client`, a User-Agent suffix), the
//! error codes as a typed enum with an unknown fallback, and messages that speak of the library's
//! own API, never of a command line's flags or environment.

use std::time::Duration;

use serde_json::json;
use svc_client::{ApiKey, CallId, Client, ClientError, ErrorCode, RetryPolicy};
use svc_fixtures::bodies::{self, ROLEPLAY_CALL_ID};
use svc_fixtures::{API_KEY, base_url, happy};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn call_id() -> CallId {
    ROLEPLAY_CALL_ID.parse().expect("fixture call id")
}

#[tokio::test]
async fn the_user_agent_names_the_client_and_the_callers_suffix() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    let client = Client::builder(base_url(&server))
        .api_key(ApiKey::new(API_KEY))
        .user_agent_suffix("my-crm/2.1")
        .build()
        .expect("client");
    client.call(&call_id()).await.expect("detail");
    let requests = server.received_requests().await.unwrap_or_default();
    let agent = requests[0].headers["user-agent"].to_str().expect("ascii");
    assert_eq!(
        agent,
        format!("svc-client/{} my-crm/2.1", env!("CARGO_PKG_VERSION"))
    );
    assert!(!agent.starts_with("svc-cli/"), "{agent}");
}

#[test]
fn a_user_agent_suffix_that_is_not_printable_ascii_is_refused() {
    for suffix in ["tab\there", "new\nline", "naïve"] {
        let built = Client::builder("http://127.0.0.1:1/v1")
            .user_agent_suffix(suffix)
            .build();
        assert!(
            matches!(built, Err(ClientError::UserAgent)),
            "{suffix:?}: {built:?}"
        );
    }
}

#[tokio::test]
async fn the_callers_own_http_client_sends_with_the_clients_key_and_agent() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/calls/{ROLEPLAY_CALL_ID}")))
        .and(header("x-callers-client", "yes"))
        .and(header(
            "authorization",
            format!("Bearer {API_KEY}").as_str(),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(bodies::call_roleplay()))
        .mount(&server)
        .await;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-callers-client", "yes".parse().expect("header"));
    let own = reqwest::Client::builder()
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("reqwest client");
    let client = Client::builder(base_url(&server))
        .api_key(ApiKey::new(API_KEY))
        .http_client(own)
        .build()
        .expect("client");
    let detail = client
        .call(&call_id())
        .await
        .expect("through the caller's client");
    assert_eq!(detail.row.id.as_str(), ROLEPLAY_CALL_ID);
}

#[tokio::test]
async fn a_redirect_the_callers_client_followed_is_still_an_error() {
    let target = MockServer::start().await;
    happy::mount(&target).await;
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(302).insert_header(
            "location",
            format!("{}/calls/{ROLEPLAY_CALL_ID}", base_url(&target)).as_str(),
        ))
        .mount(&server)
        .await;
    let following = reqwest::Client::new();
    let client = Client::builder(base_url(&server))
        .api_key(ApiKey::new(API_KEY))
        .http_client(following)
        .retry(RetryPolicy::none())
        .build()
        .expect("client");
    let error = client
        .call(&call_id())
        .await
        .expect_err("not the service's answer");
    assert!(matches!(error, ClientError::Redirect { .. }), "{error:?}");
}

#[tokio::test]
async fn the_builders_timeout_applies_to_the_callers_client_too() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(bodies::call_roleplay())
                .set_delay(Duration::from_secs(5)),
        )
        .mount(&server)
        .await;
    let client = Client::builder(base_url(&server))
        .api_key(ApiKey::new(API_KEY))
        .http_client(reqwest::Client::new())
        .timeout(Duration::from_millis(200))
        .retry(RetryPolicy::none())
        .build()
        .expect("client");
    let error = client.call(&call_id()).await.expect_err("times out");
    assert!(matches!(error, ClientError::Timeout(_)), "{error:?}");
}

#[tokio::test]
async fn error_codes_are_typed_and_an_unknown_one_is_kept_as_sent() {
    let server = MockServer::start().await;
    for (id, code) in [
        ("svc_call_known", "CALL_NOT_FOUND"),
        ("svc_call_new", "SOMETHING_NEW"),
    ] {
        Mock::given(method("GET"))
            .and(path(format!("/v1/calls/{id}")))
            .respond_with(ResponseTemplate::new(404).set_body_json(json!({
                "error": { "code": code, "message": "m", "requestId": "req_1" }
            })))
            .mount(&server)
            .await;
    }
    let client = Client::builder(base_url(&server))
        .api_key(ApiKey::new(API_KEY))
        .retry(RetryPolicy::none())
        .build()
        .expect("client");
    let known = client
        .call(&"svc_call_known".parse().expect("id"))
        .await
        .expect_err("404");
    let api = known.api().expect("an API error");
    assert_eq!(api.code, ErrorCode::CallNotFound);
    assert_eq!(api.request_id.as_deref(), Some("req_1"));
    let unknown = client
        .call(&"svc_call_new".parse().expect("id"))
        .await
        .expect_err("404");
    let api = unknown.api().expect("an API error");
    assert_eq!(api.code, ErrorCode::Unknown("SOMETHING_NEW".into()));
    assert_eq!(api.code, "SOMETHING_NEW");
    assert_eq!(ErrorCode::parse("RATE_LIMITED"), ErrorCode::RateLimited);
    assert_eq!(
        ErrorCode::TenantQuotaExceeded.as_str(),
        "TENANT_QUOTA_EXCEEDED"
    );
}

#[test]
fn no_message_names_a_command_line_flag_or_variable() {
    let insecure = Client::builder("http://svc.example.test/v1")
        .build()
        .expect_err("plain HTTP");
    let errors = [
        ClientError::MissingApiKey,
        insecure,
        ClientError::UserAgent,
        ClientError::Redirect {
            status: 301,
            location: None,
        },
    ];
    for error in errors {
        let text = error.to_string();
        for word in ["--", "SVC_", "svc-cli"] {
            assert!(!text.contains(word), "{word} in {text:?}");
        }
    }
}
