//! Exactly-once effects (issue 24): the tenant's writes and the event's "done" commit in one
//! transaction of the tenant's database, on SQLite and PostgreSQL, in inbox and direct mode.
//!
//! - A handler that errors: nothing of its writes is visible, the event is retried and then
//!   succeeds once (both drivers, both modes).
//! - Real child processes (this test binary run again as a receiver, see
//!   [`exactly_once_child_receiver`]) killed with SIGKILL after the tenant's write but before
//!   the commit, and after the commit but before the answer (inbox mode: before the worker's
//!   settlement): after a restart and the sender's retry, the effect table holds the effect
//!   exactly once.
//! - 8 concurrent deliveries of one id across 3 receiver processes on one PostgreSQL: one
//!   effect, in either mode.
//! - A property test: random interleavings of deliveries (both modes), retries, handler
//!   failures, crashes before and after the commit and restarts, on SQLite in process, always
//!   end with each delivered event's effect exactly once.
//!
//! The PostgreSQL tests skip loudly without `SVC_TEST_POSTGRES_URL`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use axum::Router;
use rusqlite::Connection;
use svc_receiver::axum::{ExactlyOnceReceiver, exactly_once_route};
use svc_receiver::inbox::{Inbox, InboxPolicy, Settled, Step, process_next};
use svc_receiver::sqlite::{SqliteExactlyOnce, SqliteInbox};
use svc_receiver::{ManualClock, Received, sign};

use crate::helpers::{SECRET, T, client, event_body, post, spawn, verifier, webhook_id};

/// The tenant's effect table: no unique key, so that a second run of an effect shows.
const EFFECTS_SQLITE: &str = "CREATE TABLE IF NOT EXISTS effects (n INTEGER PRIMARY KEY, webhook_id TEXT NOT NULL, call_id TEXT NOT NULL)";

/// A policy that retries quickly and hands an abandoned entry out again after 2 s.
fn quick_policy() -> InboxPolicy {
    InboxPolicy {
        first_backoff: Duration::from_secs(1),
        lease: Duration::from_secs(2),
        max_attempts: 1000,
        ..InboxPolicy::default()
    }
}

/// The SQLite effect of the tests: one row per run; fails after writing it while `fail` is set.
fn sqlite_effect(
    fail: Arc<AtomicBool>,
) -> impl Fn(&Received, &Connection) -> Result<(), String> + Send + Sync + 'static {
    move |received: &Received, conn: &Connection| {
        conn.execute(
            "INSERT INTO effects (webhook_id, call_id) VALUES (?1, ?2)",
            [
                received.webhook_id.as_str(),
                received.event.call_id.as_str(),
            ],
        )
        .map_err(|e| e.to_string())?;
        if fail.load(Ordering::SeqCst) {
            return Err("planned failure after the write".into());
        }
        Ok(())
    }
}

/// How many effect rows `id` has in the SQLite file.
fn sqlite_effects(path: &std::path::Path, id: &str) -> i64 {
    let conn = Connection::open(path).expect("open");
    conn.query_row(
        "SELECT COUNT(*) FROM effects WHERE webhook_id = ?1",
        [id],
        |row| row.get(0),
    )
    .expect("count")
}

/// A fresh SQLite file with the tenant's table, and its inbox.
fn sqlite_file(dir: &tempfile::TempDir) -> (std::path::PathBuf, SqliteInbox) {
    let path = dir.path().join("tenant.db");
    Connection::open(&path)
        .expect("open")
        .execute_batch(EFFECTS_SQLITE)
        .expect("effects table");
    let inbox = SqliteInbox::open(&path, quick_policy()).expect("inbox");
    (path, inbox)
}

/// A signed delivery of `id` at `now`: (signature header, body).
fn delivery(id: &str, now: i64) -> (String, Vec<u8>) {
    let body = event_body(&format!("call_{id}"));
    (sign(SECRET, now, &body), body)
}

#[tokio::test]
async fn sqlite_inbox_mode_rolls_a_failed_effect_back_retries_it_and_applies_it_once() {
    let dir = tempfile::tempdir().expect("dir");
    let (path, inbox) = sqlite_file(&dir);
    let fail = Arc::new(AtomicBool::new(true));
    let handler = SqliteExactlyOnce::new(inbox.clone(), sqlite_effect(Arc::clone(&fail)));
    let id = webhook_id("wh_eo_fail");
    inbox
        .accept(&id, &[1; 32], &event_body("call_fail"), T)
        .await
        .expect("accept");
    let step = process_next(&inbox, &handler, T).await.expect("step");
    assert_eq!(step, Step::Settled(Settled::Retrying));
    assert_eq!(
        sqlite_effects(&path, "wh_eo_fail"),
        0,
        "the failed write is rolled back"
    );
    fail.store(false, Ordering::SeqCst);
    // Not due before its backoff; then applied once.
    assert_eq!(
        process_next(&inbox, &handler, T).await.expect("step"),
        Step::Empty
    );
    let step = process_next(&inbox, &handler, T + 1).await.expect("step");
    assert_eq!(step, Step::Settled(Settled::Done));
    assert_eq!(sqlite_effects(&path, "wh_eo_fail"), 1);
    assert_eq!(
        process_next(&inbox, &handler, T + 3600)
            .await
            .expect("step"),
        Step::Empty
    );
    assert_eq!(sqlite_effects(&path, "wh_eo_fail"), 1);
}

#[tokio::test]
async fn sqlite_inbox_mode_a_failure_reported_after_the_commit_does_not_run_the_effect_again() {
    let dir = tempfile::tempdir().expect("dir");
    let (path, inbox) = sqlite_file(&dir);
    let driver = SqliteExactlyOnce::new(
        inbox.clone(),
        sqlite_effect(Arc::new(AtomicBool::new(false))),
    );
    // The effect commits, but the worker learns of a failure (its deadline fired during the
    // commit, say): it settles the entry as failed.
    let late = move |received: Received| {
        let driver = driver.clone();
        async move {
            svc_receiver::EventHandler::handle(&driver, received).await?;
            Err::<(), String>("deadline passed during the commit".into())
        }
    };
    let id = webhook_id("wh_eo_late");
    inbox
        .accept(&id, &[2; 32], &event_body("call_late"), T)
        .await
        .expect("accept");
    process_next(&inbox, &late, T).await.expect("step");
    assert_eq!(sqlite_effects(&path, "wh_eo_late"), 1);
    // The entry stayed done: never handed out again.
    assert_eq!(
        process_next(&inbox, &late, T + 3600).await.expect("step"),
        Step::Empty
    );
    assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 0));
    assert_eq!(sqlite_effects(&path, "wh_eo_late"), 1);
}

#[tokio::test]
async fn sqlite_inbox_mode_sets_a_failing_event_aside_with_nothing_applied_and_a_requeue_applies_it_once()
 {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("tenant.db");
    Connection::open(&path)
        .expect("open")
        .execute_batch(EFFECTS_SQLITE)
        .expect("effects table");
    let policy = InboxPolicy {
        max_attempts: 2,
        ..quick_policy()
    };
    let inbox = SqliteInbox::open(&path, policy).expect("inbox");
    let fail = Arc::new(AtomicBool::new(true));
    let handler = SqliteExactlyOnce::new(inbox.clone(), sqlite_effect(Arc::clone(&fail)));
    let id = webhook_id("wh_eo_dead");
    inbox
        .accept(&id, &[3; 32], &event_body("call_dead"), T)
        .await
        .expect("accept");
    assert_eq!(
        process_next(&inbox, &handler, T).await.expect("step"),
        Step::Settled(Settled::Retrying)
    );
    assert_eq!(
        process_next(&inbox, &handler, T + 1).await.expect("step"),
        Step::Settled(Settled::Dead)
    );
    assert_eq!(sqlite_effects(&path, "wh_eo_dead"), 0);
    let dead = inbox.dead_letters().await.expect("dead letters");
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].last_error.contains("planned failure"),
        "{}",
        dead[0].last_error
    );
    fail.store(false, Ordering::SeqCst);
    assert!(
        inbox
            .requeue_dead_letter(&id, T + 10)
            .await
            .expect("requeue")
    );
    assert_eq!(
        process_next(&inbox, &handler, T + 10).await.expect("step"),
        Step::Settled(Settled::Done)
    );
    assert_eq!(
        process_next(&inbox, &handler, T + 3600)
            .await
            .expect("step"),
        Step::Empty
    );
    assert_eq!(sqlite_effects(&path, "wh_eo_dead"), 1);
}

/// The exactly-once direct route over `driver`, reading now from `clock`.
fn direct_router<X: svc_receiver::exactly_once::Transactional>(
    driver: X,
    clock: Arc<ManualClock>,
) -> Router {
    Router::new().route(
        "/webhooks",
        exactly_once_route(ExactlyOnceReceiver::new(verifier(), driver).with_clock(clock)),
    )
}

#[tokio::test]
async fn sqlite_direct_mode_rolls_a_failed_effect_back_and_the_senders_retry_applies_it_once() {
    let dir = tempfile::tempdir().expect("dir");
    let (path, inbox) = sqlite_file(&dir);
    let fail = Arc::new(AtomicBool::new(true));
    let clock = Arc::new(ManualClock::new(T));
    let driver = SqliteExactlyOnce::new(inbox.clone(), sqlite_effect(Arc::clone(&fail)));
    let addr = spawn(direct_router(driver, Arc::clone(&clock))).await;
    let client = client();
    let (header, body) = delivery("wh_eo_direct", T);
    let (status, _) = post(&client, addr, Some("wh_eo_direct"), Some(&header), body).await;
    assert_eq!(status, 500);
    assert_eq!(sqlite_effects(&path, "wh_eo_direct"), 0);
    assert!(
        !inbox
            .contains(&webhook_id("wh_eo_direct"))
            .await
            .expect("contains")
    );
    // The sender's retry, five minutes later, signed afresh.
    fail.store(false, Ordering::SeqCst);
    clock.set(T + 300);
    let (header, body) = delivery("wh_eo_direct", T + 300);
    let (status, _) = post(
        &client,
        addr,
        Some("wh_eo_direct"),
        Some(&header),
        body.clone(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(sqlite_effects(&path, "wh_eo_direct"), 1);
    // Another copy is a duplicate; the same signature under another id a replay.
    let (status, _) = post(
        &client,
        addr,
        Some("wh_eo_direct"),
        Some(&header),
        body.clone(),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = post(&client, addr, Some("wh_eo_other"), Some(&header), body).await;
    assert_eq!(status, 401);
    assert_eq!(sqlite_effects(&path, "wh_eo_direct"), 1);
    assert_eq!(sqlite_effects(&path, "wh_eo_other"), 0);
    // Nothing is left pending for inbox workers.
    assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 0));
}

// ---- a model of random interleavings ----

/// One step of the model.
#[derive(Debug, Clone)]
enum Op {
    /// The sender delivers event `id` (again): to the exactly-once direct route, or to the
    /// inbox route; `fail`: the effect fails after its write.
    Deliver { id: u8, direct: bool, fail: bool },
    /// A worker takes the next due entry; `fail`: the effect fails after its write;
    /// `crash_before_commit`: the process dies with the entry in hand, before any commit;
    /// `lost_after_commit`: the effect commits, then the worker learns of a failure (or dies)
    /// instead of settling it done.
    Work {
        fail: bool,
        crash_before_commit: bool,
        lost_after_commit: bool,
    },
    /// Time passes.
    Advance { secs: i64 },
    /// The process restarts: every handle dropped, the file opened again.
    Restart,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u8..4, any::<bool>(), proptest::bool::weighted(0.3))
            .prop_map(|(id, direct, fail)| Op::Deliver { id, direct, fail }),
        4 => (proptest::bool::weighted(0.3), proptest::bool::weighted(0.15), proptest::bool::weighted(0.15))
            .prop_map(|(fail, crash_before_commit, lost_after_commit)| Op::Work { fail, crash_before_commit, lost_after_commit }),
        2 => (0i64..4).prop_map(|secs| Op::Advance { secs }),
        1 => Just(Op::Restart),
    ]
}

/// The model's effect, boxed so that the driver's type can be named.
type ModelEffect = Box<dyn Fn(&Received, &Connection) -> Result<(), String> + Send + Sync>;

/// The receiver of the model: the inbox, the driver, the direct route.
struct Model {
    path: std::path::PathBuf,
    clock: Arc<ManualClock>,
    fail: Arc<AtomicBool>,
    inbox: SqliteInbox,
    driver: SqliteExactlyOnce<ModelEffect>,
    router: Router,
}

impl Model {
    fn open(path: &std::path::Path, clock: &Arc<ManualClock>, fail: &Arc<AtomicBool>) -> Self {
        let inbox = SqliteInbox::open(path, quick_policy()).expect("inbox");
        let effect: ModelEffect = Box::new(sqlite_effect(Arc::clone(fail)));
        let driver = SqliteExactlyOnce::new(inbox.clone(), effect);
        let router = direct_router(driver.clone(), Arc::clone(clock));
        Self {
            path: path.to_owned(),
            clock: Arc::clone(clock),
            fail: Arc::clone(fail),
            inbox,
            driver,
            router,
        }
    }

    fn now(&self) -> i64 {
        svc_receiver::Clock::now(&*self.clock)
    }

    /// One delivery of event `id`; whether the sender was answered 200.
    async fn deliver(&self, id: &str, direct: bool) -> bool {
        let now = self.now();
        let (header, body) = delivery(id, now);
        if direct {
            use tower::ServiceExt;
            let request = axum::http::Request::post("/webhooks")
                .header("content-type", "application/json")
                .header("x-service-webhook-id", id)
                .header("x-service-signature", header)
                .body(axum::body::Body::from(body))
                .expect("request");
            let response = self
                .router
                .clone()
                .oneshot(request)
                .await
                .expect("infallible");
            response.status() == 200
        } else {
            let signature = svc_receiver::signature::SignatureHeader::parse(header.as_bytes())
                .expect("header")
                .signatures()[0];
            let accepted = self
                .inbox
                .accept(&webhook_id(id), &signature, &body, now)
                .await
                .expect("accept");
            accepted != svc_receiver::inbox::Accepted::Replayed
        }
    }

    async fn work(&self, crash_before_commit: bool, lost_after_commit: bool) {
        let now = self.now();
        if crash_before_commit {
            // Handed out, then the process dies: nothing of the effect was committed.
            let _ = self.inbox.next_due(now).await.expect("next");
        } else if lost_after_commit {
            let driver = self.driver.clone();
            let lost = move |received: Received| {
                let driver = driver.clone();
                async move {
                    svc_receiver::EventHandler::handle(&driver, received).await?;
                    Err::<(), String>("the worker died after the commit".into())
                }
            };
            process_next(&self.inbox, &lost, now).await.expect("step");
        } else {
            process_next(&self.inbox, &self.driver, now)
                .await
                .expect("step");
        }
    }
}

#[test]
fn random_deliveries_retries_failures_and_crashes_end_with_each_effect_exactly_once() {
    use proptest::prelude::*;
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(40));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runner
        .run(&proptest::collection::vec(op(), 1..40), |ops| {
            runtime.block_on(async {
                let dir = tempfile::tempdir().expect("dir");
                let (path, first) = sqlite_file(&dir);
                drop(first);
                let clock = Arc::new(ManualClock::new(T));
                let fail = Arc::new(AtomicBool::new(false));
                let mut model = Model::open(&path, &clock, &fail);
                let mut delivered = [false; 4];
                let mut acknowledged = [false; 4];
                for op in &ops {
                    match *op {
                        Op::Deliver {
                            id,
                            direct,
                            fail: fails,
                        } => {
                            model.fail.store(fails, Ordering::SeqCst);
                            delivered[usize::from(id)] = true;
                            if model.deliver(&format!("wh_model_{id}"), direct).await {
                                acknowledged[usize::from(id)] = true;
                            }
                        }
                        Op::Work {
                            fail: fails,
                            crash_before_commit,
                            lost_after_commit,
                        } => {
                            model.fail.store(fails, Ordering::SeqCst);
                            model.work(crash_before_commit, lost_after_commit).await;
                            if crash_before_commit {
                                model = Model::open(&path, &clock, &fail);
                            }
                        }
                        Op::Advance { secs } => clock.set(model.now() + secs),
                        Op::Restart => model = Model::open(&path, &clock, &fail),
                    }
                    model.fail.store(false, Ordering::SeqCst);
                }
                // The sender retries every delivery not yet acknowledged until it is (to the
                // inbox route), and the workers drain the inbox once every lease and backoff
                // has run out.
                for id in 0..4u8 {
                    if delivered[usize::from(id)] && !acknowledged[usize::from(id)] {
                        assert!(model.deliver(&format!("wh_model_{id}"), false).await);
                    }
                }
                for _ in 0..3 {
                    clock.set(model.now() + 7200);
                    while process_next(&model.inbox, &model.driver, model.now())
                        .await
                        .expect("step")
                        != Step::Empty
                    {}
                }
                for id in 0..4u8 {
                    let effects = sqlite_effects(&model.path, &format!("wh_model_{id}"));
                    let expected = i64::from(delivered[usize::from(id)]);
                    assert_eq!(effects, expected, "event {id} after {ops:?}");
                }
            });
            Ok(())
        })
        .expect("every interleaving ends with each effect exactly once");
}

// ---- child processes ----

/// Where a child receiver stops for good (and waits to be killed), printing `PAUSED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pause {
    Never,
    /// In the effect, after its write, before the commit.
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

/// A receiver in a child process (this test binary, run again with
/// [`exactly_once_child_receiver`] alone).
struct ChildReceiver {
    process: std::process::Child,
    port: u16,
    lines: mpsc::Receiver<String>,
}

impl ChildReceiver {
    /// Starts one: `driver` is `sqlite` or `postgres`, `target` the file or URL, `mode`
    /// `direct` or `inbox`.
    fn start(driver: &str, target: &str, schema: &str, mode: &str, pause: Pause) -> Self {
        let exe = std::env::current_exe().expect("test binary");
        let mut process = Command::new(exe)
            .args([
                "--exact",
                "exactly_once::exactly_once_child_receiver",
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
/// unless `SVC_EO_CHILD` is set). It serves the exactly-once route (direct mode) or the inbox
/// route with workers running the exactly-once handler (inbox mode) on 127.0.0.1, prints
/// `SVC_EO LISTENING <port>`, and stops for good at `SVC_EO_CHILD_PAUSE`.
#[test]
#[ignore = "run by the crash tests as a child process"]
fn exactly_once_child_receiver() {
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
    let (driver, target, mode) = (
        var("SVC_EO_CHILD_DRIVER"),
        var("SVC_EO_CHILD_TARGET"),
        var("SVC_EO_CHILD_MODE"),
    );
    let pause = Pause::from_env();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    match driver.as_str() {
        "sqlite" => {
            let inbox = SqliteInbox::open(&target, quick_policy()).expect("inbox");
            let effect = move |received: &Received, conn: &Connection| {
                conn.execute(
                    "INSERT INTO effects (webhook_id, call_id) VALUES (?1, ?2)",
                    [
                        received.webhook_id.as_str(),
                        received.event.call_id.as_str(),
                    ],
                )
                .map_err(|e| e.to_string())?;
                if pause == Pause::BeforeCommit {
                    pause_forever();
                }
                Ok::<(), String>(())
            };
            let driver = SqliteExactlyOnce::new(inbox.clone(), effect);
            serve_child(listener, port, &mode, pause, inbox, driver).await;
        }
        #[cfg(feature = "postgres")]
        "postgres" => {
            let schema = var("SVC_EO_CHILD_SCHEMA");
            let database =
                svc_receiver::postgres::PgDatabase::connect_in_schema(&target, &schema, 4)
                    .await
                    .expect("database");
            let inbox = svc_receiver::postgres::PgInbox::new(database, quick_policy());
            let driver = svc_receiver::postgres::PgExactlyOnce::new(
                inbox.clone(),
                pg::ChildEffect { pause },
            );
            serve_child(listener, port, &mode, pause, inbox, driver).await;
        }
        #[cfg(feature = "sqlx-postgres")]
        "sqlx" => {
            let schema = var("SVC_EO_CHILD_SCHEMA");
            let database =
                svc_receiver::postgres::PgDatabase::connect_in_schema(&target, &schema, 4)
                    .await
                    .expect("database");
            let inbox = svc_receiver::postgres::PgInbox::new(database, quick_policy());
            let pool = pg::sqlx_effects::sqlx_pool(&target, 4).await;
            let driver = svc_receiver::postgres::SqlxPgExactlyOnce::new(
                inbox.clone(),
                pool,
                pg::sqlx_effects::ChildEffect { pause },
            );
            serve_child(listener, port, &mode, pause, inbox, driver).await;
        }
        other => panic!("unknown driver {other:?}"),
    }
}

/// Serves `mode` with `driver` until killed.
async fn serve_child<I, X>(
    listener: tokio::net::TcpListener,
    port: u16,
    mode: &str,
    pause: Pause,
    inbox: I,
    driver: X,
) where
    I: Inbox,
    X: svc_receiver::exactly_once::Transactional + svc_receiver::EventHandler,
{
    use svc_receiver::axum::{InboxReceiver, Server, inbox_route};
    let server = if mode == "direct" {
        let mut app = Router::new().route(
            "/webhooks",
            exactly_once_route(ExactlyOnceReceiver::new(verifier(), driver)),
        );
        if pause == Pause::AfterCommit {
            // The transaction committed; the answer never leaves.
            app = app.layer(axum::middleware::from_fn(
                |request: axum::extract::Request, next: axum::middleware::Next| async move {
                    let response = next.run(request).await;
                    if response.status() == 200 {
                        tokio::task::spawn_blocking(|| pause_forever())
                            .await
                            .expect("paused");
                    }
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
        let handler = move |received: Received| {
            let driver = driver.clone();
            async move {
                svc_receiver::EventHandler::handle(&driver, received)
                    .await
                    .map_err(|e| e.to_string())?;
                if pause == Pause::AfterCommit {
                    // Committed with its effect; the worker never settles it.
                    tokio::task::spawn_blocking(|| pause_forever())
                        .await
                        .expect("paused");
                }
                Ok::<(), String>(())
            }
        };
        Server::new(app).with_inbox_workers(inbox, handler, 2)
    };
    println!("SVC_EO LISTENING {port}");
    server
        .run(listener, std::future::pending())
        .await
        .expect("serve");
}

/// Posts a delivery of `id` signed now to `child` and returns the status (0: no answer, the
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
/// there with SIGKILL, check what is committed, restart, let the sender retry, and wait until
/// the effect is there: then it must be there exactly once, and stay so.
async fn crash_and_retry(
    driver: &str,
    target: &str,
    schema: &str,
    mode: &str,
    pause: Pause,
    id: &str,
    count: impl Fn() -> i64,
) {
    let client = client();
    let mut child = ChildReceiver::start(driver, target, schema, mode, pause);
    let addr = child.addr();
    let first = tokio::spawn({
        let client = client.clone();
        let id = id.to_owned();
        async move { post_now(&client, addr, &id).await }
    });
    child.expect_line("PAUSED");
    child.kill();
    let first = first.await.expect("post");
    match mode {
        // Stored before the 200, and the worker paused afterwards.
        "inbox" => assert_eq!(first, 200, "{mode} {pause:?}"),
        _ => assert_eq!(first, 0, "{mode} {pause:?}: no answer before the kill"),
    }
    let committed = if pause == Pause::AfterCommit { 1 } else { 0 };
    assert_eq!(
        count(),
        committed,
        "{driver} {mode} {pause:?}: after the kill"
    );
    // Restarted, and the sender's retry (signed afresh).
    let child = ChildReceiver::start(driver, target, schema, mode, Pause::Never);
    assert_eq!(
        post_now(&client, child.addr(), id).await,
        200,
        "{driver} {mode} {pause:?}: retry"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while count() < 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Past the lease of any entry the killed child held: nothing runs it again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(count(), 1, "{driver} {mode} {pause:?}: exactly once");
    child.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_effects_survive_sigkill_before_and_after_the_commit_exactly_once() {
    let dir = tempfile::tempdir().expect("dir");
    let (path, inbox) = sqlite_file(&dir);
    drop(inbox);
    let target = path.to_str().expect("utf-8 path").to_owned();
    for mode in ["direct", "inbox"] {
        for pause in [Pause::BeforeCommit, Pause::AfterCommit] {
            let id = format!("wh_kill_{mode}_{}", pause.as_str());
            let path = path.clone();
            let counted = id.clone();
            crash_and_retry("sqlite", &target, "", mode, pause, &id, move || {
                sqlite_effects(&path, &counted)
            })
            .await;
        }
    }
}

#[cfg(feature = "postgres")]
mod pg {
    //! The PostgreSQL driver's tests.

    use super::*;
    use svc_receiver::postgres::{PgDatabase, PgEffect, PgExactlyOnce, PgInbox, PgTx};

    /// The child receivers' effect: one row per run, and the pause before the commit.
    pub(super) struct ChildEffect {
        pub(super) pause: Pause,
    }

    impl PgEffect for ChildEffect {
        type Error = tokio_postgres::Error;

        async fn apply(&self, received: &Received, tx: &PgTx<'_>) -> Result<(), Self::Error> {
            tx.execute(
                "INSERT INTO effects (webhook_id, call_id) VALUES ($1, $2)",
                &[&received.webhook_id.as_str(), &received.event.call_id],
            )
            .await?;
            if self.pause == Pause::BeforeCommit {
                tokio::task::spawn_blocking(|| pause_forever())
                    .await
                    .expect("paused");
            }
            Ok(())
        }
    }

    /// The tokio-postgres effects' insert, as `PgTx::prepare_cached` prepares it.
    const CACHED_INSERT: &str = "INSERT INTO effects (webhook_id, call_id) VALUES ($1, $2)";

    /// The tokio-postgres effects' write: one row into `effects` for `received`, through the
    /// connection's statement cache.
    async fn insert_effect(
        received: &Received,
        tx: &PgTx<'_>,
    ) -> Result<(), tokio_postgres::Error> {
        let insert = tx.prepare_cached(CACHED_INSERT).await?;
        tx.execute(
            &insert,
            &[&received.webhook_id.as_str(), &received.event.call_id],
        )
        .await
        .map(drop)
    }

    /// The in-process effect: one row per run; fails after writing it while `fail` is set.
    struct Effect {
        fail: Arc<AtomicBool>,
    }

    impl PgEffect for Effect {
        type Error = String;

        async fn apply(&self, received: &Received, tx: &PgTx<'_>) -> Result<(), String> {
            insert_effect(received, tx)
                .await
                .map_err(|e| svc_receiver::postgres::describe_error(&e))?;
            if self.fail.load(Ordering::SeqCst) {
                return Err("planned failure after the write".into());
            }
            Ok(())
        }
    }

    /// A fresh schema for the tenant (its URL's search_path), with the effect table, and a
    /// schema of the crate's own beside it; `None` without a server.
    async fn tenant(test: &str) -> Option<(String, String, tokio_postgres::Client)> {
        let url = svc_fixtures::postgres::fresh_schema_url(test).await?;
        let tenant_schema = url
            .rsplit("search_path%3D")
            .next()
            .expect("a schema")
            .to_owned();
        let crate_schema = format!("{tenant_schema}_svc");
        let client = svc_fixtures::postgres::connect(&url).await;
        client
            .batch_execute(
                "CREATE TABLE effects (n BIGSERIAL PRIMARY KEY, webhook_id TEXT NOT NULL,
                                       call_id TEXT NOT NULL)",
            )
            .await
            .expect("effects table");
        Some((url, crate_schema, client))
    }

    /// A tenant (see [`tenant`]) with the crate's inbox in a schema beside it, its pool of
    /// `connections` connections and the quick policy: the inbox, the tenant's URL (for a
    /// pool of the tenant's own) and a connection for the test's own statements.
    pub(super) async fn tenant_inbox(
        test: &str,
        connections: usize,
    ) -> Option<(PgInbox, String, tokio_postgres::Client)> {
        let (url, schema, client) = tenant(test).await?;
        let database = PgDatabase::connect_in_schema(&url, &schema, connections)
            .await
            .expect("database");
        Some((PgInbox::new(database, quick_policy()), url, client))
    }

    #[cfg(feature = "sqlx-postgres")]
    pub(super) mod sqlx_effects {
        //! The sqlx driver's effects and tests.

        use super::*;
        use svc_receiver::postgres::{SqlxPgEffect, SqlxPgExactlyOnce};

        /// The tenant's own sqlx pool on `url`, of `connections` connections.
        pub(crate) async fn sqlx_pool(url: &str, connections: u32) -> sqlx::PgPool {
            sqlx::postgres::PgPoolOptions::new()
                .max_connections(connections)
                .connect(url)
                .await
                .expect("sqlx pool")
        }

        /// The sqlx effects' write: one row into `effects` for `received`.
        async fn insert_effect(
            received: &Received,
            conn: &mut sqlx::PgConnection,
        ) -> Result<(), sqlx::Error> {
            sqlx::query("INSERT INTO effects (webhook_id, call_id) VALUES ($1, $2)")
                .bind(received.webhook_id.as_str())
                .bind(&received.event.call_id)
                .execute(&mut *conn)
                .await
                .map(drop)
        }

        /// The child receivers' effect: one row per run, and the pause before the commit.
        pub(crate) struct ChildEffect {
            pub(crate) pause: Pause,
        }

        impl SqlxPgEffect for ChildEffect {
            type Error = sqlx::Error;

            async fn apply(
                &self,
                received: &Received,
                conn: &mut sqlx::PgConnection,
            ) -> Result<(), sqlx::Error> {
                insert_effect(received, conn).await?;
                if self.pause == Pause::BeforeCommit {
                    tokio::task::spawn_blocking(|| pause_forever())
                        .await
                        .expect("paused");
                }
                Ok(())
            }
        }

        /// One row per run; fails after writing it while `fail` is set.
        struct Effect {
            fail: Arc<AtomicBool>,
        }

        impl SqlxPgEffect for Effect {
            type Error = String;

            async fn apply(
                &self,
                received: &Received,
                conn: &mut sqlx::PgConnection,
            ) -> Result<(), String> {
                insert_effect(received, conn)
                    .await
                    .map_err(|e| e.to_string())?;
                if self.fail.load(Ordering::SeqCst) {
                    return Err("planned failure after the write".into());
                }
                Ok(())
            }
        }

        /// As `postgres_direct_mode_on_a_stalled_database_answers_in_time_and_recovers`, with
        /// the transactions on the tenant's `sqlx` pool, itself reached through the proxy: a
        /// batch ends within the inbox database's answer timeout and its stalled connection is
        /// closed, not handed back to the tenant's pool.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn sqlx_direct_mode_on_a_stalled_database_answers_in_time_and_recovers() {
            let Some(behind) = super::tenant_behind_proxy("eo_sqlx_direct_stall").await else {
                return;
            };
            let pool = sqlx_pool(&behind.proxied, 8).await;
            let driver = SqlxPgExactlyOnce::new(
                PgInbox::new(behind.database, quick_policy()),
                pool,
                Effect {
                    fail: Arc::new(AtomicBool::new(false)),
                },
            );
            super::stalled_database_answers_in_time_and_recovers(
                driver,
                &behind.proxy,
                &behind.client,
                "sqlx",
            )
            .await;
        }

        #[tokio::test]
        async fn sqlx_rolls_a_failed_effect_back_and_applies_it_once_in_both_modes() {
            let Some((inbox, url, client)) = tenant_inbox("eo_sqlx_fail", 4).await else {
                return;
            };
            let pool = sqlx::PgPool::connect(&url).await.expect("sqlx pool");
            let fail = Arc::new(AtomicBool::new(true));
            let driver = SqlxPgExactlyOnce::new(
                inbox.clone(),
                pool,
                Effect {
                    fail: Arc::clone(&fail),
                },
            );
            // Inbox mode.
            let id = webhook_id("wh_eo_sqlx_inbox");
            inbox
                .accept(&id, &[1; 32], &event_body("call_sqlx"), T)
                .await
                .expect("accept");
            let step = process_next(&inbox, &driver, T).await.expect("step");
            assert_eq!(step, Step::Settled(Settled::Retrying));
            assert_eq!(effects(&client, "wh_eo_sqlx_inbox").await, 0, "rolled back");
            fail.store(false, Ordering::SeqCst);
            let step = process_next(&inbox, &driver, T + 1).await.expect("step");
            assert_eq!(step, Step::Settled(Settled::Done));
            assert_eq!(
                process_next(&inbox, &driver, T + 3600).await.expect("step"),
                Step::Empty
            );
            assert_eq!(effects(&client, "wh_eo_sqlx_inbox").await, 1);
            // Direct mode.
            fail.store(true, Ordering::SeqCst);
            let clock = Arc::new(ManualClock::new(T));
            let addr = spawn(direct_router(driver, Arc::clone(&clock))).await;
            let http = crate::helpers::client();
            let (header, body) = delivery("wh_eo_sqlx_direct", T);
            let (status, _) =
                post(&http, addr, Some("wh_eo_sqlx_direct"), Some(&header), body).await;
            assert_eq!(status, 500);
            assert_eq!(effects(&client, "wh_eo_sqlx_direct").await, 0);
            fail.store(false, Ordering::SeqCst);
            clock.set(T + 300);
            let (header, body) = delivery("wh_eo_sqlx_direct", T + 300);
            for _ in 0..2 {
                let (status, _) = post(
                    &http,
                    addr,
                    Some("wh_eo_sqlx_direct"),
                    Some(&header),
                    body.clone(),
                )
                .await;
                assert_eq!(status, 200);
            }
            let (status, _) =
                post(&http, addr, Some("wh_eo_sqlx_other"), Some(&header), body).await;
            assert_eq!(status, 401);
            assert_eq!(effects(&client, "wh_eo_sqlx_direct").await, 1);
            assert_eq!(effects(&client, "wh_eo_sqlx_other").await, 0);
        }

        /// One row per run; then, when armed, a `ROLLBACK` of its own.
        struct EndingEffect {
            ending: Arc<super::Ending>,
        }

        impl SqlxPgEffect for EndingEffect {
            type Error = sqlx::Error;

            async fn apply(
                &self,
                received: &Received,
                conn: &mut sqlx::PgConnection,
            ) -> Result<(), sqlx::Error> {
                insert_effect(received, conn).await?;
                if self.ending.take() {
                    sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await?;
                }
                Ok(())
            }
        }

        #[tokio::test]
        async fn sqlx_an_effect_that_rolls_back_itself_is_not_recorded_as_done() {
            let Some((inbox, url, client)) = tenant_inbox("eo_sqlx_ended", 4).await else {
                return;
            };
            let pool = sqlx_pool(&url, 4).await;
            let ending = Arc::new(super::Ending::default());
            let driver = SqlxPgExactlyOnce::new(
                inbox.clone(),
                pool,
                EndingEffect {
                    ending: Arc::clone(&ending),
                },
            );
            super::an_effect_that_rolls_back_itself_is_not_recorded_as_done(
                &inbox, driver, &ending, &client, "sqlx",
            )
            .await;
        }

        /// The batch test's effect (see [`super::batch_effect_runs_alone_in_its_savepoint`]):
        /// one row per run, its transaction's id noted, a pause, and a failure for the ids in
        /// `failing`.
        struct BatchEffect {
            record: Arc<BatchRecord>,
        }

        impl SqlxPgEffect for BatchEffect {
            type Error = String;

            async fn apply(
                &self,
                received: &Received,
                conn: &mut sqlx::PgConnection,
            ) -> Result<(), String> {
                let txid: i64 = sqlx::query_scalar(
                    "INSERT INTO effects (webhook_id, call_id) VALUES ($1, $2)
                     RETURNING txid_current()",
                )
                .bind(received.webhook_id.as_str())
                .bind(&received.event.call_id)
                .fetch_one(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
                if self.record.swallows(received) {
                    let _ = sqlx::query("SELECT 1 / 0").execute(&mut *conn).await;
                }
                self.record.ran(received, txid).await
            }
        }

        #[tokio::test]
        async fn sqlx_a_failing_effect_in_a_batch_rolls_back_alone_and_the_others_commit_once() {
            let Some((inbox, url, client)) = tenant_inbox("eo_sqlx_batch", 8).await else {
                return;
            };
            let pool = sqlx_pool(&url, 8).await;
            let record = Arc::new(BatchRecord::default());
            let driver = SqlxPgExactlyOnce::new(
                inbox,
                pool,
                BatchEffect {
                    record: Arc::clone(&record),
                },
            );
            batch_effect_runs_alone_in_its_savepoint(driver, &record, &client, "sqlx").await;
        }
        #[tokio::test]
        async fn sqlx_an_effect_that_swallows_a_failed_statement_is_answered_500_and_not_committed()
        {
            let Some((url, schema, client)) = tenant("eo_sqlx_swallowed").await else {
                return;
            };
            let database = PgDatabase::connect_in_schema(&url, &schema, 8)
                .await
                .expect("database");
            let pool = sqlx_pool(&url, 8).await;
            let record = Arc::new(BatchRecord::default());
            let driver = SqlxPgExactlyOnce::new(
                PgInbox::new(database, quick_policy()),
                pool,
                BatchEffect {
                    record: Arc::clone(&record),
                },
            );
            a_swallowed_statement_failure_of_the_last_effect_is_not_committed(
                driver, &record, &client, "sqlx",
            )
            .await;
        }
    }

    /// What the batch test's effects saw: each run's webhook id and transaction id; and
    /// which ids fail (after their write).
    #[derive(Default)]
    pub(super) struct BatchRecord {
        runs: std::sync::Mutex<Vec<(String, i64)>>,
        failing: std::sync::Mutex<std::collections::HashSet<String>>,
        /// Ids whose effect runs a statement that fails, ignores the error and returns `Ok`.
        swallowing: std::sync::Mutex<std::collections::HashSet<String>>,
        /// Effects running now, per transaction id; and how many effects started while
        /// another of their transaction was still running.
        running: std::sync::Mutex<std::collections::HashMap<i64, usize>>,
        overlapped: std::sync::atomic::AtomicUsize,
    }

    impl BatchRecord {
        /// Whether `received`'s effect swallows a failed statement.
        pub(super) fn swallows(&self, received: &Received) -> bool {
            self.swallowing
                .lock()
                .expect("swallowing")
                .contains(received.webhook_id.as_str())
        }

        /// Notes a run of `received`'s effect in transaction `txid`, pauses so that the
        /// deliveries arriving meanwhile gather into batches, and fails if its id is failing.
        pub(super) async fn ran(&self, received: &Received, txid: i64) -> Result<(), String> {
            let id = received.webhook_id.as_str().to_owned();
            self.runs.lock().expect("runs").push((id.clone(), txid));
            {
                let mut running = self.running.lock().expect("running");
                let now = running.entry(txid).or_default();
                if *now > 0 {
                    self.overlapped
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                *now += 1;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
            if let Some(now) = self.running.lock().expect("running").get_mut(&txid) {
                *now -= 1;
            }
            if self.failing.lock().expect("failing").contains(&id) {
                return Err(format!("planned failure of {id} after its write"));
            }
            Ok(())
        }
    }

    /// The tokio-postgres batch test's effect (see [`BatchRecord`]).
    struct BatchEffect {
        record: Arc<BatchRecord>,
    }

    impl PgEffect for BatchEffect {
        type Error = String;

        async fn apply(&self, received: &Received, tx: &PgTx<'_>) -> Result<(), String> {
            let txid: i64 = tx
                .query_one(
                    "INSERT INTO effects (webhook_id, call_id) VALUES ($1, $2)
                     RETURNING txid_current()",
                    &[&received.webhook_id.as_str(), &received.event.call_id],
                )
                .await
                .map_err(|e| svc_receiver::postgres::describe_error(&e))?
                .get(0);
            if self.record.swallows(received) {
                let _ = tx.execute("SELECT 1 / 0", &[]).await;
            }
            self.record.ran(received, txid).await
        }
    }

    /// 40 concurrent deliveries through the direct route of `driver`, every fifth one's
    /// effect failing, and four that return `Ok` after a statement of theirs failed: those
    /// are answered 500 with nothing committed, although they shared a transaction (a batch)
    /// with deliveries that committed; every other one is answered 200 with its effect once
    /// (also the ones that ran after a swallowed failure in their batch). The sender's
    /// retries of the failed ones then commit them once, and copies of every delivery are
    /// duplicates.
    pub(super) async fn batch_effect_runs_alone_in_its_savepoint<
        X: svc_receiver::exactly_once::Transactional,
    >(
        driver: X,
        record: &BatchRecord,
        client: &tokio_postgres::Client,
        label: &str,
    ) {
        let ids: Vec<String> = (0..40)
            .map(|n| format!("wh_batch_{label}_{n:02}"))
            .collect();
        let failing: Vec<String> = ids.iter().step_by(5).cloned().collect();
        let swallowing: Vec<String> = ids.iter().skip(3).step_by(10).cloned().collect();
        record
            .failing
            .lock()
            .expect("failing")
            .extend(failing.iter().cloned());
        record
            .swallowing
            .lock()
            .expect("swallowing")
            .extend(swallowing.iter().cloned());
        let failing: Vec<String> = failing.into_iter().chain(swallowing).collect();
        let clock = Arc::new(ManualClock::new(T));
        let addr = spawn(direct_router(driver, Arc::clone(&clock))).await;
        let http = super::client();
        let deliver_all = |ids: Vec<String>, at: i64| {
            let http = http.clone();
            async move {
                let posts: Vec<_> = ids
                    .into_iter()
                    .map(|id| {
                        let http = http.clone();
                        tokio::spawn(async move {
                            let (header, body) = delivery(&id, at);
                            let (status, _) =
                                post(&http, addr, Some(&id), Some(&header), body).await;
                            (id, status)
                        })
                    })
                    .collect();
                let mut statuses = std::collections::HashMap::new();
                for posted in posts {
                    let (id, status) = posted.await.expect("post");
                    statuses.insert(id, status);
                }
                statuses
            }
        };
        let statuses = deliver_all(ids.clone(), T).await;
        for id in &ids {
            let fails = failing.contains(id);
            assert_eq!(statuses[id], if fails { 500 } else { 200 }, "{label} {id}");
            assert_eq!(effects(client, id).await, i64::from(!fails), "{label} {id}");
        }
        // The key guarantee: a failing effect and effects that committed ran in one
        // transaction, and its failure rolled back its own writes only.
        let runs = record.runs.lock().expect("runs").clone();
        let txid_of = |wanted: &str| {
            runs.iter()
                .filter(|(id, _)| id == wanted)
                .map(|(_, txid)| *txid)
                .collect::<Vec<_>>()
        };
        let shared = failing.iter().any(|bad| {
            let bad_txids = txid_of(bad);
            ids.iter()
                .filter(|id| !failing.contains(id))
                .any(|good| txid_of(good).iter().any(|txid| bad_txids.contains(txid)))
        });
        assert!(
            shared,
            "{label}: no failing effect shared its batch with one that committed: {runs:?}"
        );
        // The sender retries the failing ones, signed afresh.
        record.failing.lock().expect("failing").clear();
        record.swallowing.lock().expect("swallowing").clear();
        clock.set(T + 300);
        let retried = deliver_all(failing.clone(), T + 300).await;
        // And copies of every delivery come again: duplicates, nothing runs.
        let copies = deliver_all(ids.clone(), T + 300).await;
        for id in &ids {
            assert_eq!(copies[id], 200, "{label} {id}: a copy");
            if failing.contains(id) {
                assert_eq!(retried[id], 200, "{label} {id}: the retry");
            }
            assert_eq!(effects(client, id).await, 1, "{label} {id}: exactly once");
        }
        // Each failed effect ran again for its retry; an effect that ran after a swallowed
        // failure in its batch may have run twice.
        assert!(
            record.runs.lock().expect("runs").len() >= ids.len() + failing.len(),
            "{label}: every effect ran, the failing ones twice"
        );
    }

    /// A delivery alone in its batch whose effect writes, runs a statement that fails, ignores
    /// the error and returns `Ok`: the batch's first attempt (no savepoints) learns of the
    /// aborted transaction only from the statement that records the batch, sent with the
    /// `COMMIT`, which PostgreSQL then answers by rolling back. The delivery must be answered
    /// 500 with nothing committed (not 200 with nothing committed), and the sender's retry
    /// must apply it once.
    pub(super) async fn a_swallowed_statement_failure_of_the_last_effect_is_not_committed<
        X: svc_receiver::exactly_once::Transactional,
    >(
        driver: X,
        record: &BatchRecord,
        client: &tokio_postgres::Client,
        label: &str,
    ) {
        let id = format!("wh_swallowed_{label}");
        record
            .swallowing
            .lock()
            .expect("swallowing")
            .insert(id.clone());
        let clock = Arc::new(ManualClock::new(T));
        let addr = spawn(direct_router(driver, Arc::clone(&clock))).await;
        let http = super::client();
        let (header, body) = delivery(&id, T);
        let (status, _) = post(&http, addr, Some(&id), Some(&header), body).await;
        assert_eq!(status, 500, "{label}: the effect's statement failed");
        assert_eq!(effects(client, &id).await, 0, "{label}: nothing committed");
        record.swallowing.lock().expect("swallowing").clear();
        clock.set(T + 300);
        let (header, body) = delivery(&id, T + 300);
        let (status, _) = post(&http, addr, Some(&id), Some(&header), body).await;
        assert_eq!(status, 200, "{label}: the sender's retry");
        assert_eq!(effects(client, &id).await, 1, "{label}: exactly once");
    }

    /// A tokio-postgres driver of the batch test's effect in a fresh tenant schema (effects
    /// at once or not), with what its effects saw and a connection to the tenant's schema;
    /// `None` (skipped) without a test server.
    async fn batch_driver(
        test: &str,
        at_once: bool,
    ) -> Option<(
        PgExactlyOnce<BatchEffect>,
        Arc<BatchRecord>,
        tokio_postgres::Client,
    )> {
        let (url, schema, client) = tenant(test).await?;
        let database = PgDatabase::connect_in_schema(&url, &schema, 8)
            .await
            .expect("database");
        let inbox = PgInbox::new(database, quick_policy());
        let record = Arc::new(BatchRecord::default());
        let effect = BatchEffect {
            record: Arc::clone(&record),
        };
        let driver = if at_once {
            PgExactlyOnce::effects_at_once(inbox, effect)
        } else {
            PgExactlyOnce::new(inbox, effect)
        };
        Some((driver, record, client))
    }

    #[tokio::test]
    async fn postgres_a_failing_effect_in_a_batch_rolls_back_alone_and_the_others_commit_once() {
        let Some((driver, record, client)) = batch_driver("eo_pg_batch", false).await else {
            return;
        };
        batch_effect_runs_alone_in_its_savepoint(driver, &record, &client, "pg").await;
    }

    #[tokio::test]
    async fn postgres_effects_at_once_a_failing_effect_rolls_back_alone_and_the_others_commit_once()
    {
        let Some((driver, record, client)) = batch_driver("eo_pg_batch_at_once", true).await else {
            return;
        };
        batch_effect_runs_alone_in_its_savepoint(driver, &record, &client, "pg_at_once").await;
    }

    #[tokio::test]
    async fn postgres_an_effect_that_swallows_a_failed_statement_is_answered_500_and_not_committed()
    {
        let Some((driver, record, client)) = batch_driver("eo_pg_swallowed", false).await else {
            return;
        };
        a_swallowed_statement_failure_of_the_last_effect_is_not_committed(
            driver, &record, &client, "pg",
        )
        .await;
    }

    #[tokio::test]
    async fn postgres_effects_at_once_an_effect_that_swallows_a_failed_statement_is_not_committed()
    {
        let Some((driver, record, client)) = batch_driver("eo_pg_swallowed_at_once", true).await
        else {
            return;
        };
        a_swallowed_statement_failure_of_the_last_effect_is_not_committed(
            driver,
            &record,
            &client,
            "pg_at_once",
        )
        .await;
    }

    /// With effects at once and none failing, a batch commits on its first attempt: each
    /// effect runs once, several share one transaction, and each delivery's effect is there.
    #[tokio::test]
    async fn postgres_effects_at_once_commit_a_sound_batch_in_one_attempt() {
        let Some((driver, record, client)) = batch_driver("eo_pg_at_once_sound", true).await else {
            return;
        };
        let clock = Arc::new(ManualClock::new(T));
        let addr = spawn(direct_router(driver, Arc::clone(&clock))).await;
        let http = super::client();
        let ids: Vec<String> = (0..24).map(|n| format!("wh_sound_{n:02}")).collect();
        let posts: Vec<_> = ids
            .iter()
            .cloned()
            .map(|id| {
                let http = http.clone();
                tokio::spawn(async move {
                    let (header, body) = delivery(&id, T);
                    post(&http, addr, Some(&id), Some(&header), body).await.0
                })
            })
            .collect();
        for posted in posts {
            assert_eq!(posted.await.expect("post"), 200);
        }
        for id in &ids {
            assert_eq!(effects(&client, id).await, 1, "{id}");
        }
        let runs = record.runs.lock().expect("runs").clone();
        assert_eq!(runs.len(), ids.len(), "no effect ran twice: {runs:?}");
        let mut txids: Vec<i64> = runs.iter().map(|(_, txid)| *txid).collect();
        txids.sort_unstable();
        txids.dedup();
        assert!(
            txids.len() < ids.len(),
            "effects shared their batch's transaction: {runs:?}"
        );
        assert!(
            record.overlapped.load(std::sync::atomic::Ordering::SeqCst) > 0,
            "the effects of a batch ran at once, not one after the other"
        );
    }

    async fn effects(client: &tokio_postgres::Client, id: &str) -> i64 {
        client
            .query_one("SELECT COUNT(*) FROM effects WHERE webhook_id = $1", &[&id])
            .await
            .expect("count")
            .get(0)
    }

    #[tokio::test]
    async fn a_schema_name_outside_plain_lowercase_identifiers_is_refused_before_connecting() {
        for bad in [
            "",
            "Svc",
            "svc-receiver",
            "1svc",
            "svc;drop",
            "svc\"x",
            &"s".repeat(64),
        ] {
            match PgDatabase::connect_in_schema("postgres://nobody@127.0.0.1:1/none", bad, 1).await
            {
                Err(svc_receiver::dedup::StorageError::Config(message)) => {
                    assert!(message.contains("schema name"), "{message}");
                }
                other => panic!("{bad:?}: expected a configuration error, got {other:?}"),
            }
        }
    }

    /// Inbox mode: an effect that writes, runs a statement that fails, ignores the error and
    /// returns `Ok` fails its attempt with nothing committed (the mark of the entry, sent with
    /// the `COMMIT`, finds the transaction aborted), and the retry applies it once.
    #[tokio::test]
    async fn postgres_inbox_mode_an_effect_that_swallows_a_failed_statement_is_retried_and_applied_once()
     {
        let Some((driver, record, client)) = batch_driver("eo_pg_inbox_swallowed", false).await
        else {
            return;
        };
        let inbox = driver.inbox().clone();
        let id = "wh_inbox_swallowed";
        inbox
            .accept(&webhook_id(id), &[7; 32], &event_body(id), T)
            .await
            .expect("accept");
        record
            .swallowing
            .lock()
            .expect("swallowing")
            .insert(id.to_owned());
        assert_eq!(
            process_next(&inbox, &driver, T).await.expect("step"),
            Step::Settled(Settled::Retrying)
        );
        assert_eq!(effects(&client, id).await, 0, "nothing committed");
        record.swallowing.lock().expect("swallowing").clear();
        assert_eq!(
            process_next(&inbox, &driver, T + 3600).await.expect("step"),
            Step::Settled(Settled::Done)
        );
        assert_eq!(effects(&client, id).await, 1, "exactly once");
    }

    #[tokio::test]
    async fn postgres_inbox_mode_rolls_a_failed_effect_back_retries_it_and_applies_it_once() {
        let Some((inbox, _, client)) = tenant_inbox("eo_pg_inbox_fail", 4).await else {
            return;
        };
        let fail = Arc::new(AtomicBool::new(true));
        let handler = PgExactlyOnce::new(
            inbox.clone(),
            Effect {
                fail: Arc::clone(&fail),
            },
        );
        // The crate's tables are in its own schema, not the tenant's.
        let in_tenant: i64 = client
            .query_one(
                "SELECT COUNT(*) FROM information_schema.tables
                 WHERE table_schema = current_schema() AND table_name LIKE 'webhook%'",
                &[],
            )
            .await
            .expect("tables")
            .get(0);
        assert_eq!(in_tenant, 0);
        let id = webhook_id("wh_eo_pg_fail");
        inbox
            .accept(&id, &[1; 32], &event_body("call_fail"), T)
            .await
            .expect("accept");
        let step = process_next(&inbox, &handler, T).await.expect("step");
        assert_eq!(step, Step::Settled(Settled::Retrying));
        assert_eq!(effects(&client, "wh_eo_pg_fail").await, 0, "rolled back");
        fail.store(false, Ordering::SeqCst);
        assert_eq!(
            process_next(&inbox, &handler, T).await.expect("step"),
            Step::Empty
        );
        let step = process_next(&inbox, &handler, T + 1).await.expect("step");
        assert_eq!(step, Step::Settled(Settled::Done));
        assert_eq!(effects(&client, "wh_eo_pg_fail").await, 1);
        // A lost settlement, then a late failure settlement: it stays done, applied once.
        let entry = svc_receiver::inbox::InboxEntry {
            webhook_id: id.clone(),
            body: event_body("call_fail"),
            attempt: 1,
            received_at: T,
        };
        inbox
            .settle(&entry, Err("deadline".into()), T + 2)
            .await
            .expect("settle");
        assert_eq!(
            process_next(&inbox, &handler, T + 3600)
                .await
                .expect("step"),
            Step::Empty
        );
        assert_eq!(effects(&client, "wh_eo_pg_fail").await, 1);
    }

    /// What the statement-cache test's effect saw in one run: its backend, when that backend
    /// prepared the insert, and the locks the backend held (advisory ones, and `FOR UPDATE`'s
    /// on the inbox table).
    #[derive(Debug, Clone)]
    struct Run {
        backend: i32,
        prepared_at: String,
        advisory_locks: i64,
        inbox_row_locks: i64,
    }

    /// The effect of the statement-cache test: its insert through `PgTx::prepare_cached`,
    /// and per run what it saw ([`Run`]); fails its first run after the write.
    struct CachedEffect {
        runs: Arc<std::sync::Mutex<Vec<Run>>>,
        fail_once: Arc<AtomicBool>,
    }

    impl PgEffect for CachedEffect {
        type Error = tokio_postgres::Error;

        async fn apply(&self, received: &Received, tx: &PgTx<'_>) -> Result<(), Self::Error> {
            insert_effect(received, tx).await?;
            let row = tx
                .query_one(
                    "SELECT pg_backend_pid(),
                            (SELECT string_agg(prepare_time::TEXT, ',')
                             FROM pg_prepared_statements WHERE statement = $1),
                            (SELECT COUNT(*) FROM pg_locks
                             WHERE pid = pg_backend_pid() AND locktype = 'advisory'),
                            (SELECT COUNT(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                             WHERE l.pid = pg_backend_pid() AND c.relname = 'webhook_inbox'
                               AND l.mode = 'RowShareLock')",
                    &[&CACHED_INSERT],
                )
                .await?;
            let run = Run {
                backend: row.get(0),
                prepared_at: row.get(1),
                advisory_locks: row.get(2),
                inbox_row_locks: row.get(3),
            };
            self.runs.lock().expect("runs").push(run);
            if self.fail_once.swap(false, Ordering::SeqCst) {
                // Rolls the transaction back: the statement stays prepared all the same.
                tx.execute("SELECT 1 / 0", &[]).await?;
            }
            Ok(())
        }
    }

    /// An effect's statement through `PgTx::prepare_cached` is prepared once per pooled
    /// connection, in inbox and direct mode, also when the transaction it was first prepared
    /// in rolled back: every run on a backend sees the one statement prepared at one time.
    /// And the effect runs inside the transaction that holds the crate's locks (sent with
    /// `BEGIN`, in one round trip): the entry's row lock in inbox mode, the batch's advisory
    /// locks in direct mode.
    #[tokio::test]
    async fn postgres_an_effects_cached_statement_is_prepared_once_per_connection_in_both_modes() {
        let Some((inbox, _, client)) = tenant_inbox("eo_pg_cached", 2).await else {
            return;
        };
        let runs = Arc::new(std::sync::Mutex::new(Vec::new()));
        let effect = || CachedEffect {
            runs: Arc::clone(&runs),
            fail_once: Arc::new(AtomicBool::new(true)),
        };
        let handler = PgExactlyOnce::new(inbox.clone(), effect());
        for n in 0..3 {
            let id = webhook_id(&format!("wh_eo_cached_inbox_{n}"));
            inbox
                .accept(&id, &[n; 32], &event_body("call_cached"), T)
                .await
                .expect("accept");
        }
        let mut settled = Vec::new();
        for at in T..T + 10 {
            match process_next(&inbox, &handler, at).await.expect("step") {
                Step::Settled(done) => settled.push(done),
                Step::Empty if settled.len() >= 4 => break,
                _ => {}
            }
        }
        assert_eq!(
            settled.iter().filter(|s| **s == Settled::Done).count(),
            3,
            "{settled:?}"
        );
        let direct = PgExactlyOnce::new(inbox.clone(), effect());
        let addr = spawn(direct_router(direct, Arc::new(ManualClock::new(T)))).await;
        let http = super::client();
        let mut answers = Vec::new();
        for n in 0..4 {
            let id = format!("wh_eo_cached_direct_{n}");
            let (header, body) = delivery(&id, T);
            answers.push(post(&http, addr, Some(&id), Some(&header), body).await.0);
        }
        // The first one's failure rolled its batch's attempt back, and the careful run of
        // the batch ran it again (see "PostgreSQL direct mode" in the README).
        assert_eq!(answers, [200; 4]);
        for n in 0..3 {
            assert_eq!(
                effects(&client, &format!("wh_eo_cached_inbox_{n}")).await,
                1
            );
        }
        for n in 0..4 {
            assert_eq!(
                effects(&client, &format!("wh_eo_cached_direct_{n}")).await,
                1
            );
        }
        let runs = runs.lock().expect("runs").clone();
        assert_eq!(runs.len(), 9, "4 in inbox mode, 5 in direct mode: {runs:?}");
        let mut prepared: std::collections::HashMap<i32, &str> = std::collections::HashMap::new();
        for run in &runs {
            let at = &run.prepared_at;
            assert!(!at.contains(','), "prepared twice on one backend: {runs:?}");
            let first = prepared.entry(run.backend).or_insert(at.as_str());
            assert_eq!(
                *first, at,
                "prepared again on backend {}: {runs:?}",
                run.backend
            );
        }
        assert!(prepared.len() <= 2, "{runs:?}");
        let (in_inbox, direct) = runs.split_at(4);
        assert!(
            in_inbox.iter().all(|run| run.inbox_row_locks >= 1),
            "inbox mode: the entry's lock held: {runs:?}"
        );
        assert!(
            direct.iter().all(|run| run.advisory_locks >= 2),
            "direct mode: the id's and the signature's locks held: {runs:?}"
        );
    }

    /// The effect of the cancelled-transaction test: one row per run, then, while `stall`
    /// is set, a wait far past the worker's deadline.
    struct StallingEffect {
        stall: Arc<AtomicBool>,
    }

    impl PgEffect for StallingEffect {
        type Error = tokio_postgres::Error;

        async fn apply(&self, received: &Received, tx: &PgTx<'_>) -> Result<(), Self::Error> {
            insert_effect(received, tx).await?;
            if self.stall.swap(false, Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            Ok(())
        }
    }

    /// An inbox-mode run cancelled at the worker's deadline, its effect written and its
    /// transaction open, leaves nothing of it behind: its connection (the only one of the
    /// tenant's pool) is not handed to the next entry's run with the transaction still open,
    /// where the next `COMMIT` would commit the cancelled effect without its entry's mark (and
    /// the entry's retry would then apply it a second time).
    #[tokio::test]
    async fn postgres_inbox_mode_a_run_cancelled_mid_transaction_leaves_nothing_behind() {
        let Some((url, schema, client)) = tenant("eo_pg_cancelled").await else {
            return;
        };
        // A short answer timeout: without the fix, the next run waits on the cancelled one's
        // row lock, and fails after it rather than after the default 60 s.
        let database = PgDatabase::connect_in_schema(&url, &schema, 1)
            .await
            .expect("database")
            .with_answer_timeout(Duration::from_secs(5));
        let inbox = PgInbox::new(database, quick_policy());
        let stall = Arc::new(AtomicBool::new(true));
        let handler = PgExactlyOnce::new(
            inbox.clone(),
            StallingEffect {
                stall: Arc::clone(&stall),
            },
        );
        for (n, id) in [(1, "wh_eo_cancelled_a"), (2, "wh_eo_cancelled_b")] {
            inbox
                .accept(&webhook_id(id), &[n; 32], &event_body(id), T)
                .await
                .expect("accept");
        }
        let started = Instant::now();
        let step = process_next(&inbox, &handler, T).await.expect("step");
        assert_eq!(
            step,
            Step::Settled(Settled::Retrying),
            "cancelled at its deadline"
        );
        assert!(started.elapsed() < Duration::from_secs(30));
        assert!(!stall.load(Ordering::SeqCst), "the stalling run ran");
        // The other entry, on the pool's one connection, then the cancelled one's retry.
        let mut settled = Vec::new();
        for at in T..T + 10 {
            if let Step::Settled(done) = process_next(&inbox, &handler, at).await.expect("step") {
                settled.push(done);
            }
        }
        assert_eq!(settled, [Settled::Done, Settled::Done]);
        assert_eq!(
            effects(&client, "wh_eo_cancelled_a").await,
            1,
            "exactly once"
        );
        assert_eq!(
            effects(&client, "wh_eo_cancelled_b").await,
            1,
            "exactly once"
        );
    }

    /// What the next run of an [`EndingEffect`] (or the sqlx one) sends after its write: a
    /// `ROLLBACK` of its own, once.
    #[derive(Default)]
    pub(super) struct Ending(AtomicBool);

    impl Ending {
        pub(super) fn arm(&self) {
            self.0.store(true, Ordering::SeqCst);
        }

        pub(super) fn take(&self) -> bool {
            self.0.swap(false, Ordering::SeqCst)
        }
    }

    /// One row per run; then, when armed, a `ROLLBACK` of its own (which the README forbids).
    struct EndingEffect {
        ending: Arc<Ending>,
    }

    impl PgEffect for EndingEffect {
        type Error = tokio_postgres::Error;

        async fn apply(&self, received: &Received, tx: &PgTx<'_>) -> Result<(), Self::Error> {
            insert_effect(received, tx).await?;
            if self.ending.take() {
                tx.batch_execute("ROLLBACK").await?;
            }
            Ok(())
        }
    }

    /// An effect that rolls the crate's transaction back itself (its write undone) and returns
    /// `Ok`: the entry's mark or the batch's record, which would then run on their own outside
    /// the transaction, write nothing, so the event is not recorded as done with its effect
    /// lost; it is run again and applied once, in inbox mode and in direct mode.
    pub(super) async fn an_effect_that_rolls_back_itself_is_not_recorded_as_done<X>(
        inbox: &PgInbox,
        driver: X,
        ending: &Ending,
        client: &tokio_postgres::Client,
        label: &str,
    ) where
        X: svc_receiver::exactly_once::Transactional + svc_receiver::EventHandler + Clone,
    {
        let in_inbox = format!("wh_eo_{label}_ended_inbox");
        inbox
            .accept(
                &webhook_id(&in_inbox),
                &[7; 32],
                &event_body("call_ended"),
                T,
            )
            .await
            .expect("accept");
        ending.arm();
        let step = process_next(inbox, &driver, T).await.expect("step");
        assert_eq!(step, Step::Settled(Settled::Retrying), "not marked done");
        assert_eq!(effects(client, &in_inbox).await, 0, "rolled back");
        let step = process_next(inbox, &driver, T + 1).await.expect("step");
        assert_eq!(step, Step::Settled(Settled::Done));
        assert_eq!(effects(client, &in_inbox).await, 1, "applied once");

        let direct = format!("wh_eo_{label}_ended_direct");
        let addr = spawn(direct_router(driver, Arc::new(ManualClock::new(T)))).await;
        let http = super::client();
        let (header, body) = delivery(&direct, T);
        ending.arm();
        let (status, _) = post(&http, addr, Some(&direct), Some(&header), body.clone()).await;
        // The fast run's record found the transaction gone and wrote nothing; the careful run
        // ran the effect again, in a transaction that committed with the record.
        assert_eq!(status, 200);
        assert_eq!(effects(client, &direct).await, 1, "applied once");
        let (status, _) = post(&http, addr, Some(&direct), Some(&header), body).await;
        assert_eq!(status, 200, "a duplicate");
        assert_eq!(effects(client, &direct).await, 1, "applied once");
    }

    #[tokio::test]
    async fn postgres_an_effect_that_rolls_back_itself_is_not_recorded_as_done() {
        let Some((inbox, _, client)) = tenant_inbox("eo_pg_ended", 4).await else {
            return;
        };
        let ending = Arc::new(Ending::default());
        let driver = PgExactlyOnce::new(
            inbox.clone(),
            EndingEffect {
                ending: Arc::clone(&ending),
            },
        );
        an_effect_that_rolls_back_itself_is_not_recorded_as_done(
            &inbox, driver, &ending, &client, "pg",
        )
        .await;
    }

    /// Direct mode on a database that stops answering (a proxy that stalls every connection):
    /// each batch, the tenant's effect included, ends within the database's answer timeout
    /// (not the route's longer handler deadline), so every delivery in it is answered (not
    /// 200: the sender retries) and its stalled connection closed; once the network is back
    /// the next deliveries commit on fresh connections, once each.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_direct_mode_on_a_stalled_database_answers_in_time_and_recovers() {
        let Some(behind) = tenant_behind_proxy("eo_pg_direct_stall").await else {
            return;
        };
        let driver = PgExactlyOnce::new(
            PgInbox::new(behind.database, quick_policy()),
            Effect {
                fail: Arc::new(AtomicBool::new(false)),
            },
        );
        stalled_database_answers_in_time_and_recovers(driver, &behind.proxy, &behind.client, "pg")
            .await;
    }

    /// A tenant (see [`tenant`]) reached through a proxy, for the stalled-database tests.
    pub(super) struct BehindProxy {
        pub(super) proxy: svc_fixtures::proxy::Proxy,
        /// The tenant's URL through the proxy (for the sqlx driver's own pool).
        #[cfg_attr(not(feature = "sqlx-postgres"), allow(dead_code))]
        pub(super) proxied: String,
        /// The crate's tables, through the proxy, with an answer timeout of 1 s.
        pub(super) database: PgDatabase,
        /// A client on the tenant's schema, not through the proxy.
        pub(super) client: tokio_postgres::Client,
    }

    pub(super) async fn tenant_behind_proxy(test: &str) -> Option<BehindProxy> {
        let (url, schema, client) = tenant(test).await?;
        let proxy = svc_fixtures::proxy::Proxy::start(svc_fixtures::postgres::upstream(&url))
            .await
            .expect("proxy");
        let proxied = svc_fixtures::postgres::via_proxy(&url, proxy.addr());
        let database = PgDatabase::connect_in_schema(&proxied, &schema, 8)
            .await
            .expect("database")
            .with_answer_timeout(std::time::Duration::from_secs(1));
        Some(BehindProxy {
            proxy,
            proxied,
            database,
            client,
        })
    }

    /// Direct mode of `driver` (whose connections go through `proxy`, with an answer timeout
    /// of 1 s): one delivery before the stall, 12 at once during it (more than batch slots),
    /// all answered within a few seconds and none acknowledged, then one after it, committed
    /// once.
    pub(super) async fn stalled_database_answers_in_time_and_recovers<
        X: svc_receiver::exactly_once::Transactional,
    >(
        driver: X,
        proxy: &svc_fixtures::proxy::Proxy,
        client: &tokio_postgres::Client,
        label: &str,
    ) {
        use svc_fixtures::proxy::Fault;

        let addr = spawn(direct_router(driver, Arc::new(ManualClock::new(T)))).await;
        let http = super::client();
        let deliver = |id: String| {
            let http = &http;
            async move {
                let (header, body) = delivery(&id, T);
                post(http, addr, Some(&id), Some(&header), body).await.0
            }
        };
        let (before, after) = (
            format!("wh_eo_{label}_stall_before"),
            format!("wh_eo_{label}_stall_after"),
        );
        assert_eq!(deliver(before.clone()).await, 200);

        proxy.set(Fault::StallAfter(0));
        // More deliveries than batch slots, at once.
        let started = std::time::Instant::now();
        let statuses = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            futures_util::future::join_all(
                (0..12).map(|n| deliver(format!("wh_eo_{label}_stalled_{n:02}"))),
            ),
        )
        .await
        .expect("every delivery answered instead of waiting forever");
        assert!(
            statuses.iter().all(|status| *status >= 500),
            "nothing acknowledged while the database cannot answer: {statuses:?}"
        );
        // Within the answer timeout (1 s) and a little, not the route's handler deadline (8 s).
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(5), "{took:?}");

        proxy.set(Fault::Pass);
        assert_eq!(deliver(after.clone()).await, 200);
        assert_eq!(effects(client, &before).await, 1);
        assert_eq!(effects(client, &after).await, 1);
    }

    #[tokio::test]
    async fn postgres_direct_mode_rolls_a_failed_effect_back_and_the_senders_retry_applies_it_once()
    {
        let Some((inbox, _, client)) = tenant_inbox("eo_pg_direct_fail", 4).await else {
            return;
        };
        let fail = Arc::new(AtomicBool::new(true));
        let driver = PgExactlyOnce::new(
            inbox.clone(),
            Effect {
                fail: Arc::clone(&fail),
            },
        );
        let clock = Arc::new(ManualClock::new(T));
        let addr = spawn(direct_router(driver, Arc::clone(&clock))).await;
        let http = super::client();
        let (header, body) = delivery("wh_eo_pg_direct", T);
        let (status, _) = post(&http, addr, Some("wh_eo_pg_direct"), Some(&header), body).await;
        assert_eq!(status, 500);
        assert_eq!(effects(&client, "wh_eo_pg_direct").await, 0);
        fail.store(false, Ordering::SeqCst);
        clock.set(T + 300);
        let (header, body) = delivery("wh_eo_pg_direct", T + 300);
        let (status, _) = post(
            &http,
            addr,
            Some("wh_eo_pg_direct"),
            Some(&header),
            body.clone(),
        )
        .await;
        assert_eq!(status, 200);
        let (status, _) = post(
            &http,
            addr,
            Some("wh_eo_pg_direct"),
            Some(&header),
            body.clone(),
        )
        .await;
        assert_eq!(status, 200);
        let (status, _) = post(&http, addr, Some("wh_eo_pg_other"), Some(&header), body).await;
        assert_eq!(status, 401);
        assert_eq!(effects(&client, "wh_eo_pg_direct").await, 1);
        assert_eq!(effects(&client, "wh_eo_pg_other").await, 0);
        assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_effects_survive_sigkill_before_and_after_the_commit_exactly_once() {
        crash_tests("postgres").await;
    }

    #[cfg(feature = "sqlx-postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlx_postgres_effects_survive_sigkill_before_and_after_the_commit_exactly_once() {
        crash_tests("sqlx").await;
    }

    /// Every crash scenario against the PostgreSQL driver `driver` (`postgres` or `sqlx`).
    async fn crash_tests(driver: &str) {
        let Some((url, schema, client)) = tenant(&format!("eo_{driver}_kill")).await else {
            return;
        };
        // Migrated once here, so that the children only open it.
        PgDatabase::connect_in_schema(&url, &schema, 1)
            .await
            .expect("database");
        let client = Arc::new(client);
        for mode in ["direct", "inbox"] {
            for pause in [Pause::BeforeCommit, Pause::AfterCommit] {
                let id = format!("wh_{driver}kill_{mode}_{}", pause.as_str());
                let counter = Arc::clone(&client);
                let counted = id.clone();
                let handle = tokio::runtime::Handle::current();
                crash_and_retry(driver, &url, &schema, mode, pause, &id, move || {
                    let counter = Arc::clone(&counter);
                    let counted = counted.clone();
                    tokio::task::block_in_place(|| {
                        handle.block_on(async move { effects(&counter, &counted).await })
                    })
                })
                .await;
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn eight_concurrent_deliveries_of_one_id_across_three_processes_make_one_effect() {
        let Some((url, schema, client)) = tenant("eo_pg_three").await else {
            return;
        };
        PgDatabase::connect_in_schema(&url, &schema, 1)
            .await
            .expect("database");
        let http = super::client();
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
            for post in posts {
                assert_eq!(post.await.expect("post"), 200, "{mode}");
            }
            let deadline = Instant::now() + Duration::from_secs(20);
            while effects(&client, &id).await < 1 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
            assert_eq!(effects(&client, &id).await, 1, "{mode}");
            for child in children {
                child.kill();
            }
        }
    }
}
