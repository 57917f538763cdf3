//! What the client's tests share: a client for a wiremock server, a retry policy that records
//! its waits instead of sleeping, and the requests a server received.

use wiremock::MockServer;

/// In svc-test-support: the waits recorded, and a client for a mock server.
pub(crate) use svc_test_support::retry::{client, recording_policy};

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
