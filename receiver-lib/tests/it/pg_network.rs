//! The PostgreSQL stores on a network that stalls, through `svc_test_support::proxy`: a
//! statement left unanswered fails within the database's answer timeout instead of holding its
//! caller (and its place in the pool) forever, and once the network is back the next calls
//! get fresh connections rather than the dead ones; and a database that answers but takes no
//! write fails the inbox's readiness probe. Skipped loudly without `SVC_TEST_POSTGRES_URL`.

use std::time::{Duration, Instant};

use svc_receiver::inbox::{Accepted, Inbox, InboxAdmin, InboxPolicy};
use svc_receiver::postgres::{PgDatabase, PgInbox};
use svc_test_support::proxy::{Fault, Proxy};

use crate::helpers::{T, event_body, webhook_id as id};

/// Runs `call`, failing the test if it takes longer than `within` (a hang).
async fn within<F: std::future::Future>(within: Duration, call: F) -> (F::Output, Duration) {
    let started = Instant::now();
    let output = tokio::time::timeout(within, call)
        .await
        .expect("answered in time instead of waiting forever");
    (output, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_connection_fails_within_the_answer_timeout_and_the_pool_recovers() {
    let Some(url) = svc_test_support::postgres::fresh_schema_url("pg_net_inbox").await else {
        return;
    };
    let proxy = Proxy::start(svc_test_support::postgres::upstream(&url))
        .await
        .expect("proxy");
    let proxied = svc_test_support::postgres::via_proxy(&url, proxy.addr());
    let database = PgDatabase::connect_with(&proxied, 4)
        .await
        .expect("connect and migrate")
        .with_answer_timeout(Duration::from_secs(1));
    assert_eq!(database.answer_timeout(), Duration::from_secs(1));
    let inbox = PgInbox::new(database, InboxPolicy::default());
    let accepted = inbox
        .accept(&id("wh_before"), &[1; 32], &event_body("c1"), T)
        .await
        .expect("accepted");
    assert_eq!(accepted, Accepted::Stored);

    proxy.set(Fault::StallAfter(0));
    let (checked, took) = within(Duration::from_secs(10), inbox.check_writable()).await;
    assert!(checked.is_err(), "not writable while nothing answers");
    assert!(took < Duration::from_secs(3), "{took:?}");
    // The idle connections were closed with the stalled one: this accept needs a new one,
    // which cannot be opened either (given up after the pool's 10 s to connect).
    let (accepted, _) = within(
        Duration::from_secs(20),
        inbox.accept(&id("wh_during"), &[2; 32], &event_body("c2"), T),
    )
    .await;
    accepted.expect_err("not acknowledged");

    proxy.set(Fault::Pass);
    let (checked, took) = within(Duration::from_secs(10), inbox.check_writable()).await;
    checked.expect("writable again at once");
    assert!(
        took < Duration::from_secs(1),
        "no dead connection waited on: {took:?}"
    );
    // The sender's retry: stored now, or found stored if the stalled commit went through.
    let (accepted, _) = within(
        Duration::from_secs(10),
        inbox.accept(&id("wh_during"), &[2; 32], &event_body("c2"), T),
    )
    .await;
    assert!(
        matches!(accepted, Ok(Accepted::Stored | Accepted::Duplicate)),
        "{accepted:?}"
    );
    let (counts, _) = within(Duration::from_secs(10), inbox.counts()).await;
    assert_eq!(counts.expect("counts"), (2, 0, 0), "each delivery once");
}

/// The inbox's readiness probe writes: on a database that answers but takes no write (here
/// its role switched to read-only transactions, as a standby after a failover), it fails,
/// and it passes again once writes are back, on fresh connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readiness_probe_fails_while_the_database_takes_no_write() {
    let Some(url) = svc_test_support::postgres::fresh_schema_url("pg_probe_read_only").await else {
        return;
    };
    let role = svc_test_support::postgres::TestRole::create(&url, "read_only").await;
    let database = PgDatabase::connect_with(&role.login_url(&url), 2)
        .await
        .expect("connect and migrate");
    let inbox = PgInbox::new(database, InboxPolicy::default());
    inbox.check_writable().await.expect("ready");

    let switch = |read_only: bool| {
        let role = &role;
        async move {
            let setting = if read_only {
                "SET default_transaction_read_only = on"
            } else {
                "RESET default_transaction_read_only"
            };
            role.admin()
                .batch_execute(&format!("ALTER ROLE {} {setting}", role.name()))
                .await
                .expect("alter the role");
            // The role's sessions start again with the setting.
            role.terminate().await;
        }
    };
    // Until the probe says `done`: the first may meet a connection just ended.
    let probe_until = |done: fn(&Result<(), svc_receiver::StoreError>) -> bool| {
        let inbox = &inbox;
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let probed = inbox.check_writable().await;
                if done(&probed) {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "the probe kept saying {probed:?}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    switch(true).await;
    probe_until(|probed| {
        probed
            .as_ref()
            .is_err_and(|refused| refused.to_string().contains("read-only"))
    })
    .await;
    switch(false).await;
    probe_until(Result::is_ok).await;

    // The role goes with what it made (the test schema's tables).
    drop(inbox);
    role.drop_role().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_started_while_the_database_cannot_be_had_waits_for_it_then_opens() {
    let Some(url) = svc_test_support::postgres::fresh_schema_url("pg_net_start").await else {
        return;
    };
    let proxy = Proxy::start(svc_test_support::postgres::upstream(&url))
        .await
        .expect("proxy");
    let proxied = svc_test_support::postgres::via_proxy(&url, proxy.addr());
    // The server restarting: every connection is reset as it is accepted.
    proxy.set(Fault::ResetOnAccept);
    let handle = proxy.handle();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        handle.set(Fault::Pass);
    });
    let (opened, took) = within(
        Duration::from_secs(30),
        PgDatabase::connect_with(&proxied, 2),
    )
    .await;
    opened.expect("opened once the database could be had");
    assert!(took >= Duration::from_millis(1400), "it waited: {took:?}");

    // What stays wrong is not waited for: a database that does not exist fails at once.
    let missing = proxied.replace("/svc_test", "/svc_no_such_database");
    if missing == proxied {
        return; // a server whose test database is named otherwise
    }
    let (opened, took) = within(
        Duration::from_secs(30),
        PgDatabase::connect_with(&missing, 2),
    )
    .await;
    let err = opened.expect_err("no such database").to_string();
    assert!(err.contains("3D000"), "{err}");
    assert!(took < Duration::from_secs(2), "not retried: {took:?}");
}
