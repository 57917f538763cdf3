//! Connections that never finish their headers cannot exhaust the service:
//! they are closed after the header-read timeout, and a real client is served while hundreds
//! are held open.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::helpers::spawn_app_with;

#[tokio::test]
async fn half_open_connections_are_closed_and_a_real_client_is_still_served() {
    let app = spawn_app_with(|config| {
        config.http_limits.header_read_timeout = Duration::from_millis(500);
        config.http_limits.max_connections = 400;
    })
    .await;
    let tenant = app.tenant().await;
    // Hundreds of clients connect and never send a header.
    let mut held = Vec::new();
    for _ in 0..300 {
        let stream = TcpStream::connect(app.addr).await.expect("connect");
        held.push(stream);
    }
    // A real client is served meanwhile.
    let served = tokio::time::timeout(Duration::from_secs(2), app.get(&tenant, "/v1/agents"))
        .await
        .expect("served while the others are held");
    served.expect(200);
    // A half-open connection is closed by the server after the header-read timeout.
    let mut idle = held.pop().expect("one");
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(3), idle.read(&mut byte))
        .await
        .expect("the server closes it");
    assert_eq!(
        read.map_err(|e| e.kind()).unwrap_or(0),
        0,
        "closed without an answer"
    );
}

#[tokio::test]
async fn past_the_connection_cap_a_client_waits_for_a_slot_instead_of_being_lost() {
    let app = spawn_app_with(|config| {
        config.http_limits.header_read_timeout = Duration::from_millis(300);
        config.http_limits.max_connections = 20;
    })
    .await;
    let tenant = app.tenant().await;
    let mut held = Vec::new();
    for _ in 0..40 {
        held.push(TcpStream::connect(app.addr).await.expect("connect"));
    }
    // The held connections time out in turn and free their slots.
    let served = tokio::time::timeout(Duration::from_secs(5), app.get(&tenant, "/v1/agents"))
        .await
        .expect("served once slots free up");
    served.expect(200);
}
