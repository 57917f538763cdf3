//! `SqliteRecorder`, and both modes on SQLite in process.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use rusqlite::Connection;
use svc_contract::ManualClock;
use svc_receiver::axum::{WebhookReceiver, webhook_route};
use svc_receiver::dedup::DedupPolicy;
use svc_receiver::exactly_once::Recorded;
use svc_receiver::inbox::{Accepted, Inbox, InboxAdmin, Settled, Step, process_next};
use svc_receiver::sqlite::{SqliteDedupStore, SqliteInbox, SqliteRecorder};

use super::{SqliteTenant, delivery, quick_policy, received, verified};
use crate::helpers::{T, client, post, spawn, verifier, webhook_id};

#[test]
fn record_is_fresh_once_committed_duplicate_after_and_fresh_again_after_a_rollback() {
    let dir = tempfile::tempdir().expect("dir");
    let mut conn = Connection::open(dir.path().join("app.db")).expect("open");
    let recorder = SqliteRecorder::install(&conn).expect("install");
    let delivery = received("wh_rec", T);

    let tx = conn.transaction().expect("tx");
    assert_eq!(
        recorder.record(&tx, &delivery).expect("record"),
        Recorded::Fresh
    );
    // Within the same transaction it is recorded already.
    assert_eq!(
        recorder.record(&tx, &delivery).expect("record"),
        Recorded::Duplicate
    );
    tx.rollback().expect("rollback");

    let tx = conn.transaction().expect("tx");
    assert_eq!(
        recorder.record(&tx, &delivery).expect("record"),
        Recorded::Fresh
    );
    tx.commit().expect("commit");

    let tx = conn.transaction().expect("tx");
    assert_eq!(
        recorder.record(&tx, &delivery).expect("record"),
        Recorded::Duplicate
    );
    drop(tx);

    // Installing again on the same file keeps what is recorded.
    let recorder = SqliteRecorder::install(&conn).expect("install again");
    let tx = conn.transaction().expect("tx");
    assert_eq!(
        recorder.record(&tx, &delivery).expect("record"),
        Recorded::Duplicate
    );
}

#[test]
fn record_outside_a_transaction_is_refused_and_records_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let conn = Connection::open(dir.path().join("app.db")).expect("open");
    let recorder = SqliteRecorder::install(&conn).expect("install");
    let err = recorder
        .record(&conn, &received("wh_loose", T))
        .expect_err("no transaction");
    assert!(
        err.to_string().contains("needs an open transaction"),
        "{err}"
    );
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM webhook_recorded", [], |row| {
            row.get(0)
        })
        .expect("count");
    assert_eq!(rows, 0);
}

#[test]
fn recorded_ids_past_the_retention_are_forgotten() {
    let dir = tempfile::tempdir().expect("dir");
    let mut conn = Connection::open(dir.path().join("app.db")).expect("open");
    let clock = Arc::new(ManualClock::new(T));
    let recorder = SqliteRecorder::install(&conn)
        .expect("install")
        .with_retention(std::time::Duration::from_secs(3600))
        .with_clock(Arc::clone(&clock));
    // Received long before it is recorded (a dead letter requeued days later, say): the
    // retention counts from the record, not from the delivery.
    let old = received("wh_old", T - 5 * 86_400);
    let tx = conn.transaction().expect("tx");
    assert!(recorder.record(&tx, &old).expect("record").is_fresh());
    tx.commit().expect("commit");
    // A minute later a record prunes what is past the retention: not that one.
    clock.set(T + 120);
    let tx = conn.transaction().expect("tx");
    assert!(
        recorder
            .record(&tx, &received("wh_soon", T + 120))
            .expect("record")
            .is_fresh()
    );
    assert_eq!(
        recorder.record(&tx, &old).expect("record"),
        Recorded::Duplicate
    );
    tx.commit().expect("commit");
    // Two hours later (and past the once-a-minute gate) a record prunes both.
    clock.set(T + 7200);
    let tx = conn.transaction().expect("tx");
    assert!(
        recorder
            .record(&tx, &received("wh_new", T + 7200))
            .expect("record")
            .is_fresh()
    );
    tx.commit().expect("commit");
    let left: Vec<String> = conn
        .prepare("SELECT id FROM webhook_recorded ORDER BY id")
        .expect("prepare")
        .query_map([], |row| row.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(left, ["wh_new"]);
}

/// An inbox in its own file beside the tenant's database.
fn tenant_and_inbox(dir: &tempfile::TempDir) -> (SqliteTenant, SqliteInbox) {
    let tenant = SqliteTenant::open(&dir.path().join("app.db"));
    let inbox = SqliteInbox::open(dir.path().join("webhooks.db"), quick_policy()).expect("inbox");
    (tenant, inbox)
}

/// Stores a delivery of `id` signed at `now` in the inbox.
async fn accept(inbox: &SqliteInbox, id: &str, now: i64) -> Accepted {
    let (signature, body) = verified(id, now);
    inbox
        .accept(&webhook_id(id), &signature, &body, now)
        .await
        .expect("accept")
}

#[tokio::test]
async fn inbox_mode_rolls_a_failed_transaction_back_retries_it_and_writes_once() {
    let dir = tempfile::tempdir().expect("dir");
    let (tenant, inbox) = tenant_and_inbox(&dir);
    let handler = tenant.handler();
    assert_eq!(accept(&inbox, "wh_fail", T).await, Accepted::Stored);

    tenant.fail.store(true, Ordering::SeqCst);
    let step = process_next(&inbox, &handler, &ManualClock::new(T))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Retrying));
    assert_eq!(tenant.effects("wh_fail"), 0, "rolled back with the record");

    tenant.fail.store(false, Ordering::SeqCst);
    let step = process_next(&inbox, &handler, &ManualClock::new(T + 60))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Done));
    assert_eq!(tenant.effects("wh_fail"), 1);
    assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 0));
}

#[tokio::test]
async fn inbox_mode_a_failure_reported_after_the_commit_is_retried_without_writing_again() {
    let dir = tempfile::tempdir().expect("dir");
    let (tenant, inbox) = tenant_and_inbox(&dir);
    let handler = tenant.handler();
    accept(&inbox, "wh_lost", T).await;

    // Committed, then the worker hears of a failure (as after a crash before the settlement).
    tenant.fail_after_commit.store(true, Ordering::SeqCst);
    let step = process_next(&inbox, &handler, &ManualClock::new(T))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Retrying));
    assert_eq!(tenant.effects("wh_lost"), 1);

    tenant.fail_after_commit.store(false, Ordering::SeqCst);
    let step = process_next(&inbox, &handler, &ManualClock::new(T + 60))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Done));
    assert_eq!(tenant.effects("wh_lost"), 1, "recorded: written once");
}

#[tokio::test]
async fn inbox_mode_a_dead_letter_requeued_writes_once() {
    let dir = tempfile::tempdir().expect("dir");
    let tenant = SqliteTenant::open(&dir.path().join("app.db"));
    let policy = svc_receiver::inbox::InboxPolicy {
        max_attempts: 2,
        ..quick_policy()
    };
    let inbox = SqliteInbox::open(dir.path().join("webhooks.db"), policy).expect("inbox");
    let handler = tenant.handler();
    accept(&inbox, "wh_dead", T).await;
    tenant.fail.store(true, Ordering::SeqCst);
    process_next(&inbox, &handler, &ManualClock::new(T))
        .await
        .expect("step");
    let step = process_next(&inbox, &handler, &ManualClock::new(T + 60))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Dead));
    assert_eq!(tenant.effects("wh_dead"), 0);

    tenant.fail.store(false, Ordering::SeqCst);
    assert!(
        inbox
            .requeue_dead_letter(&webhook_id("wh_dead"), T + 120)
            .await
            .expect("requeue")
    );
    let step = process_next(&inbox, &handler, &ManualClock::new(T + 120))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Done));
    assert_eq!(tenant.effects("wh_dead"), 1);
}

/// The direct route over a dedup store in its own file, with the tenant's handler.
fn direct_router(
    tenant: &SqliteTenant,
    store: SqliteDedupStore,
    clock: Arc<ManualClock>,
) -> Router {
    let receiver = WebhookReceiver::new(verifier(), store, tenant.handler()).with_clock(clock);
    Router::new().route("/webhooks", webhook_route(receiver))
}

/// A tenant's database, a dedup store beside it, and the direct route over both on a manual
/// clock at `T`: (their directory, the tenant, the clock, the route's address).
async fn direct_tenant() -> (
    tempfile::TempDir,
    SqliteTenant,
    Arc<ManualClock>,
    std::net::SocketAddr,
) {
    let dir = tempfile::tempdir().expect("dir");
    let tenant = SqliteTenant::open(&dir.path().join("app.db"));
    let store = SqliteDedupStore::open(dir.path().join("webhooks.db"), DedupPolicy::default())
        .expect("store");
    let clock = Arc::new(ManualClock::new(T));
    let addr = spawn(direct_router(&tenant, store, Arc::clone(&clock))).await;
    (dir, tenant, clock, addr)
}

/// Posts `signed` (a [`delivery`]: signature header, body) to `addr` under `id`; the status.
async fn post_signed(
    client: &reqwest::Client,
    addr: std::net::SocketAddr,
    id: &str,
    signed: &(String, Vec<u8>),
) -> u16 {
    let (header, body) = signed;
    post(client, addr, Some(id), Some(header), body.clone())
        .await
        .0
}

#[tokio::test]
async fn direct_mode_answers_200_after_the_commit_and_the_senders_retry_of_a_failure_writes_once() {
    let (_dir, tenant, clock, addr) = direct_tenant().await;
    let client = client();

    tenant.fail.store(true, Ordering::SeqCst);
    let first = delivery("wh_direct", T);
    assert_eq!(post_signed(&client, addr, "wh_direct", &first).await, 500);
    assert_eq!(tenant.effects("wh_direct"), 0);

    // The sender's retry, five minutes later, signed afresh.
    tenant.fail.store(false, Ordering::SeqCst);
    clock.set(T + 300);
    let retry = delivery("wh_direct", T + 300);
    assert_eq!(post_signed(&client, addr, "wh_direct", &retry).await, 200);
    assert_eq!(tenant.effects("wh_direct"), 1);

    // Another copy is a duplicate; the same signature under another id a replay.
    assert_eq!(post_signed(&client, addr, "wh_direct", &retry).await, 200);
    assert_eq!(post_signed(&client, addr, "wh_other", &retry).await, 401);
    assert_eq!(tenant.effects("wh_direct"), 1);
    assert_eq!(tenant.effects("wh_other"), 0);
}

#[tokio::test]
async fn direct_mode_remembers_the_signature_of_a_delivery_whose_handler_failed() {
    let (_dir, tenant, clock, addr) = direct_tenant().await;
    let client = client();

    tenant.fail.store(true, Ordering::SeqCst);
    let first = delivery("wh_failed", T);
    assert_eq!(post_signed(&client, addr, "wh_failed", &first).await, 500);

    // The same bytes re-posted under a fresh id inside the tolerance: a replay, though the
    // first delivery's handler failed; nothing runs.
    tenant.fail.store(false, Ordering::SeqCst);
    clock.set(T + 60);
    assert_eq!(post_signed(&client, addr, "wh_fresh_id", &first).await, 401);
    assert_eq!(tenant.effects("wh_fresh_id"), 0);

    // The sender's own retry of the failed delivery is processed.
    clock.set(T + 300);
    let retry = delivery("wh_failed", T + 300);
    assert_eq!(post_signed(&client, addr, "wh_failed", &retry).await, 200);
    assert_eq!(tenant.effects("wh_failed"), 1);
}

// ---- a model of random interleavings ----

/// One step of the model.
#[derive(Debug, Clone)]
enum Op {
    /// The sender delivers event `id` (again): to the direct route, or to the inbox route;
    /// `fail`: the tenant's transaction fails before its commit.
    Deliver { id: u8, direct: bool, fail: bool },
    /// A worker takes the next due entry; `fail`: the tenant's transaction fails before its
    /// commit; `crash_before_commit`: the process dies with the entry in hand, before any
    /// commit; `lost_after_commit`: the tenant commits, then the worker learns of a failure
    /// (or dies) instead of settling it done.
    Work {
        fail: bool,
        crash_before_commit: bool,
        lost_after_commit: bool,
    },
    /// Time passes.
    Advance { secs: i64 },
    /// The process restarts: every handle dropped, the files opened again.
    Restart,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u8..4, any::<bool>(), proptest::bool::weighted(0.3))
            .prop_map(|(id, direct, fail)| Op::Deliver { id, direct, fail }),
        4 => (proptest::bool::weighted(0.3), proptest::bool::weighted(0.15), proptest::bool::weighted(0.15))
            .prop_map(|(fail, crash_before_commit, lost_after_commit)| Op::Work { fail, crash_before_commit, lost_after_commit }),
        2 => (0i64..400).prop_map(|secs| Op::Advance { secs }),
        1 => Just(Op::Restart),
    ]
}

/// The receiver of the model: the tenant, the inbox, the direct route.
struct Model {
    dir: std::path::PathBuf,
    clock: Arc<ManualClock>,
    tenant: SqliteTenant,
    inbox: SqliteInbox,
    router: Router,
}

impl Model {
    fn open(dir: &std::path::Path, clock: &Arc<ManualClock>) -> Self {
        let tenant = SqliteTenant::open(&dir.join("app.db"));
        let inbox = SqliteInbox::open(dir.join("inbox.db"), quick_policy()).expect("inbox");
        let policy = DedupPolicy {
            in_flight_lease: std::time::Duration::from_secs(60),
            ..DedupPolicy::default()
        };
        let store = SqliteDedupStore::open(dir.join("dedup.db"), policy).expect("store");
        let router = direct_router(&tenant, store, Arc::clone(clock));
        Self {
            dir: dir.to_owned(),
            clock: Arc::clone(clock),
            tenant,
            inbox,
            router,
        }
    }

    fn now(&self) -> i64 {
        svc_contract::Clock::now(&*self.clock)
    }

    /// One delivery of event `id`; whether the sender was answered 200.
    async fn deliver(&self, id: &str, direct: bool) -> bool {
        let now = self.now();
        if direct {
            use tower::ServiceExt;
            let (header, body) = delivery(id, now);
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
            accept(&self.inbox, id, now).await != Accepted::Replayed
        }
    }

    async fn work(&self, crash_before_commit: bool, lost_after_commit: bool) {
        let now = self.now();
        if crash_before_commit {
            // Handed out, then the process dies: nothing of the tenant's was committed.
            let _ = self.inbox.next_due(now).await.expect("next");
        } else {
            self.tenant
                .fail_after_commit
                .store(lost_after_commit, Ordering::SeqCst);
            process_next(&self.inbox, &self.tenant.handler(), &ManualClock::new(now))
                .await
                .expect("step");
        }
    }
}

#[test]
fn random_deliveries_retries_failures_and_crashes_end_with_each_effect_exactly_once() {
    use proptest::prelude::*;
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(40));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runner
        .run(&proptest::collection::vec(op(), 1..40), |ops| {
            runtime.block_on(async {
                let dir = tempfile::tempdir().expect("dir");
                let clock = Arc::new(ManualClock::new(T));
                let mut model = Model::open(dir.path(), &clock);
                let mut delivered = [false; 4];
                let mut acknowledged = [false; 4];
                for op in &ops {
                    match *op {
                        Op::Deliver { id, direct, fail } => {
                            model.tenant.fail.store(fail, Ordering::SeqCst);
                            delivered[usize::from(id)] = true;
                            if model.deliver(&format!("wh_model_{id}"), direct).await {
                                acknowledged[usize::from(id)] = true;
                            }
                        }
                        Op::Work {
                            fail,
                            crash_before_commit,
                            lost_after_commit,
                        } => {
                            model.tenant.fail.store(fail, Ordering::SeqCst);
                            model.work(crash_before_commit, lost_after_commit).await;
                            if crash_before_commit {
                                model = Model::open(&model.dir, &clock);
                            }
                        }
                        Op::Advance { secs } => clock.set(model.now() + secs),
                        Op::Restart => model = Model::open(&model.dir, &clock),
                    }
                    model.tenant.fail.store(false, Ordering::SeqCst);
                    model
                        .tenant
                        .fail_after_commit
                        .store(false, Ordering::SeqCst);
                }
                // The sender retries every delivery not yet acknowledged until it is (to the
                // inbox route), and the workers drain the inbox once every lease and backoff
                // has run out.
                for id in 0..4u8 {
                    if delivered[usize::from(id)] && !acknowledged[usize::from(id)] {
                        assert!(model.deliver(&format!("wh_model_{id}"), false).await);
                    }
                }
                let handler = model.tenant.handler();
                for _ in 0..3 {
                    clock.set(model.now() + 7200);
                    while process_next(&model.inbox, &handler, &ManualClock::new(model.now()))
                        .await
                        .expect("step")
                        != Step::Empty
                    {}
                }
                for id in 0..4u8 {
                    let effects = model.tenant.effects(&format!("wh_model_{id}"));
                    let expected = i64::from(delivered[usize::from(id)]);
                    assert_eq!(effects, expected, "event {id} after {ops:?}");
                }
            });
            Ok(())
        })
        .expect("every interleaving ends with each effect exactly once");
}
