//! `svc-cli reconcile` on a slow or lossy network: the real binary against the
//! sandbox service (in-process, with scored calls stored in its database), through
//! `svc_test_support::proxy`. Each run has a one-second `--timeout`, one retry and a one-second
//! `--max-retry-after`, so its request bound (`requestBoundMs`) is 1 s × 2 + 1 s = 3 s: a run
//! either completes or stops with 75 within it, and the next run (its lock free) stores
//! everything once the network heals.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use svc_cli::sandbox::{Sandbox as Service, SandboxOptions};
use svc_client::{AgencyRef, RegisterAgent, UpsertAgency};
use svc_service::db::ScoredCall;
use svc_service::faults::Faults;
use svc_test_support::proxy::{Fault, Proxy};

use super::{reconcile_args, stored_details, watermark};
use crate::helpers::{Run, Sandbox};

/// Calls the service holds.
const CALLS: usize = 6;
/// The flags every run here has.
const FLAGS: [&str; 6] = ["--timeout", "1", "--retries", "1", "--max-retry-after", "1"];
/// Their request bound: two attempts of 1 s and one wait of at most 1 s.
const BOUND: Duration = Duration::from_secs(3);
/// What starting a process and writing its report may add to a run's time.
const SLACK: Duration = Duration::from_secs(2);

/// The sandbox service with scored practice calls, a proxy in front of it, and a test dir
/// whose runs go through the proxy.
struct Net {
    service: Service,
    proxy: Proxy,
    dir: Sandbox,
    store: PathBuf,
    call_ids: Vec<String>,
}

async fn net(faults: Option<&str>) -> Net {
    let dir = Sandbox::new();
    let mut options = SandboxOptions::new(dir.path("service.db"));
    options.listen = "127.0.0.1:0".parse().expect("address");
    options.faults = faults.map(|spec| Faults::parse_spec(spec).expect("a fault spec"));
    let service = Service::start(options).await.expect("the sandbox service");
    let client = service.client().expect("client");
    client
        .upsert_agency(&UpsertAgency {
            platform_agency_id: "agency-1".into(),
            name: "First Agency".into(),
        })
        .await
        .expect("agency");
    let agent = client
        .register_agent(&RegisterAgent {
            first_name: Some("Sam".into()),
            last_name: Some("Rivera".into()),
            email: Some("sam@example.com".into()),
            npn: None,
            platform_agent_id: Some("rep-1".into()),
            agency: AgencyRef::Platform("agency-1".into()),
        })
        .await
        .expect("agent")
        .agent;
    let now_ms = chrono::Utc::now().timestamp_millis();
    let calls: Vec<ScoredCall> = (0..CALLS)
        .map(|i| ScoredCall {
            id: svc_service::ids::call_id(),
            tenant_id: service.credentials.tenant_id.clone(),
            source: "roleplay".into(),
            agent_id: agent.id.as_str().to_owned(),
            agency_id: agent.agency_id.as_str().to_owned(),
            platform_agent_id: agent.platform_agent_id.clone(),
            platform_agency_id: Some("agency-1".into()),
            drill_key: Some("ma-full-sale".into()),
            started_at: now_ms - 3_600_000 - i as i64 * 60_000,
            duration_sec: 600,
            transcript: json!([
                {"role": "agent", "content": "Thanks for calling, this is Sam.",
                 "startTime": 0.0, "endTime": 2.4},
                {"role": "customer", "content": "Hi, I got a letter about my plan.",
                 "startTime": 2.9, "endTime": 5.1},
            ])
            .to_string(),
            score: json!({
                "overallScore": 70 + i,
                "summary": "A practice call.",
                "feedback": "Summarise the benefits before the close.",
            })
            .to_string(),
        })
        .collect();
    let call_ids = calls.iter().map(|c| c.id.clone()).collect();
    // No endpoint creates scored calls: they go into the service's database directly.
    svc_service::db::Db::open(dir.path("service.db"))
        .await
        .expect("the service's database")
        .insert_scored_calls(calls)
        .await
        .expect("scored calls");
    let addr: SocketAddr = service
        .base_url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .expect("the service's address");
    let proxy = Proxy::start(addr).await.expect("proxy");
    let dir = dir
        .env("SVC_BASE_URL", &format!("http://{}/v1", proxy.addr()))
        .env("SVC_API_KEY", &service.credentials.api_key);
    let store = dir.path("calls.db");
    Net {
        service,
        proxy,
        dir,
        store,
        call_ids,
    }
}

impl Net {
    /// The arguments of a run through the proxy with [`FLAGS`] and `extra`.
    fn args(&self, extra: &[&'static str]) -> Vec<String> {
        let mut flags: Vec<&str> = FLAGS.to_vec();
        flags.extend_from_slice(extra);
        reconcile_args(&self.store, &flags)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// One run through the proxy, and how long it took.
    async fn reconcile(&self, extra: &[&'static str]) -> (Run, Duration) {
        let args = self.args(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = Instant::now();
        let run = self.dir.run(&args).await;
        (run, started.elapsed())
    }

    /// Asserts that the store holds every call the service holds.
    fn assert_all_stored(&self) {
        let stored = stored_details(&self.store);
        for id in &self.call_ids {
            assert!(stored.contains_key(id), "call {id} is stored: {stored:?}");
        }
        assert_eq!(stored.len(), CALLS);
    }

    /// Heals the network and checks a run then stores everything.
    async fn heal_and_check(&self) {
        self.proxy.set(Fault::Pass);
        let (run, _) = self.reconcile(&[]).await;
        assert_eq!(run.code, 0, "{run:?}");
        self.assert_all_stored();
    }
}

/// Asserts that `run` stopped with 75 within the bound, naming `cause`.
fn assert_stopped_within_bound(run: &Run, took: Duration, cause: &str) {
    assert_eq!(run.code, 75, "{run:?}");
    assert!(took < BOUND + SLACK, "stopped within the bound: {took:?}");
    let report = run.json();
    assert_eq!(report["requestBoundMs"], json!(3000), "{report}");
    assert_eq!(report["outcome"], json!("failed"), "{report}");
    let error = report["error"].as_str().unwrap_or_default();
    assert!(error.contains(cause), "stopped for {cause}: {report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_network_only_slows_a_run_and_one_slower_than_the_timeout_stops_it_with_75() {
    let net = net(None).await;
    net.proxy.set(Fault::Latency(Duration::from_millis(100)));
    let (run, took) = net.reconcile(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(took >= Duration::from_millis(200), "slowed down: {took:?}");
    net.assert_all_stored();

    let fresh = net.store.with_file_name("fresh.db");
    net.proxy.set(Fault::Latency(Duration::from_millis(1500)));
    let args = reconcile_args(&fresh, &FLAGS);
    let started = Instant::now();
    let run = net.dir.run(&args).await;
    assert_stopped_within_bound(&run, started.elapsed(), "did not answer within 1s");
    assert_eq!(
        watermark(&fresh, "roleplay"),
        None,
        "the watermark did not move"
    );
    drop(net.service);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_stalled_mid_way_is_cut_by_the_timeout_and_the_run_stops_with_75_within_its_bound() {
    let net = net(None).await;
    // The headers and the start of the first page's body, then silence on an open connection.
    net.proxy.set(Fault::StallAfter(400));
    let (run, took) = net.reconcile(&[]).await;
    assert_stopped_within_bound(&run, took, "did not answer within 1s");
    assert!(net.proxy.stats().stalled >= 2, "each attempt stalled");
    assert!(stored_details(&net.store).is_empty());
    assert_eq!(watermark(&net.store, "roleplay"), None);
    net.heal_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_reset_at_accept_or_mid_response_stop_the_run_with_75_and_lose_nothing() {
    let net = net(None).await;
    for fault in [Fault::ResetOnAccept, Fault::ResetAfter(300)] {
        net.proxy.set(fault);
        let (run, took) = net.reconcile(&[]).await;
        assert_stopped_within_bound(&run, took, "");
        assert_eq!(watermark(&net.store, "roleplay"), None, "{fault:?}");
    }
    assert!(net.proxy.stats().reset >= 4, "{:?}", net.proxy.stats());
    net.heal_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_through_a_slow_network_wait_for_retry_after_and_a_longer_one_than_allowed_stops_the_run()
 {
    // The sandbox answers a share of API requests 429 with `Retry-After: 1`.
    let net = net(Some("api-429=0.4,seed=11")).await;
    net.proxy.set(Fault::Latency(Duration::from_millis(20)));
    let args = reconcile_args(
        &net.store,
        &[
            "--timeout",
            "2",
            "--retries",
            "6",
            "--max-retry-after",
            "2",
            // One request at a time, so that the waits add up.
            "--concurrency",
            "1",
        ],
    );
    let mut command = net.dir.command(&args);
    command.env("RUST_LOG", "svc_client=debug");
    let started = Instant::now();
    let output = command.output().await.expect("run");
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let waits = stderr.matches("wait=1s").count();
    assert!(
        waits >= 1,
        "a 429 was retried after its Retry-After: {stderr}"
    );
    assert!(
        took >= Duration::from_secs(waits as u64),
        "each Retry-After was waited out: {waits} in {took:?}"
    );
    net.assert_all_stored();

    // Allowed no wait at all, the first 429 stops the run at once.
    let fresh = net.store.with_file_name("fresh.db");
    let args = reconcile_args(
        &fresh,
        &["--timeout", "1", "--retries", "6", "--max-retry-after", "0"],
    );
    let started = Instant::now();
    let run = net.dir.run(&args).await;
    assert_eq!(run.code, 75, "{run:?}");
    assert!(
        started.elapsed() < SLACK,
        "not waited: {:?}",
        started.elapsed()
    );
    assert!(run.stderr.contains("RATE_LIMITED"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_lock_is_never_held_past_the_bound_and_one_timeout_on_a_black_holed_network() {
    let net = net(None).await;
    net.proxy.set(Fault::BlackHole);
    let args = net.args(&[]);
    let mut first = net
        .dir
        .command(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the first run");
    let started = Instant::now();
    // The service itself, not through the proxy: only the lock can stop these runs.
    let direct_args = reconcile_args(&net.store, &FLAGS);
    let direct_run = || {
        let mut command = net.dir.command(&direct_args);
        command.env("SVC_BASE_URL", &net.service.base_url);
        command
    };
    // While the first run waits on the black hole, it holds the lock.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let early = direct_run().output().await.expect("an early run");
    assert_eq!(
        early.status.code(),
        Some(75),
        "the lock is held meanwhile: {}",
        String::from_utf8_lossy(&early.stderr)
    );
    assert!(String::from_utf8_lossy(&early.stderr).contains("lock"));
    // Right after the bound and one request timeout, it is free.
    tokio::time::sleep((BOUND + Duration::from_secs(1)).saturating_sub(started.elapsed())).await;
    let later = direct_run().output().await.expect("a later run");
    assert_eq!(
        later.status.code(),
        Some(0),
        "the lock was free: {}",
        String::from_utf8_lossy(&later.stderr)
    );
    net.assert_all_stored();
    let status = tokio::time::timeout(Duration::from_secs(5), first.wait())
        .await
        .expect("the first run has ended")
        .expect("wait");
    assert_eq!(status.code(), Some(75));
    assert!(net.proxy.stats().black_holed >= 2);
}
