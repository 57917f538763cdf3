//! What the client's tests share: a client for a wiremock server, a retry policy that records
//! its waits instead of sleeping, and the requests a server received.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use svc_client::{ApiKey, Client, RetryPolicy};
use svc_fixtures::{API_KEY, base_url};
use wiremock::MockServer;

/// A retry policy whose sleeps are recorded (and take no time).
pub(crate) fn recording_policy(max_retries: u32) -> (RetryPolicy, Arc<Mutex<Vec<Duration>>>) {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let recorded = waits.clone();
    let policy = RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(100),
        max_delay: Duration::from_secs(2),
        max_retry_after: Duration::from_secs(60),
        sleep: Arc::new(move |d| {
            recorded.lock().expect("waits").push(d);
            Box::pin(async {})
        }),
    };
    (policy, waits)
}

/// A client for `server` with the fixture key and the given policy.
pub(crate) fn client(server: &MockServer, policy: RetryPolicy) -> Client {
    Client::builder(base_url(server))
        .api_key(ApiKey::new(API_KEY))
        .timeout(Duration::from_secs(5))
        .retry(policy)
        .build()
        .expect("client")
}

/// Requests the server received for a method and path.
pub(crate) async fn requests_to(
    server: &MockServer,
    method: &str,
    path: &str,
) -> Vec<wiremock::Request> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.method.as_str() == method && r.url.path() == path)
        .collect()
}
