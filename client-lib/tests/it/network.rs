//! A slow or lossy network between the client and the service, through
//! `svc_test_support::proxy`: each attempt is cut at the timeout wherever it stalls (connecting,
//! the headers, or mid-body), and one call never outlasts [`Client::request_bound`].

use std::time::{Duration, Instant};

use svc_client::{ApiKey, Client, ClientError, RetryPolicy};
use svc_fixtures::bodies::ROLEPLAY_CALL_ID;
use svc_fixtures::{API_KEY, happy};
use svc_test_support::proxy::{Fault, Proxy};
use wiremock::MockServer;

use crate::helpers::recording_policy;

/// A call id the happy path serves.
fn call_id() -> svc_client::CallId {
    ROLEPLAY_CALL_ID.parse().expect("fixture call id")
}

/// The happy path behind a proxy, and a client of the proxy with `timeout` and `policy`.
async fn through_proxy(
    timeout: Duration,
    policy: RetryPolicy,
    http: Option<reqwest::Client>,
) -> (MockServer, Proxy, Client) {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    let proxy = Proxy::start(*server.address()).await.expect("proxy");
    let mut builder = Client::builder(format!("http://{}/v1", proxy.addr()))
        .api_key(ApiKey::new(API_KEY))
        .timeout(timeout)
        .retry(policy);
    if let Some(http) = http {
        builder = builder.http_client(http);
    }
    (server, proxy, builder.build().expect("client"))
}

#[tokio::test]
async fn a_body_that_stalls_mid_way_is_cut_at_the_timeout() {
    // The caller's own client has no timeout of its own: the builder's must still cut the body.
    for http in [None, Some(reqwest::Client::new())] {
        let (_server, proxy, client) =
            through_proxy(Duration::from_millis(500), RetryPolicy::none(), http).await;
        let full = client.call(&call_id()).await.expect("a whole answer first");
        assert_eq!(full.row.id.as_str(), call_id().as_str());
        let whole = proxy.stats().bytes_down;
        // The headers and part of the body, then nothing on an open connection.
        proxy.set(Fault::StallAfter(whole - 40));
        let started = Instant::now();
        let error = client.call(&call_id()).await.expect_err("cut");
        let took = started.elapsed();
        assert!(matches!(error, ClientError::Timeout(_)), "{error:?}");
        assert!(
            took >= Duration::from_millis(450) && took < Duration::from_secs(3),
            "cut at the timeout, after {took:?}"
        );
        assert_eq!(proxy.stats().stalled, 1, "the body did stall");
    }
}

#[tokio::test]
async fn added_latency_under_the_timeout_only_slows_a_call_down() {
    let (_server, proxy, client) =
        through_proxy(Duration::from_secs(3), RetryPolicy::none(), None).await;
    proxy.set(Fault::Latency(Duration::from_millis(200)));
    let started = Instant::now();
    client.call(&call_id()).await.expect("slow but whole");
    assert!(started.elapsed() >= Duration::from_millis(400));
}

#[tokio::test]
async fn a_reset_connection_is_a_connection_error_retried_on_a_new_connection() {
    let (policy, waits) = recording_policy(2);
    let (_server, proxy, client) = through_proxy(Duration::from_secs(2), policy, None).await;
    proxy.set(Fault::ResetOnAccept);
    let error = client.call(&call_id()).await.expect_err("reset every time");
    assert!(matches!(error, ClientError::Connect(_)), "{error:?}");
    assert_eq!(waits.lock().expect("waits").len(), 2, "retried twice");
    assert_eq!(proxy.stats().reset, 3, "three connections, each reset");
}

#[tokio::test]
async fn a_black_hole_costs_at_most_the_request_bound() {
    let policy = RetryPolicy {
        max_retries: 2,
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(100),
        max_retry_after: Duration::from_millis(100),
        ..RetryPolicy::default()
    };
    let (_server, proxy, client) = through_proxy(Duration::from_millis(300), policy, None).await;
    // 3 attempts of 300 ms, and two waits of at most 100 ms.
    assert_eq!(client.request_bound(), Duration::from_millis(1100));
    proxy.set(Fault::BlackHole);
    let started = Instant::now();
    let error = client.call(&call_id()).await.expect_err("never answered");
    let took = started.elapsed();
    assert!(matches!(error, ClientError::Timeout(_)), "{error:?}");
    assert!(
        took >= Duration::from_millis(900),
        "three timeouts: {took:?}"
    );
    assert!(
        took < client.request_bound() + Duration::from_millis(500),
        "within the bound: {took:?}"
    );
    assert_eq!(proxy.stats().black_holed, 3);
}

#[test]
fn the_request_bound_counts_every_attempt_and_the_longest_wait_before_each_retry() {
    let policy = RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(3),
        max_retry_after: Duration::from_secs(2),
        ..RetryPolicy::default()
    };
    // Waits: max(1, 2) + max(2, 2) + max(min(4, 3), 2) = 7 s.
    assert_eq!(policy.max_total_wait(), Duration::from_secs(7));
    assert_eq!(
        policy.request_bound(Duration::from_secs(10)),
        Duration::from_secs(47)
    );
    assert_eq!(
        RetryPolicy::none().request_bound(Duration::from_secs(10)),
        Duration::from_secs(10)
    );
}
