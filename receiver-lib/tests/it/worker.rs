//! Inbox workers facing user code that fails badly: an error with a chain of context, a
//! panic, a handler that never finishes. Each fails its own entry; the loops go on.

use std::sync::Arc;
use std::time::Duration;

use svc_contract::WebhookId;
use svc_contract::{Clock, ManualClock};
use svc_receiver::Received;
use svc_receiver::inbox::{
    Inbox, InboxAdmin, InboxPolicy, Settled, Step, process_next, run_inbox_workers,
};
use svc_receiver::sqlite::SqliteInbox;
use tokio::sync::{mpsc, oneshot};

use crate::helpers::{T, call_id_reporter, event_body};

/// An inbox in a temp dir holding one pending delivery per call id, in that order.
async fn inbox_with(policy: InboxPolicy, call_ids: &[&str]) -> (tempfile::TempDir, SqliteInbox) {
    let dir = tempfile::tempdir().expect("dir");
    let inbox = SqliteInbox::open(dir.path().join("inbox.db"), policy).expect("open");
    for (n, call_id) in call_ids.iter().enumerate() {
        let id = WebhookId::parse(format!("wh_{call_id}").as_bytes()).expect("id");
        let signature = [u8::try_from(n).expect("few"); 32];
        inbox
            .accept(&id, &signature, &event_body(call_id), T)
            .await
            .expect("accept");
    }
    (dir, inbox)
}

/// The dead letters as (webhook id, last error).
async fn dead_letters(inbox: &SqliteInbox) -> Vec<(String, String)> {
    let dead = inbox.dead_letters().await.expect("dead letters");
    dead.into_iter()
        .map(|letter| (letter.webhook_id.as_str().to_owned(), letter.last_error))
        .collect()
}

/// A bound on what a test waits for, so a regression fails instead of hanging.
async fn within<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within 10 s"))
}

#[tokio::test]
async fn a_failed_entry_keeps_the_whole_error_chain_as_its_last_error() {
    let policy = InboxPolicy {
        max_attempts: 1,
        ..InboxPolicy::default()
    };
    let (_dir, inbox) = inbox_with(policy, &["chain"]).await;
    let handler = |_: Received| async {
        Err::<(), _>(anyhow::anyhow!("connection refused").context("saving the score"))
    };
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T))
            .await
            .expect("step"),
        Step::Settled(Settled::Dead)
    );
    assert_eq!(
        dead_letters(&inbox).await,
        [(
            "wh_chain".to_owned(),
            "saving the score: connection refused".to_owned()
        )]
    );
}

async fn panics(received: Received) -> Result<(), String> {
    panic!("no score for {}", received.event.call_id)
}

#[tokio::test]
async fn a_panicking_handler_fails_its_entry_which_is_retried_then_dead() {
    let policy = InboxPolicy {
        max_attempts: 2,
        ..InboxPolicy::default()
    };
    let (_dir, inbox) = inbox_with(policy, &["panics"]).await;
    let handler = panics;
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T))
            .await
            .expect("step"),
        Step::Settled(Settled::Retrying)
    );
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T + 5))
            .await
            .expect("step"),
        Step::Settled(Settled::Dead)
    );
    assert_eq!(
        dead_letters(&inbox).await,
        [(
            "wh_panics".to_owned(),
            "handler panicked: no score for panics".to_owned()
        )]
    );
}

#[tokio::test]
async fn a_panic_in_one_worker_stops_neither_it_nor_the_others() {
    let (_dir, inbox) = inbox_with(InboxPolicy::default(), &["first", "second", "third"]).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    // The first delivery panics on its first attempt only; every success is reported.
    let handler = move |received: Received| {
        let tx = tx.clone();
        async move {
            assert!(
                received.event.call_id != "first" || received.attempt > 1,
                "first attempt panics"
            );
            let _ = tx.send((received.event.call_id, received.attempt));
            Ok::<(), String>(())
        }
    };
    let clock = Arc::new(ManualClock::new(T));
    let (stop, stopped) = oneshot::channel::<()>();
    let workers = tokio::spawn(run_inbox_workers(
        inbox.clone(),
        handler,
        Arc::clone(&clock),
        2,
        async move {
            let _ = stopped.await;
        },
    ));
    let mut seen = vec![
        within("a delivery", rx.recv()).await.expect("worker alive"),
        within("a delivery", rx.recv()).await.expect("worker alive"),
    ];
    seen.sort();
    assert_eq!(seen, [("second".to_owned(), 1), ("third".to_owned(), 1)]);
    // The panicked entry is retried after its backoff (5 s), by loops still running.
    clock.advance(5);
    assert_eq!(
        within("the retry", rx.recv()).await.expect("worker alive"),
        ("first".to_owned(), 2)
    );
    stop.send(()).expect("stop");
    within("shutdown", workers).await.expect("workers stop");
    assert_eq!(inbox.counts().await.expect("counts"), (0, 3, 0));
}

#[tokio::test]
async fn a_handler_that_never_finishes_is_cancelled_before_its_lease_and_the_loop_goes_on() {
    // A one-second lease: the handler gets 90% of it, 900 ms.
    let policy = InboxPolicy {
        lease: Duration::from_secs(1),
        max_attempts: 1,
        ..InboxPolicy::default()
    };
    let (_dir, inbox) = inbox_with(policy, &["stuck", "next"]).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let handler = move |received: Received| {
        let tx = tx.clone();
        async move {
            if received.event.call_id == "stuck" {
                std::future::pending::<()>().await;
            }
            let _ = tx.send(received.event.call_id);
            Ok::<(), String>(())
        }
    };
    let (stop, stopped) = oneshot::channel::<()>();
    // One loop: the stuck entry comes first, and the next one is reached only once it is cut.
    let worker = tokio::spawn(run_inbox_workers(
        inbox.clone(),
        handler,
        Arc::new(ManualClock::new(T)),
        1,
        async move {
            let _ = stopped.await;
        },
    ));
    assert_eq!(
        within("the entry after the stuck one", rx.recv())
            .await
            .expect("worker alive"),
        "next"
    );
    stop.send(()).expect("stop");
    within("shutdown", worker).await.expect("worker stops");
    assert_eq!(
        dead_letters(&inbox).await,
        [(
            "wh_stuck".to_owned(),
            "handler did not finish within 900ms".to_owned()
        )]
    );
    assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 1));
}

#[tokio::test]
async fn an_inbox_entry_reaches_user_code_with_its_raw_body_and_arrival_time() {
    let (_dir, inbox) = inbox_with(InboxPolicy::default(), &["raw"]).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let handler = move |received: Received| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(received);
            Ok::<(), String>(())
        }
    };
    process_next(&inbox, &handler, &ManualClock::new(T + 60))
        .await
        .expect("step");
    let received = rx.try_recv().expect("handed to user code");
    assert_eq!(&received.body[..], event_body("raw").as_slice());
    assert_eq!(
        received.received_at, T,
        "when it was stored, not when it was handled"
    );
}

#[tokio::test]
async fn an_inbox_on_a_full_disk_is_said_unavailable_once_not_by_every_loop_every_second() {
    let Some(fs) = svc_test_support::tmpfs::Tmpfs::mount("full-disk inbox workers") else {
        return;
    };
    let (logs, _guard) = crate::helpers::Logs::capture();
    let inbox =
        SqliteInbox::open(fs.path().join("inbox.db"), InboxPolicy::default()).expect("open");
    let id = WebhookId::parse(b"wh_full").expect("id");
    inbox
        .accept(&id, &[7; 32], &event_body("full"), T)
        .await
        .expect("accept");
    // Before the file's first checkpoint: reserving the entry needs room the disk lacks.
    fs.fill();
    let (handler, mut rx) = call_id_reporter();
    let (stop, stopped) = oneshot::channel::<()>();
    let workers = tokio::spawn(run_inbox_workers(
        inbox.clone(),
        handler,
        Arc::new(ManualClock::new(T)),
        4,
        async move {
            let _ = stopped.await;
        },
    ));
    // Four loops, each trying every second.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(
        rx.try_recv().is_err(),
        "nothing handled while the disk is full"
    );
    let said = logs.lines_with("webhook inbox unavailable");
    assert_eq!(said.len(), 1, "{said:#?}");
    assert!(said[0].contains("full"), "with the cause: {said:#?}");
    assert_eq!(
        said[0].matches("webhook store database error").count(),
        1,
        "the cause said once: {said:#?}"
    );

    fs.free();
    assert_eq!(
        within("the entry once space returns", rx.recv()).await,
        Some("full".to_owned())
    );
    stop.send(()).expect("stop");
    within("shutdown", workers).await.expect("workers stop");
    assert_eq!(logs.lines_with("webhook inbox available again").len(), 1);
    assert_eq!(logs.lines_with("webhook inbox unavailable").len(), 1);
    assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 0));
}

#[tokio::test]
async fn a_failed_entrys_backoff_runs_from_when_its_attempt_ended_not_when_it_was_handed_out() {
    let policy = InboxPolicy {
        first_backoff: Duration::from_secs(5),
        ..InboxPolicy::default()
    };
    let (_dir, inbox) = inbox_with(policy, &["slow"]).await;
    let clock = Arc::new(ManualClock::new(T));
    // A slow downstream: the attempt takes 270 s, then fails.
    let handler = {
        let clock = Arc::clone(&clock);
        move |_: Received| {
            clock.set(clock.now() + 270);
            async { Err::<(), _>("the downstream timed out".to_owned()) }
        }
    };
    assert_eq!(
        process_next(&inbox, &handler, &clock).await.expect("step"),
        Step::Settled(Settled::Retrying)
    );
    assert_eq!(clock.now(), T + 270);
    let ok = |_: Received| async { Ok::<(), String>(()) };
    assert_eq!(
        process_next(&inbox, &ok, &clock).await.expect("step"),
        Step::Empty,
        "not due at the end of the attempt: the backoff starts there"
    );
    clock.set(T + 274);
    assert_eq!(
        process_next(&inbox, &ok, &clock).await.expect("step"),
        Step::Empty
    );
    clock.set(T + 275);
    assert_eq!(
        process_next(&inbox, &ok, &clock).await.expect("step"),
        Step::Settled(Settled::Done),
        "due 5 s after the attempt ended"
    );
}
