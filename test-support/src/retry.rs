//! svc-client's retry policy with its sleeps recorded (and taking no time), and a client for a
//! wiremock server with the fixture key.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use svc_client::{ApiKey, Client, RetryPolicy};
use svc_fixtures::{API_KEY, base_url};
use wiremock::MockServer;

/// A retry policy whose sleeps are recorded (and take no time).
pub fn recording_policy(max_retries: u32) -> (RetryPolicy, Arc<Mutex<Vec<Duration>>>) {
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
///
/// # Panics
/// When the client cannot be built.
pub fn client(server: &MockServer, policy: RetryPolicy) -> Client {
    Client::builder(base_url(server))
        .api_key(ApiKey::new(API_KEY))
        .timeout(Duration::from_secs(5))
        .retry(policy)
        .build()
        .expect("client")
}
