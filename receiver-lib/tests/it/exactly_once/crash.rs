//! Real receiver processes (this test binary run again, see [`child_receiver`]) killed with
//! SIGKILL after the tenant's write but before its commit, and after the commit but before the
//! answer (inbox mode: before the worker's settlement): after a restart and the sender's retry,
//! the effect is there exactly once. And 8 concurrent deliveries of one id across 3 processes
//! make one effect, in either mode.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use axum::Router;
use svc_receiver::axum::{InboxReceiver, WebhookReceiver, inbox_route, webhook_route};
use svc_receiver::dedup::{DedupPolicy, DedupStore};
use svc_receiver::inbox::Inbox;
use svc_receiver::inbox::run_inbox_workers_until_drained;
use svc_receiver::{EventHandler, Received};
use svc_server::Server;

use super::{SqliteTenant, delivery, quick_policy};
use crate::helpers::{client, verifier};

/// Where a child receiver stops for good (and waits to be killed), printing `PAUSED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pause {
    Never,
    /// In the tenant's transaction, after its write, before its commit.
    BeforeCommit,
    /// After the commit: before the answer (direct mode), before the settlement (inbox mode).
    AfterCommit,
}

impl Pause {
    fn as_str(self) -> &'static str {
        match self {
            Self::Never => "never",
            Self::BeforeCommit => "before_commit",
            Self::AfterCommit => "after_commit",
        }
    }

    fn from_env() -> Self {
        match std::env::var("SVC_EO_CHILD_PAUSE").as_deref() {
            Ok("before_commit") => Self::BeforeCommit,
            Ok("after_commit") => Self::AfterCommit,
            _ => Self::Never,
        }
    }
}

/// Prints `PAUSED` and blocks the calling thread until the process is killed.
fn pause_forever() -> ! {
    println!("SVC_EO PAUSED");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Blocks the task's thread for good (see [`pause_forever`]) when `at` is where to stop.
async fn pause_at(pause: Pause, at: Pause) {
    if pause == at {
        tokio::task::spawn_blocking(|| pause_forever())
            .await
            .expect("paused");
    }
}

/// The in-flight lease of the children's dedup stores: a killed child's claim runs out before
/// the test's retry (as the real one's 60 s do before the sender's 5 minutes).
const CHILD_LEASE: Duration = Duration::from_secs(1);

/// A receiver in a child process.
struct ChildReceiver {
    process: std::process::Child,
    port: u16,
    lines: mpsc::Receiver<String>,
}

impl ChildReceiver {
    /// Starts one: `driver` is `sqlite`, `postgres` or `sqlx`, `target` the directory or URL,
    /// `mode` `direct` or `inbox`.
    fn start(driver: &str, target: &str, schema: &str, mode: &str, pause: Pause) -> Self {
        let exe = std::env::current_exe().expect("test binary");
        let mut process = Command::new(exe)
            .args([
                "--exact",
                "exactly_once::crash::child_receiver",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SVC_EO_CHILD", "1")
            .env("SVC_EO_CHILD_DRIVER", driver)
            .env("SVC_EO_CHILD_TARGET", target)
            .env("SVC_EO_CHILD_SCHEMA", schema)
            .env("SVC_EO_CHILD_MODE", mode)
            .env("SVC_EO_CHILD_PAUSE", pause.as_str())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the child receiver");
        let stdout = process.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The test harness may print its "test … ... " before it on the same line.
                if let Some((_, ours)) = line.split_once("SVC_EO ") {
                    let _ = send.send(ours.to_owned());
                }
            }
        });
        let mut child = Self {
            process,
            port: 0,
            lines,
        };
        let line = child.expect_line("LISTENING");
        child.port = line
            .trim_start_matches("LISTENING ")
            .parse()
            .expect("a port");
        child
    }

    /// Waits (at most 60 s) for the child's next line, which must start with `what`.
    fn expect_line(&mut self, what: &str) -> String {
        match self.lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.starts_with(what) => line,
            other => {
                let _ = self.process.kill();
                panic!("expected {what} from the child receiver, got {other:?}")
            }
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    /// SIGKILL, and reaps it.
    fn kill(mut self) {
        self.process.kill().expect("SIGKILL");
        self.process.wait().expect("reap");
    }
}

impl Drop for ChildReceiver {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Not a test: the receiver the crash tests start as a child process (it returns at once
/// unless `SVC_EO_CHILD` is set). It serves direct mode or inbox mode with the tenant's
/// handler on 127.0.0.1, prints `SVC_EO LISTENING <port>`, and stops for good at
/// `SVC_EO_CHILD_PAUSE`.
#[test]
#[ignore = "run by the crash tests as a child process"]
fn child_receiver() {
    if std::env::var_os("SVC_EO_CHILD").is_none() {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(child_main());
}

async fn child_main() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let (driver, target, mode, schema) = (
        var("SVC_EO_CHILD_DRIVER"),
        var("SVC_EO_CHILD_TARGET"),
        var("SVC_EO_CHILD_MODE"),
        var("SVC_EO_CHILD_SCHEMA"),
    );
    let pause = Pause::from_env();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let dedup_policy = DedupPolicy {
        in_flight_lease: CHILD_LEASE,
        ..DedupPolicy::default()
    };
    let dir = std::path::Path::new(&target);
    match driver.as_str() {
        "sqlite" => {
            let tenant = SqliteTenant::open(&dir.join("app.db"));
            let handler = move |received: Received| {
                let tenant = tenant.clone();
                async move {
                    tokio::task::spawn_blocking(move || {
                        tenant.write_pausing(&received, || {
                            if pause == Pause::BeforeCommit {
                                pause_forever();
                            }
                        })
                    })
                    .await
                    .map_err(|e| e.to_string())??;
                    pause_at(pause, Pause::AfterCommit).await;
                    Ok::<(), String>(())
                }
            };
            let inbox =
                svc_receiver::sqlite::SqliteInbox::open(dir.join("inbox.db"), quick_policy())
                    .expect("inbox");
            let store =
                svc_receiver::sqlite::SqliteDedupStore::open(dir.join("dedup.db"), dedup_policy)
                    .expect("store");
            serve_child(listener, port, &mode, pause, inbox, store, handler).await;
        }
        "postgres" => {
            let database =
                svc_receiver::postgres::PgDatabase::connect_in_schema(&target, &schema, 4)
                    .await
                    .expect("database");
            let recorder = database.recorder();
            let handler = move |received: Received| {
                let (target, recorder) = (target.clone(), recorder.clone());
                async move {
                    let mut client = svc_test_support::postgres::connect(&target).await;
                    let tx = client.transaction().await.map_err(|e| e.to_string())?;
                    if recorder
                        .record(&tx, &received)
                        .await
                        .map_err(|e| e.to_string())?
                        .is_fresh()
                    {
                        super::postgres::insert_effect(&tx, &received)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                    pause_at(pause, Pause::BeforeCommit).await;
                    tx.commit().await.map_err(|e| e.to_string())?;
                    pause_at(pause, Pause::AfterCommit).await;
                    Ok::<(), String>(())
                }
            };
            let inbox = svc_receiver::postgres::PgInbox::new(database.clone(), quick_policy());
            let store = svc_receiver::postgres::PgDedupStore::new(database, dedup_policy);
            serve_child(listener, port, &mode, pause, inbox, store, handler).await;
        }
        #[cfg(feature = "sqlx-postgres")]
        "sqlx" => {
            let database =
                svc_receiver::postgres::PgDatabase::connect_in_schema(&target, &schema, 4)
                    .await
                    .expect("database");
            let recorder = database.recorder();
            let pool = super::postgres::sqlx_pool(&target, 4).await;
            let handler = move |received: Received| {
                let (pool, recorder) = (pool.clone(), recorder.clone());
                async move {
                    let mut tx = pool.begin().await.map_err(|e| e.to_string())?;
                    if recorder
                        .record_sqlx(&mut tx, &received)
                        .await
                        .map_err(|e| e.to_string())?
                        .is_fresh()
                    {
                        super::postgres::insert_effect_sqlx(&mut tx, &received)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                    pause_at(pause, Pause::BeforeCommit).await;
                    tx.commit().await.map_err(|e| e.to_string())?;
                    pause_at(pause, Pause::AfterCommit).await;
                    Ok::<(), String>(())
                }
            };
            let inbox = svc_receiver::postgres::PgInbox::new(database.clone(), quick_policy());
            let store = svc_receiver::postgres::PgDedupStore::new(database, dedup_policy);
            serve_child(listener, port, &mode, pause, inbox, store, handler).await;
        }
        other => panic!("unknown driver {other:?}"),
    }
}

/// Serves `mode` with the tenant's `handler` until killed.
async fn serve_child<I, S, H>(
    listener: tokio::net::TcpListener,
    port: u16,
    mode: &str,
    pause: Pause,
    inbox: I,
    store: S,
    handler: H,
) where
    I: Inbox,
    S: DedupStore,
    H: EventHandler + Clone,
{
    let server = if mode == "direct" {
        let mut app = Router::new().route(
            "/webhooks",
            webhook_route(WebhookReceiver::new(verifier(), store, handler)),
        );
        if pause == Pause::AfterCommit {
            // Committed; the answer never leaves (the handler paused already: this never
            // runs, but keeps the answer from leaving should it return).
            app = app.layer(axum::middleware::from_fn(
                |request: axum::extract::Request, next: axum::middleware::Next| async move {
                    let response = next.run(request).await;
                    pause_at(Pause::AfterCommit, Pause::AfterCommit).await;
                    response
                },
            ));
        }
        Server::new(app)
    } else {
        let app = Router::new().route(
            "/webhooks",
            inbox_route(InboxReceiver::new(verifier(), inbox.clone())),
        );
        Server::new(app).with_background(move |draining| {
            run_inbox_workers_until_drained(inbox, handler, svc_contract::SystemClock, 2, draining)
        })
    };
    println!("SVC_EO LISTENING {port}");
    server
        .run(listener, std::future::pending())
        .await
        .expect("serve");
}

/// Posts a delivery of `id` signed now to `addr` and returns the status (0: no answer, the
/// connection closed).
async fn post_now(client: &reqwest::Client, addr: std::net::SocketAddr, id: &str) -> u16 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs() as i64;
    let (header, body) = delivery(id, now);
    match client
        .post(format!("http://{addr}/webhooks"))
        .header("content-type", "application/json")
        .header("x-service-webhook-id", id)
        .header("x-service-signature", header)
        .body(body)
        .send()
        .await
    {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}

/// One crash scenario against a driver: start a child that stops at `pause`, deliver, kill it
/// there with SIGKILL, check what is committed, restart, let the sender retry (once the
/// killed child's claim ran out), and wait until the effect is there: then it must be there
/// exactly once, and stay so.
async fn crash_and_retry(
    driver: &str,
    target: &str,
    schema: &str,
    mode: &str,
    pause: Pause,
    id: &str,
    count: impl Fn() -> i64,
) {
    // The waits on the child block the thread: off the runtime's worker, whose queue holds the
    // delivery's task spawned here (a worker's newest task is not stolen by the others).
    let client = client();
    let mut child =
        tokio::task::block_in_place(|| ChildReceiver::start(driver, target, schema, mode, pause));
    let addr = child.addr();
    let first = tokio::spawn({
        let client = client.clone();
        let id = id.to_owned();
        async move { post_now(&client, addr, &id).await }
    });
    tokio::task::block_in_place(|| {
        child.expect_line("PAUSED");
        child.kill();
    });
    let first = first.await.expect("post");
    match mode {
        // Stored before the 200, and the worker paused afterwards.
        "inbox" => assert_eq!(first, 200, "{mode} {pause:?}"),
        _ => assert_eq!(first, 0, "{mode} {pause:?}: no answer before the kill"),
    }
    let committed = i64::from(pause == Pause::AfterCommit);
    assert_eq!(
        count(),
        committed,
        "{driver} {mode} {pause:?}: after the kill"
    );
    // Restarted, and the sender's retry (signed afresh) once the killed claim ran out.
    tokio::time::sleep(CHILD_LEASE + Duration::from_millis(1100)).await;
    let child = tokio::task::block_in_place(|| {
        ChildReceiver::start(driver, target, schema, mode, Pause::Never)
    });
    assert_eq!(
        post_now(&client, child.addr(), id).await,
        200,
        "{driver} {mode} {pause:?}: retry"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while count() < 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Past the lease of any entry the killed child held: nothing writes it again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(count(), 1, "{driver} {mode} {pause:?}: exactly once");
    child.kill();
}

/// The four crash scenarios of one driver: each mode, killed before and after the commit.
const SCENARIOS: [(&str, Pause); 4] = [
    ("direct", Pause::BeforeCommit),
    ("direct", Pause::AfterCommit),
    ("inbox", Pause::BeforeCommit),
    ("inbox", Pause::AfterCommit),
];

/// Runs `scenarios` side by side, each on a task of its own (they wait on leases and child
/// processes, and block their thread while reading a child's output or counting effects), and
/// fails with the first that fails.
async fn side_by_side(scenarios: Vec<tokio::task::JoinHandle<()>>) {
    for scenario in scenarios {
        if let Err(failed) = scenario.await {
            std::panic::resume_unwind(failed.into_panic());
        }
    }
}

// Each scenario has its own files (a child paused in its transaction holds the write lock of
// its database).
#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn sqlite_effects_survive_sigkill_before_and_after_the_commit_exactly_once() {
    let dir = tempfile::tempdir().expect("dir");
    let mut scenarios = Vec::new();
    for (mode, pause) in SCENARIOS {
        let id = format!("wh_kill_{mode}_{}", pause.as_str());
        let target = dir.path().join(&id);
        std::fs::create_dir(&target).expect("scenario dir");
        let path = target.join("app.db");
        drop(SqliteTenant::open(&path));
        let target = target.to_str().expect("utf-8 path").to_owned();
        scenarios.push(tokio::spawn(async move {
            let counted = id.clone();
            crash_and_retry("sqlite", &target, "", mode, pause, &id, move || {
                super::sqlite_effects(&path, &counted)
            })
            .await;
        }));
    }
    side_by_side(scenarios).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn postgres_effects_survive_sigkill_before_and_after_the_commit_exactly_once() {
    crash_tests("postgres").await;
}

#[cfg(feature = "sqlx-postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn sqlx_effects_survive_sigkill_before_and_after_the_commit_exactly_once() {
    crash_tests("sqlx").await;
}

/// Every crash scenario against the PostgreSQL driver `driver` (`postgres` or `sqlx`), each in
/// a schema of its own.
async fn crash_tests(driver: &str) {
    let mut scenarios = Vec::new();
    for (mode, pause) in SCENARIOS {
        // Migrated once here, so that the children only open it.
        let Some((url, schema, client, _)) = super::postgres::tenant_recorder(
            &format!("eo_{driver}_kill_{mode}_{}", pause.as_str()),
            1,
        )
        .await
        else {
            return;
        };
        let client = Arc::new(client);
        let id = format!("wh_{driver}kill_{mode}_{}", pause.as_str());
        let driver = driver.to_owned();
        scenarios.push(tokio::spawn(async move {
            let counted = id.clone();
            let handle = tokio::runtime::Handle::current();
            crash_and_retry(&driver, &url, &schema, mode, pause, &id, move || {
                let counter = Arc::clone(&client);
                let counted = counted.clone();
                tokio::task::block_in_place(|| {
                    handle
                        .block_on(async move { super::postgres::effects(&counter, &counted).await })
                })
            })
            .await;
        }));
    }
    side_by_side(scenarios).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_deliveries_of_one_id_across_three_processes_make_one_effect() {
    let Some((url, schema, client, _)) = super::postgres::tenant_recorder("eo_pg_three", 1).await
    else {
        return;
    };
    let http = client_for_children();
    for mode in ["direct", "inbox"] {
        let children: Vec<ChildReceiver> = (0..3)
            .map(|_| ChildReceiver::start("postgres", &url, &schema, mode, Pause::Never))
            .collect();
        let id = format!("wh_three_{mode}");
        let posts: Vec<_> = (0..8)
            .map(|n| {
                let (http, addr, id) = (http.clone(), children[n % 3].addr(), id.clone());
                tokio::spawn(async move { post_now(&http, addr, &id).await })
            })
            .collect();
        let mut statuses = Vec::new();
        for post in posts {
            statuses.push(post.await.expect("post"));
        }
        // Inbox mode stores each copy (200); direct mode answers a copy that finds another in
        // flight 409 (the sender retries it later), every other 200.
        let ok = statuses.iter().filter(|&&s| s == 200).count();
        assert!(
            statuses
                .iter()
                .all(|&s| s == 200 || (mode == "direct" && s == 409))
                && ok >= 1,
            "{mode}: {statuses:?}"
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while super::postgres::effects(&client, &id).await < 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(super::postgres::effects(&client, &id).await, 1, "{mode}");
        // The copies answered 409 retried once the claim is done: duplicates, no effect.
        if mode == "direct" {
            for child in &children {
                assert_eq!(post_now(&http, child.addr(), &id).await, 200);
            }
            assert_eq!(
                super::postgres::effects(&client, &id).await,
                1,
                "{mode}: retries"
            );
        }
        for child in children {
            child.kill();
        }
    }
}

fn client_for_children() -> reqwest::Client {
    client()
}
