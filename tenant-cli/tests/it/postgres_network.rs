//! `svc-cli webhook serve` on a PostgreSQL store reached through a slow or lossy network:
//! `svc_test_support::proxy` sits between the receiver (a real process) and the test server, and
//! adds latency, resets connections mid-transaction, or stalls them. Whatever it does, no delivery
//! answered 200 is lost, none is recorded twice, `/readyz` answers 503 while the database cannot
//! take a write and 200 once it can, and the receiver recovers without a restart. Each replica runs
//! with `--db-timeout 2`, so that a statement left unanswered is given up on within seconds. Skips
//! loudly without `SVC_TEST_POSTGRES_URL`.

use std::time::{Duration, Instant};

use svc_test_support::proxy::{Fault, Proxy};

use crate::helpers::Sandbox;
use crate::postgres::{
    Replica, database, fresh_store, ledger_count, post, readyz, replica, wait_ready,
    wait_until_done,
};

/// A fresh store, a proxy in front of its server, and a replica whose store is reached
/// through the proxy (`None`: no test server).
async fn through_proxy(test: &str, extra: &[&str]) -> Option<(String, Proxy, Replica, Sandbox)> {
    let store = fresh_store(test).await?;
    let proxy = Proxy::start(svc_test_support::postgres::upstream(&store))
        .await
        .expect("proxy");
    let proxied = svc_test_support::postgres::via_proxy(&store, proxy.addr());
    let sandbox = Sandbox::new();
    let mut args = vec!["--db-timeout", "2"];
    args.extend_from_slice(extra);
    let replica = replica(&sandbox, &proxied, &args).await;
    Some((store, proxy, replica, sandbox))
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Posts the delivery of `call_id` again and again, as the service's retries would, until it
/// is answered 200; fails the test after `within`. Returns the statuses seen before.
async fn deliver(
    client: &reqwest::Client,
    addr: &str,
    call_id: &str,
    within: Duration,
) -> Vec<u16> {
    let deadline = Instant::now() + within;
    let mut refused = Vec::new();
    loop {
        let status = post(client, addr, call_id).await;
        if status == 200 {
            return refused;
        }
        assert!(
            matches!(status, 503 | 408),
            "a delivery is answered 200, or 503/408 for the sender to retry: {status}"
        );
        refused.push(status);
        assert!(
            Instant::now() < deadline,
            "{call_id} was never accepted: {refused:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Asserts that the ledger and the inbox hold each of `total` deliveries once, all done.
async fn assert_each_recorded_once(store: &str, total: i64) {
    let db = database(store).await;
    wait_until_done(&db, total, Duration::from_secs(30)).await;
    assert_eq!(
        ledger_count(&db).await,
        total,
        "one ledger row per delivery"
    );
    let doubles: i64 = db
        .query_one(
            "SELECT COUNT(*) FROM (SELECT call_id FROM deliveries GROUP BY call_id
             HAVING COUNT(*) > 1) d",
            &[],
        )
        .await
        .expect("count doubles")
        .get(0);
    assert_eq!(doubles, 0, "no call recorded twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_database_turns_readyz_503_and_both_recover_without_a_restart() {
    let Some((store, proxy, replica, _sandbox)) = through_proxy("pg_net_stall", &[]).await else {
        return;
    };
    let client = http();
    for i in 0..3 {
        deliver(
            &client,
            &replica.addr,
            &format!("svc_call_before_{i}"),
            Duration::from_secs(10),
        )
        .await;
    }
    wait_ready(&client, &replica.addr, 200, Duration::from_secs(10)).await;
    wait_until_done(&database(&store).await, 3, Duration::from_secs(30)).await;

    // Every connection, open or new, stops getting answers; the statements still reach the
    // server.
    proxy.set(Fault::StallAfter(0));
    wait_ready(&client, &replica.addr, 503, Duration::from_secs(10)).await;
    let status = post(&client, &replica.addr, "svc_call_during").await;
    assert_ne!(
        status, 200,
        "not acknowledged while the database cannot answer"
    );

    proxy.set(Fault::Pass);
    let took = wait_ready(&client, &replica.addr, 200, Duration::from_secs(20)).await;
    assert!(proxy.stats().stalled >= 1, "{:?}", proxy.stats());
    // The sender retries the delivery it could not make, and new ones arrive.
    deliver(
        &client,
        &replica.addr,
        "svc_call_during",
        Duration::from_secs(20),
    )
    .await;
    deliver(
        &client,
        &replica.addr,
        "svc_call_after",
        Duration::from_secs(20),
    )
    .await;
    assert_each_recorded_once(&store, 5).await;
    assert_eq!(
        readyz(&client, &replica.addr).await.0,
        200,
        "ready again after {took:?}"
    );
    drop(replica);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_reset_mid_transaction_lose_and_double_no_delivery() {
    // A worker whose claim of an entry was committed but whose answer was reset holds the
    // entry until its lease runs out (the answer never came, so it cannot know); then any
    // worker takes it again. A short lease keeps that within the test's time.
    let lease = ["--inbox-lease-secs", "3"];
    let Some((store, proxy, replica, _sandbox)) = through_proxy("pg_net_reset", &lease).await
    else {
        return;
    };
    let client = http();
    deliver(
        &client,
        &replica.addr,
        "svc_call_first",
        Duration::from_secs(10),
    )
    .await;
    // Resets after a few bytes of the server's answers: inside the transactions that accept
    // and record deliveries, and inside new connections' start-up; on and off while the
    // deliveries arrive.
    let handle = proxy.handle();
    let flapping = tokio::spawn(async move {
        for round in 0..8 {
            handle.set(Fault::ResetAfter(40 + 30 * (round % 3)));
            tokio::time::sleep(Duration::from_millis(300)).await;
            handle.set(Fault::Pass);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let deliveries = (0..8).map(|i| {
        let (client, addr) = (client.clone(), replica.addr.clone());
        async move {
            deliver(
                &client,
                &addr,
                &format!("svc_call_reset_{i}"),
                Duration::from_secs(40),
            )
            .await
        }
    });
    futures_util::future::join_all(deliveries).await;
    flapping.await.expect("the fault task");
    proxy.set(Fault::Pass);
    assert!(proxy.stats().reset >= 1, "{:?}", proxy.stats());
    assert_each_recorded_once(&store, 9).await;
    wait_ready(&client, &replica.addr, 200, Duration::from_secs(20)).await;
    drop(replica);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn latency_to_the_database_slows_deliveries_down_and_loses_none() {
    let Some((store, proxy, replica, _sandbox)) = through_proxy("pg_net_latency", &[]).await else {
        return;
    };
    let client = http();
    proxy.set(Fault::Latency(Duration::from_millis(50)));
    for i in 0..4 {
        deliver(
            &client,
            &replica.addr,
            &format!("svc_call_slow_{i}"),
            Duration::from_secs(20),
        )
        .await;
    }
    assert_each_recorded_once(&store, 4).await;
    wait_ready(&client, &replica.addr, 200, Duration::from_secs(10)).await;
    drop(replica);
}

/// Whether a reconcile run holds the run lock of the store `db` is on (the session advisory
/// lock of class `0x73766303`, keyed by the store's schema).
async fn run_lock_held(db: &tokio_postgres::Client) -> bool {
    db.query_one(
        "SELECT COUNT(*) FROM pg_locks
         WHERE locktype = 'advisory' AND granted AND classid::bigint = 1937138435
           AND objid::bigint = (hashtext(current_schema())::bigint & 4294967295)",
        &[],
    )
    .await
    .expect("pg_locks")
    .get::<_, i64>(0)
        > 0
}

/// `reconcile --db-timeout`: a run whose store database stops answering mid-run (the run lock
/// taken, the listing in flight) gives up within the timeout, exits 75 (try again later) and
/// says why, instead of waiting a minute (the default) or forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reconcile_on_a_database_that_stops_answering_exits_75_within_its_db_timeout() {
    let Some(store) = fresh_store("pg_net_reconcile_stall").await else {
        return;
    };
    let proxy = Proxy::start(svc_test_support::postgres::upstream(&store))
        .await
        .expect("proxy");
    let proxied = svc_test_support::postgres::via_proxy(&store, proxy.addr());
    let server = wiremock::MockServer::start().await;
    let calls = svc_fixtures::calls::Calls::mount(&server).await;
    calls.add_many(
        svc_fixtures::calls::ROLEPLAY,
        (1..=5).map(|n| chrono::Utc::now() - chrono::Duration::seconds(30 * n)),
    );
    // The listing answers late, so the database stalls while the run waits for it.
    calls.delay_list_after(0, Some(Duration::from_secs(4)));
    let sandbox = Sandbox::for_server(&server);
    let started = Instant::now();
    let args = [
        "reconcile",
        "--store",
        &proxied,
        "--source",
        "roleplay",
        "--db-timeout",
        "2",
    ];
    let run = sandbox.run(&args);
    let stall = async {
        let db = database(&store).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !run_lock_held(&db).await {
            assert!(Instant::now() < deadline, "the run never took its lock");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        proxy.set(Fault::StallAfter(0));
    };
    let (run, ()) = tokio::join!(run, stall);
    let took = started.elapsed();
    assert_eq!(run.code, 75, "{run:?}");
    assert!(run.stderr.contains("no answer within 2s"), "{}", run.stderr);
    assert!(
        took < Duration::from_secs(30),
        "gave up within the timeout, not the default minute: {took:?}"
    );
    assert!(proxy.stats().stalled >= 1, "{:?}", proxy.stats());
}
