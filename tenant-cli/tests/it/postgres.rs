//! `svc-cli` on a shared PostgreSQL store, run as real processes (each a "host"): three
//! `webhook serve` replicas drain one inbox with every delivery handled once; a replica killed
//! with SIGKILL mid-batch has its leased entries handled by another after the lease, none lost
//! and none twice; two `reconcile` runs started at once: one runs, the other exits 75. Each
//! test has a fresh schema of the server `SVC_TEST_POSTGRES_URL` names, and skips loudly
//! without one. A replica whose connections the server terminates reconnects and records
//! again, and its `/readyz` probes the store's own connection as well as the inbox's.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use svc_contract::{CallScored, CallSource, sign};
use svc_fixtures::calls::{Calls, ROLEPLAY};
use svc_test_support::webhook_serve;
use tokio::process::Child;
use wiremock::MockServer;

use crate::helpers::{Sandbox, WEBHOOK_SERVE};

pub(crate) const SECRET: &str = "whsec_pg_replica_secret_0123456789";

pub(crate) async fn fresh_store(test: &str) -> Option<String> {
    svc_test_support::postgres::fresh_schema_url(test).await
}

/// A client on the store's schema, to look at what the replicas wrote.
pub(crate) async fn database(url: &str) -> tokio_postgres::Client {
    svc_test_support::postgres::connect(url).await
}

/// A running `webhook serve` replica and its address.
pub(crate) struct Replica {
    pub(crate) child: Child,
    pub(crate) addr: String,
}

pub(crate) async fn replica(sandbox: &Sandbox, store: &str, extra: &[&str]) -> Replica {
    let args = [&WEBHOOK_SERVE[..], &["--store", store], extra].concat();
    let mut command = sandbox.command(&args);
    command
        .env("WH", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let started = webhook_serve::start(&mut command, Duration::from_secs(60)).await;
    for line in &started.early[..started.early.len() - 1] {
        eprintln!("replica: {line}");
    }
    Replica {
        addr: started.addr(),
        child: started.child,
    }
}

/// Posts the delivery of `call_id` under `wh_<call_id>`, signed now, to `addr`.
pub(crate) async fn post(client: &reqwest::Client, addr: &str, call_id: &str) -> u16 {
    let event = CallScored::scored(
        call_id,
        CallSource::Roleplay,
        "svc_agent_fx0001",
        "svc_agency_fx0001",
        "2026-03-01T10:05:00.000Z",
        "req_pg000001",
    );
    let body = serde_json::to_vec(&event).expect("body");
    let now = chrono::Utc::now().timestamp();
    client
        .post(format!("http://{addr}/webhooks"))
        .header("x-service-webhook-id", format!("wh_{call_id}"))
        .header("x-service-signature", sign(SECRET, now, &body))
        .body(body)
        .send()
        .await
        .expect("post")
        .status()
        .as_u16()
}

/// Waits until the inbox holds `total` entries, all done.
pub(crate) async fn wait_until_done(db: &tokio_postgres::Client, total: i64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let row = db
            .query_one(
                "SELECT COUNT(*), COUNT(*) FILTER (WHERE state = 'done') FROM webhook_inbox",
                &[],
            )
            .await
            .expect("count the inbox");
        let (all, done): (i64, i64) = (row.get(0), row.get(1));
        if all == total && done == total {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the inbox did not drain: {done} of {all} done, {total} expected"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Attempts per webhook id, as the inbox counted them.
async fn attempts(db: &tokio_postgres::Client) -> HashMap<String, i32> {
    db.query("SELECT id, attempts FROM webhook_inbox", &[])
        .await
        .expect("the inbox")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

pub(crate) async fn ledger_count(db: &tokio_postgres::Client) -> i64 {
    db.query_one("SELECT COUNT(*) FROM deliveries", &[])
        .await
        .expect("the ledger")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_receiver_processes_share_one_queue_and_handle_each_delivery_once() {
    let Some(store) = fresh_store("three_receiver_processes").await else {
        return;
    };
    let sandbox = Sandbox::new();
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(replica(&sandbox, &store, &[]).await);
    }
    let addrs: Vec<String> = replicas.iter().map(|r| r.addr.clone()).collect();
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let total = 300;
    // Every delivery to every replica at once, as a retry and a duplicate may land.
    let posts = (0..total).flat_map(|n| addrs.iter().map(move |addr| (n, addr.clone())));
    futures_util::stream::iter(posts)
        .for_each_concurrent(48, |(n, addr)| {
            let client = client.clone();
            async move {
                let status = post(&client, &addr, &format!("svc_call_pg{n:04}")).await;
                assert_eq!(status, 200, "delivery {n} to {addr}");
            }
        })
        .await;
    let db = database(&store).await;
    wait_until_done(&db, total, Duration::from_secs(60)).await;
    let attempts = attempts(&db).await;
    let twice: Vec<_> = attempts.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "handed out more than once: {twice:?}");
    assert_eq!(ledger_count(&db).await, total, "each recorded once");
    drop(replicas);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_mid_batch_has_its_entries_handled_by_another_after_the_lease() {
    let Some(store) = fresh_store("a_replica_killed_mid_batch").await else {
        return;
    };
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    // Each entry's handler reads the call's detail: slow enough that a replica has entries in
    // hand whenever it is killed.
    calls.delay_details(Some(Duration::from_millis(700)));
    let total = 60;
    let ids: Vec<String> = (0..total)
        .map(|n| {
            calls.add(
                ROLEPLAY,
                chrono::Utc::now() - chrono::Duration::minutes(n + 1),
            )
        })
        .collect();
    let sandbox = Sandbox::for_server(&server);
    let lease = ["--fetch", "--inbox-lease-secs", "3"];
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(replica(&sandbox, &store, &lease).await);
    }
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    for (n, id) in ids.iter().enumerate() {
        let addr = &replicas[n % 3].addr;
        assert_eq!(post(&client, addr, id).await, 200, "delivery of {id}");
    }
    // Mid-batch: every replica has entries in hand.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut killed = replicas.remove(0);
    killed.child.start_kill().expect("SIGKILL");
    killed.child.wait().await.expect("the killed replica exits");
    let db = database(&store).await;
    wait_until_done(&db, total, Duration::from_secs(90)).await;
    let attempts = attempts(&db).await;
    let retaken: Vec<_> = attempts.iter().filter(|(_, n)| **n == 2).collect();
    assert!(
        !retaken.is_empty(),
        "the killed replica's entries were handed out again: {attempts:?}"
    );
    assert!(
        attempts.values().all(|n| *n <= 2),
        "no entry handed out a third time: {attempts:?}"
    );
    // None lost: every delivery is recorded and its call stored; none twice: an entry handed
    // out once had its detail read once.
    assert_eq!(ledger_count(&db).await, total);
    let stored: i64 = db
        .query_one("SELECT COUNT(*) FROM calls", &[])
        .await
        .expect("calls")
        .get(0);
    assert_eq!(stored, total);
    for id in &ids {
        let reads = calls.requests(&format!("/v1/calls/{id}"));
        let handed_out = attempts[&format!("wh_{id}")];
        assert!(
            reads <= handed_out as usize && reads >= 1,
            "call {id}: {reads} detail reads for {handed_out} hand-outs"
        );
    }
    drop(replicas);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_reconcile_runs_on_two_hosts_at_once_one_runs_and_the_other_exits_75() {
    let Some(store) = fresh_store("two_reconcile_runs").await else {
        return;
    };
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    calls.add_many(
        ROLEPLAY,
        (1..=150).map(|n| chrono::Utc::now() - chrono::Duration::seconds(30 * n)),
    );
    // The second page comes only after 3 s, so the first run still holds the lock when the
    // second asks for it.
    calls.delay_list_after(1, Some(Duration::from_secs(3)));
    let (one, two) = (Sandbox::for_server(&server), Sandbox::for_server(&server));
    let args = [
        "reconcile",
        "--store",
        &store,
        "--source",
        "roleplay",
        "--json",
        "--retry-base-ms",
        "1",
    ];
    let (first, second) = tokio::join!(one.run(&args), two.run(&args));
    let mut codes = [first.code, second.code];
    codes.sort_unstable();
    assert_eq!(codes, [0, 75], "{first:?}\n{second:?}");
    let refused = if first.code == 75 { &first } else { &second };
    assert!(
        refused.stderr.contains("holds the lock"),
        "{}",
        refused.stderr
    );
    let db = database(&store).await;
    let stored: i64 = db
        .query_one("SELECT COUNT(*) FROM calls", &[])
        .await
        .expect("calls")
        .get(0);
    assert_eq!(stored, 150, "the run that ran stored every call");
    let runs: i64 = db
        .query_one("SELECT COUNT(*) FROM runs", &[])
        .await
        .expect("runs")
        .get(0);
    assert_eq!(runs, 1, "only one run wrote");
}

pub(crate) async fn readyz(client: &reqwest::Client, addr: &str) -> (u16, String) {
    let response = client
        .get(format!("http://{addr}/readyz"))
        .send()
        .await
        .expect("GET /readyz");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// Waits until `/readyz` answers `status`; returns how long that took.
pub(crate) async fn wait_ready(
    client: &reqwest::Client,
    addr: &str,
    status: u16,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let (now, body) = readyz(client, addr).await;
        if now == status {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "/readyz still answers {now} ({body}) after {within:?}, not {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_records_again_after_the_server_terminates_its_connections() {
    let Some(store) = fresh_store("records_after_terminate").await else {
        return;
    };
    // A login role of the replica's own, so that the test ends its connections and no other
    // test's.
    let role = svc_test_support::postgres::TestRole::create(&store, "terminated").await;
    let replica_store = role.login_url(&store);
    let sandbox = Sandbox::new();
    let replica = replica(&sandbox, &replica_store, &[]).await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let db = database(&store).await;
    assert_eq!(post(&client, &replica.addr, "svc_call_before").await, 200);
    wait_until_done(&db, 1, Duration::from_secs(30)).await;
    assert!(
        role.terminate().await >= 1,
        "the replica's connections were ended"
    );
    // The pool the store and the inbox share finds its connections closed at the next use. It
    // may hand out a connection it has not yet seen closed: that delivery gets a 503, and the
    // sender's retry is accepted.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = post(&client, &replica.addr, "svc_call_after").await;
        if status == 200 {
            break;
        }
        assert!(
            status == 503 && Instant::now() < deadline,
            "the delivery after the restart: {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_until_done(&db, 2, Duration::from_secs(30)).await;
    assert_eq!(
        ledger_count(&db).await,
        2,
        "the delivery after the restart is recorded"
    );
    assert_eq!(readyz(&client, &replica.addr).await.0, 200);
    drop(replica);
    // The role goes with what it made (the test schema's tables).
    role.drop_role().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readyz_answers_503_while_the_stores_own_connection_cannot_write() {
    let Some(store) = fresh_store("readyz_probes_the_store").await else {
        return;
    };
    let sandbox = Sandbox::new();
    let replica = replica(&sandbox, &store, &[]).await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    assert_eq!(
        readyz(&client, &replica.addr).await,
        (200, "ready\n".into())
    );
    // Hold the store's write lock (what recording a delivery takes, and not the inbox): the
    // inbox still takes writes, the ledger does not.
    let mut holder = database(&store).await;
    let tx = holder.transaction().await.expect("begin");
    tx.execute(
        "SELECT pg_advisory_xact_lock(1937138433, hashtext(current_schema()))",
        &[],
    )
    .await
    .expect("take the store's write lock");
    let (status, body) = readyz(&client, &replica.addr).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("not ready"), "{body}");
    tx.rollback().await.expect("let the lock go");
    // Ready again once the lock is free.
    wait_ready(&client, &replica.addr, 200, Duration::from_secs(30)).await;
    drop(replica);
}

#[tokio::test]
async fn a_database_url_is_never_shown_with_its_password_and_tls_is_refused_plainly() {
    let sandbox = Sandbox::new();
    let unreachable = "postgres://svc:hunter2@%2Fnonexistent%2Fsocket/calls";
    let run = sandbox
        .run(&["store", "stats", "--store", unreachable])
        .await;
    assert_eq!(
        run.code, 75,
        "an unreachable database is a temporary failure: {run:?}"
    );
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    assert!(run.stderr.contains("svc:***@"), "{}", run.stderr);
    // A raw `/`, `?` or `@` in the password, and the query forms, are hidden too.
    for (url, secret) in [
        (
            "postgres://svc:hun/ter2@%2Fnonexistent%2Fsocket/calls",
            "ter2",
        ),
        (
            "postgres://svc:hun?ter2@%2Fnonexistent%2Fsocket/calls",
            "ter2",
        ),
        (
            "postgres://svc:hun@ter2@%2Fnonexistent%2Fsocket/calls",
            "ter2",
        ),
        (
            "postgres://svc@%2Fnonexistent%2Fsocket/calls?password=hunter2",
            "hunter2",
        ),
        (
            "postgres://svc@%2Fnonexistent%2Fsocket/calls?pass%77ord=hunter2",
            "hunter2",
        ),
    ] {
        let run = sandbox.run(&["store", "stats", "--store", url]).await;
        assert_eq!(run.code, 75, "{url}: {run:?}");
        assert!(!run.stderr.contains(secret), "{url}: {}", run.stderr);
        assert!(run.stderr.contains("***"), "{url}: {}", run.stderr);
    }
    let tls = "postgres://svc:hunter2@db.invalid/calls?sslmode=require";
    let run = sandbox.run(&["store", "stats", "--store", tls]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("TLS"), "{}", run.stderr);
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
}

/// A store URL asking for TLS is named as the store's, on every command that opens a store
/// (issue "Every command in the docs works as pasted": `reconcile --store
/// 'postgres://…?sslmode=require'` said "webhook store configuration").
#[tokio::test]
async fn a_store_url_asking_for_tls_is_labelled_as_the_stores_configuration() {
    let sandbox = Sandbox::new()
        .env("SVC_BASE_URL", "http://127.0.0.1:9/v1")
        .env("SVC_API_KEY", "svc_live_unused");
    let tls = "postgres://svc:hunter2@db.invalid/calls?sslmode=require";
    for args in [
        &["reconcile", "--store", tls][..],
        &["reconcile", "--dry-run", "--store", tls],
        &["store", "stats", "--store", tls],
        &["inbox", "dead-letters", "--store", tls],
    ] {
        let run = sandbox.run(args).await;
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(
            run.stderr
                .contains("store configuration: postgres://svc:***@db.invalid"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(run.stderr.contains("sslmode=require"), "{}", run.stderr);
        assert!(!run.stderr.contains("webhook store"), "{}", run.stderr);
        assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    }
}

#[tokio::test]
async fn help_never_shows_the_store_url_of_the_environment() {
    let sandbox = Sandbox::new().env("SVC_STORE", "postgres://svc:hunter2@db.example/calls");
    for command in [
        &["store", "stats", "--help"][..],
        &["store", "export", "--help"],
        &["store", "report", "--help"],
        &["reconcile", "--help"],
        &["webhook", "serve", "--help"],
        &["inbox", "dead-letters", "--help"],
    ] {
        let run = sandbox.run(command).await;
        assert_eq!(run.code, 0, "{command:?}: {run:?}");
        assert!(
            run.stdout.contains("SVC_STORE"),
            "{command:?}: {}",
            run.stdout
        );
        assert!(
            !run.stdout.contains("hunter2") && !run.stdout.contains("db.example"),
            "{command:?}: {}",
            run.stdout
        );
    }
}

#[tokio::test]
async fn a_store_database_that_refuses_the_credentials_is_a_temporary_failure() {
    let Some(store) = fresh_store("refuses_the_credentials").await else {
        return;
    };
    let refused = format!("{store}&user=svc_no_such_role&password=hunter2");
    let run = Sandbox::new()
        .run(&["store", "stats", "--store", &refused])
        .await;
    assert_eq!(run.code, 75, "{run:?}");
    assert!(run.stderr.contains("svc_no_such_role"), "{}", run.stderr);
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
}

#[tokio::test]
async fn a_store_database_that_cannot_be_reached_stops_reconcile_with_75() {
    let server = MockServer::start().await;
    let _calls = Calls::mount(&server).await;
    let sandbox = Sandbox::for_server(&server);
    let run = sandbox
        .run(&[
            "reconcile",
            "--store",
            "postgres://svc:hunter2@%2Fnonexistent%2Fsocket/calls",
        ])
        .await;
    assert_eq!(run.code, 75, "{run:?}");
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
}
