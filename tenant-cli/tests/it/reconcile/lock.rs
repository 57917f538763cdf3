//! Overlapping runs on cron: while another run holds the store's lock a run exits 75 at once,
//! or with `--wait` waits for it and then runs.

use std::time::{Duration, Instant};

use svc_fixtures::calls::ROLEPLAY;
use svc_store::RunLock;

use super::{fake, hours_ago, stored_details};

#[tokio::test]
async fn a_second_run_while_the_lock_is_held_exits_75_at_once() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, hours_ago(1));
    let _held = RunLock::acquire(&(&fake.store).into(), Duration::ZERO)
        .await
        .expect("the first run's lock");
    let started = Instant::now();
    let run = fake.reconcile(&[]).await;
    assert_eq!(run.code, 75, "{run:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "at once, not after a wait"
    );
    assert!(run.stderr.contains("lock"), "{}", run.stderr);
    assert_eq!(fake.calls.detail_requests(), 0);
    assert!(fake.calls.list_requests().is_empty(), "nothing listed");
}

#[tokio::test]
async fn with_wait_a_second_run_waits_for_the_lock_and_then_runs() {
    let fake = fake().await;
    let id = fake.calls.add(ROLEPLAY, hours_ago(1));
    let held = RunLock::acquire(&(&fake.store).into(), Duration::ZERO)
        .await
        .expect("the first run's lock");
    let started = Instant::now();
    let (run, ()) = tokio::join!(fake.reconcile(&["--wait", "5s"]), async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(held);
    });
    assert_eq!(run.code, 0, "{run:?}");
    assert!(started.elapsed() >= Duration::from_secs(1), "it waited");
    assert!(stored_details(&fake.store).contains_key(&id));
}
