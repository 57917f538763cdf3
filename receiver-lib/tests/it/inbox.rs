//! Inbox mode: a verified event is durably stored before the 2xx and handed to user code from
//! the inbox with retries; drained step by step with a manual clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use svc_contract::{ManualClock, sign};
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, inbox_route};
use svc_receiver::inbox::{Accepted, Inbox, InboxAdmin, InboxPolicy, Settled, Step, process_next};
use svc_receiver::sqlite::SqliteInbox;

use crate::helpers::{
    SECRET, T, call_id_reporter, client, event_body, integrity, post, spawn, verifier, webhook_id,
};

#[tokio::test]
async fn an_acknowledged_event_survives_a_restart_and_is_retried_until_user_code_succeeds() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("inbox.db");
    let clock = Arc::new(ManualClock::new(T));
    {
        let inbox = SqliteInbox::open(&path, InboxPolicy::default()).expect("open");
        let receiver = InboxReceiver::new(verifier(), inbox).with_clock(Arc::clone(&clock));
        let addr = spawn(Router::new().route("/webhooks", inbox_route(receiver))).await;
        let client = client();
        let body = event_body("svc_call_in");
        let header = sign(SECRET, T, &body);
        assert_eq!(
            post(&client, addr, Some("wh_in"), Some(&header), body.clone())
                .await
                .0,
            200
        );
        assert_eq!(
            post(&client, addr, Some("wh_in"), Some(&header), body.clone())
                .await
                .0,
            200
        );
        assert_eq!(
            post(&client, addr, Some("wh_other"), Some(&header), body)
                .await
                .0,
            401
        );
    }
    // A new process: the acknowledged event is still there and is handed out.
    let inbox = SqliteInbox::open(&path, InboxPolicy::default()).expect("reopen");
    let attempts = Arc::new(AtomicUsize::new(0));
    let handler = {
        let attempts = Arc::clone(&attempts);
        move |received: Received| {
            let n = attempts.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                assert_eq!(received.event.call_id, "svc_call_in");
                assert_eq!(usize::try_from(received.attempt).expect("attempt"), n);
                if n < 3 {
                    Err(format!("attempt {n} failed"))
                } else {
                    Ok(())
                }
            }
        }
    };
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T))
            .await
            .expect("step"),
        Step::Settled(Settled::Retrying)
    );
    // Not due again until the backoff (5 s, then 10 s) has passed.
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T + 4))
            .await
            .expect("step"),
        Step::Empty
    );
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T + 5))
            .await
            .expect("step"),
        Step::Settled(Settled::Retrying)
    );
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T + 14))
            .await
            .expect("step"),
        Step::Empty
    );
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T + 15))
            .await
            .expect("step"),
        Step::Settled(Settled::Done)
    );
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T + 10_000))
            .await
            .expect("step"),
        Step::Empty
    );
    assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 0));
}

#[tokio::test]
async fn an_event_that_keeps_failing_becomes_a_dead_letter_and_is_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = InboxPolicy {
        max_attempts: 2,
        ..InboxPolicy::default()
    };
    let inbox = SqliteInbox::open(dir.path().join("inbox.db"), policy).expect("open");
    let body = event_body("svc_call_dead");
    let id = svc_contract::WebhookId::parse(b"wh_dead").expect("id");
    inbox.accept(&id, &[7; 32], &body, T).await.expect("accept");
    let handler = |_: Received| async { Err::<(), _>("always fails") };
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T))
            .await
            .expect("s"),
        Step::Settled(Settled::Retrying)
    );
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T + 60))
            .await
            .expect("s"),
        Step::Settled(Settled::Dead)
    );
    assert_eq!(
        process_next(&inbox, &handler, &ManualClock::new(T + 9_999))
            .await
            .expect("s"),
        Step::Empty
    );
    let dead = inbox.dead_letters().await.expect("dead");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].webhook_id, id);
    assert_eq!(dead[0].last_error, "always fails");
    assert_eq!((dead[0].attempts, dead[0].received_at), (2, T));
    assert!(inbox.contains(&id).await.expect("contains"));

    // Once the cause is fixed, the dead letter is handed out again with fresh attempts.
    assert!(
        inbox
            .requeue_dead_letter(&id, T + 10_000)
            .await
            .expect("requeue")
    );
    assert!(
        !inbox
            .requeue_dead_letter(&id, T + 10_000)
            .await
            .expect("not dead any more")
    );
    assert_eq!(inbox.counts().await.expect("counts"), (1, 0, 0));
    let ok = |_: Received| async { Ok::<(), String>(()) };
    let entry = inbox
        .next_due(T + 10_000)
        .await
        .expect("due")
        .expect("requeued entry");
    assert_eq!((entry.webhook_id.as_str(), entry.attempt), ("wh_dead", 1));
    assert_eq!(
        inbox
            .settle(&entry, Ok(()), T + 10_000)
            .await
            .expect("settle"),
        Settled::Done
    );
    assert_eq!(
        process_next(&inbox, &ok, &ManualClock::new(T + 10_001))
            .await
            .expect("s"),
        Step::Empty
    );
    assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 0));
}

#[tokio::test]
async fn dead_letters_can_be_discarded_or_all_requeued() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = InboxPolicy {
        max_attempts: 1,
        ..InboxPolicy::default()
    };
    let inbox = SqliteInbox::open(dir.path().join("inbox.db"), policy).expect("open");
    let fails = |_: Received| async { Err::<(), _>("downstream rejected it") };
    for (n, name) in ["wh_1", "wh_2", "wh_3"].into_iter().enumerate() {
        let signature = [u8::try_from(n).expect("small"); 32];
        let body = event_body(name);
        inbox
            .accept(&webhook_id(name), &signature, &body, T)
            .await
            .expect("accept");
        assert_eq!(
            process_next(&inbox, &fails, &ManualClock::new(T))
                .await
                .expect("s"),
            Step::Settled(Settled::Dead)
        );
    }
    assert_eq!(inbox.counts().await.expect("counts"), (0, 0, 3));
    // Giving up on one: it counts as done, and its id stays a duplicate.
    assert!(
        inbox
            .discard_dead_letter(&webhook_id("wh_2"))
            .await
            .expect("discard")
    );
    assert!(
        !inbox
            .discard_dead_letter(&webhook_id("wh_unknown"))
            .await
            .expect("unknown")
    );
    assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 2));
    assert_eq!(
        inbox
            .accept(&webhook_id("wh_2"), &[1; 32], &event_body("wh_2"), T + 1)
            .await
            .expect("again"),
        Accepted::Duplicate
    );
    // The rest go back to the queue together.
    assert_eq!(
        inbox
            .requeue_all_dead_letters(T + 2)
            .await
            .expect("requeue"),
        2
    );
    assert_eq!(inbox.counts().await.expect("counts"), (2, 1, 0));
    assert!(inbox.dead_letters().await.expect("dead").is_empty());
}

#[tokio::test]
async fn the_worker_hands_stored_events_to_user_code_and_stops_on_shutdown() {
    let dir = tempfile::tempdir().expect("dir");
    let inbox =
        SqliteInbox::open(dir.path().join("inbox.db"), InboxPolicy::default()).expect("open");
    let (handler, mut rx) = call_id_reporter();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(svc_receiver::inbox::run_inbox_worker(
        inbox.clone(),
        handler,
        Arc::new(ManualClock::new(T)),
        async move {
            let _ = stopped.await;
        },
    ));
    for n in 0..3u8 {
        let id = svc_contract::WebhookId::parse(format!("wh_w{n}").as_bytes()).expect("id");
        let body = event_body(&format!("svc_call_w{n}"));
        inbox.accept(&id, &[n; 32], &body, T).await.expect("accept");
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(rx.recv().await.expect("event"));
    }
    assert_eq!(seen, ["svc_call_w0", "svc_call_w1", "svc_call_w2"]);
    stop.send(()).expect("stop");
    worker.await.expect("worker stops");
    assert_eq!(inbox.counts().await.expect("counts"), (0, 3, 0));
}

#[tokio::test]
async fn two_inboxes_on_one_file_agree_on_duplicates_and_replays() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("inbox.db");
    let one = SqliteInbox::open(&path, InboxPolicy::default()).expect("open");
    let two = SqliteInbox::open(&path, InboxPolicy::default()).expect("open again");
    let body = event_body("svc_call_two");
    assert_eq!(
        one.accept(&webhook_id("wh_a"), &[1; 32], &body, T)
            .await
            .expect("a"),
        Accepted::Stored
    );
    // The second store learns of the first one's write although it never saw it happen.
    assert_eq!(
        two.accept(&webhook_id("wh_a"), &[1; 32], &body, T)
            .await
            .expect("a"),
        Accepted::Duplicate
    );
    assert_eq!(
        two.accept(&webhook_id("wh_b"), &[1; 32], &body, T)
            .await
            .expect("b"),
        Accepted::Replayed
    );
    assert_eq!(
        two.accept(&webhook_id("wh_c"), &[2; 32], &body, T)
            .await
            .expect("c"),
        Accepted::Stored
    );
    assert!(one.contains(&webhook_id("wh_c")).await.expect("contains"));
    assert_eq!(
        one.accept(&webhook_id("wh_d"), &[2; 32], &body, T)
            .await
            .expect("d"),
        Accepted::Replayed
    );
    assert_eq!(one.counts().await.expect("counts"), (2, 0, 0));
}

#[tokio::test]
async fn a_later_attempts_signature_is_remembered_so_its_replay_is_caught() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("inbox.db");
    let policy = InboxPolicy {
        retention: std::time::Duration::from_secs(100),
        ..InboxPolicy::default()
    };
    let inbox = SqliteInbox::open(&path, policy).expect("open");
    let body = event_body("svc_call_attempts");
    let accept = |inbox: SqliteInbox, name: &'static str, signature: u8, at: i64| {
        let body = body.clone();
        async move {
            inbox
                .accept(&webhook_id(name), &[signature; 32], &body, at)
                .await
                .expect("accept")
        }
    };
    assert_eq!(accept(inbox.clone(), "wh_a", 1, T).await, Accepted::Stored);
    // The sender's retry of the same delivery, signed afresh: a duplicate, but its signature
    // resent under another id is a replay.
    assert_eq!(
        accept(inbox.clone(), "wh_a", 2, T + 1).await,
        Accepted::Duplicate
    );
    assert_eq!(
        accept(inbox.clone(), "wh_b", 2, T + 2).await,
        Accepted::Replayed
    );
    assert_eq!(inbox.counts().await.expect("counts"), (1, 0, 0));

    // A store opened afresh on the file knows it too.
    drop(inbox);
    let reopened = SqliteInbox::open(&path, policy).expect("reopen");
    assert_eq!(
        accept(reopened.clone(), "wh_c", 2, T + 3).await,
        Accepted::Replayed
    );
    // It is forgotten with the retention, like the signatures of stored entries.
    assert_eq!(
        accept(reopened.clone(), "wh_d", 2, T + 1 + 161).await,
        Accepted::Stored
    );
}

#[tokio::test]
async fn processed_entries_are_forgotten_after_retention_and_pending_ones_are_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("inbox.db");
    let policy = InboxPolicy {
        retention: std::time::Duration::from_secs(100),
        ..InboxPolicy::default()
    };
    let inbox = SqliteInbox::open(&path, policy).expect("open");
    let body = event_body("svc_call_ret");
    for (n, name) in ["wh_done", "wh_pending"].into_iter().enumerate() {
        let signature = [u8::try_from(n).expect("small"); 32];
        assert_eq!(
            inbox
                .accept(&webhook_id(name), &signature, &body, T)
                .await
                .expect("accept"),
            Accepted::Stored
        );
    }
    // Only the first entry is processed; the second stays pending (its handler never ran).
    let entry = inbox.next_due(T).await.expect("due").expect("an entry");
    assert_eq!(entry.webhook_id.as_str(), "wh_done");
    inbox.settle(&entry, Ok(()), T).await.expect("settle");

    // Past the retention, the next accept prunes: the processed id is forgotten (a new
    // delivery under it is stored again), the pending one is still a duplicate.
    let later = T + 161;
    assert_eq!(
        inbox
            .accept(&webhook_id("wh_done"), &[0; 32], &body, later)
            .await
            .expect("again"),
        Accepted::Stored
    );
    assert_eq!(
        inbox
            .accept(&webhook_id("wh_pending"), &[1; 32], &body, later)
            .await
            .expect("dup"),
        Accepted::Duplicate
    );
    // The same holds for a store opened afresh on the file.
    drop(inbox);
    let reopened = SqliteInbox::open(&path, policy).expect("reopen");
    assert_eq!(reopened.counts().await.expect("counts"), (2, 0, 0));
}

#[tokio::test]
async fn a_file_written_before_the_append_layout_keeps_its_pending_entries() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("inbox.db");
    let body = event_body("svc_call_old");
    {
        // The layout of the first release: entries keyed by id, signatures unique.
        let old = rusqlite::Connection::open(&path).expect("old file");
        old.execute_batch(
            "CREATE TABLE webhook_inbox (
                 id TEXT PRIMARY KEY, signature BLOB NOT NULL, body BLOB NOT NULL,
                 received_at INTEGER NOT NULL,
                 state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'dead')),
                 attempts INTEGER NOT NULL DEFAULT 0, due_at INTEGER NOT NULL, last_error TEXT);
             CREATE UNIQUE INDEX webhook_inbox_signature ON webhook_inbox (signature);
             CREATE INDEX webhook_inbox_due ON webhook_inbox (state, due_at);",
        )
        .expect("old schema");
        old.execute(
            "INSERT INTO webhook_inbox (id, signature, body, received_at, state, due_at)
             VALUES ('wh_old', ?1, ?2, ?3, 'pending', ?3)",
            rusqlite::params![&[1u8; 32][..], &body, T],
        )
        .expect("old entry");
    }
    let inbox = SqliteInbox::open(&path, InboxPolicy::default()).expect("open old file");
    assert_eq!(
        inbox
            .accept(&webhook_id("wh_old"), &[1; 32], &body, T)
            .await
            .expect("dup"),
        Accepted::Duplicate
    );
    assert_eq!(
        inbox
            .accept(&webhook_id("wh_x"), &[1; 32], &body, T)
            .await
            .expect("replay"),
        Accepted::Replayed
    );
    let entry = inbox
        .next_due(T)
        .await
        .expect("due")
        .expect("the old entry");
    assert_eq!(entry.webhook_id.as_str(), "wh_old");
    assert_eq!(
        inbox.settle(&entry, Ok(()), T).await.expect("settle"),
        Settled::Done
    );
    assert_eq!(
        inbox
            .accept(&webhook_id("wh_new"), &[2; 32], &body, T)
            .await
            .expect("new"),
        Accepted::Stored
    );
    assert_eq!(inbox.counts().await.expect("counts"), (1, 1, 0));
}

/// What a handler of the test below saw: the ids it was handed, in order.
type Handed = Arc<std::sync::Mutex<Vec<String>>>;

/// A handler that notes each id it is handed and succeeds, or fails when `fails`.
fn noting(
    handed: Handed,
    fails: bool,
) -> impl Fn(Received) -> std::future::Ready<Result<(), String>> + Clone {
    move |received: Received| {
        handed
            .lock()
            .expect("lock")
            .push(received.webhook_id.as_str().to_owned());
        std::future::ready(if fails {
            Err("downstream refused".to_owned())
        } else {
            Ok(())
        })
    }
}

#[tokio::test]
async fn two_inboxes_on_one_file_hand_entries_out_in_due_order_and_agree_on_every_state() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("inbox.db");
    let policy = InboxPolicy {
        max_attempts: 2,
        first_backoff: std::time::Duration::from_secs(5),
        ..InboxPolicy::default()
    };
    let one = SqliteInbox::open(&path, policy).expect("open");
    let two = SqliteInbox::open(&path, policy).expect("open again");
    for (n, name) in ["wh_1", "wh_2", "wh_3"].into_iter().enumerate() {
        let at = T + i64::try_from(n).expect("small");
        let signature = [u8::try_from(n).expect("small"); 32];
        one.accept(&webhook_id(name), &signature, &event_body(name), at)
            .await
            .expect("accept");
    }
    let handed: Handed = Arc::default();
    let ok = noting(Arc::clone(&handed), false);
    let fails = noting(Arc::clone(&handed), true);
    let at = |t: i64| ManualClock::new(T + t);
    // wh_1 fails on the second inbox: due again 5 s after, behind wh_2 and wh_3.
    assert_eq!(
        process_next(&two, &fails, &at(10)).await.expect("step"),
        Step::Settled(Settled::Retrying)
    );
    assert_eq!(
        process_next(&one, &ok, &at(10)).await.expect("step"),
        Step::Settled(Settled::Done)
    );
    assert_eq!(two.counts().await.expect("counts"), (2, 1, 0));
    let stats = one.stats().await.expect("stats");
    assert_eq!((stats.pending, stats.leased, stats.dead), (2, 0, 0));
    assert_eq!(stats.oldest_pending_received_at, Some(T));
    // wh_3 (due since T + 2) before wh_1 (due at T + 15); then wh_1's last attempt.
    assert_eq!(
        process_next(&two, &fails, &at(20)).await.expect("step"),
        Step::Settled(Settled::Retrying)
    );
    assert_eq!(
        process_next(&one, &fails, &at(20)).await.expect("step"),
        Step::Settled(Settled::Dead)
    );
    assert_eq!(
        process_next(&two, &ok, &at(20)).await.expect("step"),
        Step::Empty
    );
    assert_eq!(one.counts().await.expect("counts"), (1, 1, 1));
    let dead: Vec<String> = two
        .dead_letters()
        .await
        .expect("dead letters")
        .iter()
        .map(|letter| letter.webhook_id.as_str().to_owned())
        .collect();
    assert_eq!(dead, ["wh_1"]);
    assert_eq!(
        one.stats().await.expect("stats").oldest_pending_received_at,
        Some(T + 2),
        "the oldest entry still pending"
    );
    // Requeued on the second, handed out by the first after wh_3 (due earlier).
    assert!(
        two.requeue_dead_letter(&webhook_id("wh_1"), T + 30)
            .await
            .expect("requeue")
    );
    for _ in 0..2 {
        assert_eq!(
            process_next(&one, &ok, &at(30)).await.expect("step"),
            Step::Settled(Settled::Done)
        );
    }
    assert_eq!(
        *handed.lock().expect("lock"),
        ["wh_1", "wh_2", "wh_3", "wh_1", "wh_3", "wh_1"]
    );
    assert_eq!(two.counts().await.expect("counts"), (0, 3, 0));
    drop((one, two));
    let reopened = SqliteInbox::open(&path, policy).expect("reopen");
    assert_eq!(reopened.counts().await.expect("counts"), (0, 3, 0));
    // Every state written on the way passes the table's CHECK (which the inbox's own
    // connection skips: see the writer), as read by another connection.
    assert_eq!(integrity(&path), "ok");
}

#[tokio::test]
async fn several_workers_overlap_their_handlers_and_hand_each_entry_out_once() {
    let dir = tempfile::tempdir().expect("dir");
    let inbox =
        SqliteInbox::open(dir.path().join("inbox.db"), InboxPolicy::default()).expect("open");
    let count = 24u8;
    for n in 0..count {
        let id = svc_contract::WebhookId::parse(format!("wh_m{n}").as_bytes()).expect("id");
        let body = event_body(&format!("svc_call_m{n}"));
        inbox.accept(&id, &[n; 32], &body, T).await.expect("accept");
    }
    let in_hand = Arc::new(AtomicUsize::new(0));
    let most_in_hand = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = {
        let (in_hand, most_in_hand) = (Arc::clone(&in_hand), Arc::clone(&most_in_hand));
        move |received: Received| {
            let (in_hand, most_in_hand, tx) =
                (Arc::clone(&in_hand), Arc::clone(&most_in_hand), tx.clone());
            async move {
                let now = in_hand.fetch_add(1, Ordering::SeqCst) + 1;
                most_in_hand.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                in_hand.fetch_sub(1, Ordering::SeqCst);
                let _ = tx.send(received.event.call_id);
                Ok::<(), String>(())
            }
        }
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let workers = tokio::spawn(svc_receiver::inbox::run_inbox_workers(
        inbox.clone(),
        handler,
        Arc::new(ManualClock::new(T)),
        4,
        async move {
            let _ = stopped.await;
        },
    ));
    let mut seen = Vec::new();
    for _ in 0..count {
        seen.push(rx.recv().await.expect("event"));
    }
    stop.send(()).expect("stop");
    workers.await.expect("workers stop");
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen.len(),
        usize::from(count),
        "each entry handled exactly once"
    );
    assert!(
        rx.try_recv().is_err(),
        "no entry is handed out a second time"
    );
    let most = most_in_hand.load(Ordering::SeqCst);
    assert!(
        (2..=4).contains(&most),
        "handlers overlapped, at most 4 at once: {most}"
    );
    assert_eq!(inbox.counts().await.expect("counts"), (0, 24, 0));
}

#[tokio::test]
async fn the_readiness_probe_fails_on_a_full_disk_as_a_delivery_does_and_passes_once_space_returns()
{
    let Some(fs) = svc_test_support::tmpfs::Tmpfs::mount("full-disk inbox readiness") else {
        return;
    };
    let inbox =
        SqliteInbox::open(fs.path().join("inbox.db"), InboxPolicy::default()).expect("open");
    let id = |n: u8| svc_contract::WebhookId::parse(format!("wh_probe{n}").as_bytes()).expect("id");
    inbox.check_writable().await.expect("ready");
    inbox
        .accept(&id(1), &[1; 32], &event_body("svc_call_probe1"), T)
        .await
        .expect("accept");

    fs.fill();
    let refused = inbox
        .accept(&id(2), &[2; 32], &event_body("svc_call_probe2"), T)
        .await;
    assert!(refused.is_err(), "a delivery on a full disk: {refused:?}");
    let probed = inbox.check_writable().await;
    assert!(probed.is_err(), "the probe on a full disk: {probed:?}");

    fs.free();
    inbox.check_writable().await.expect("ready again");
    assert_eq!(
        inbox
            .accept(&id(2), &[2; 32], &event_body("svc_call_probe2"), T)
            .await
            .expect("accepted once space returns"),
        Accepted::Stored
    );
    assert_eq!(inbox.counts().await.expect("counts"), (2, 0, 0));
}

/// A file made before trace contexts were kept: opening it adds their column, its entries are
/// handed out without one, and a new entry keeps the one it was accepted with.
#[tokio::test]
async fn an_inbox_file_of_the_earlier_layout_keeps_its_entries_and_the_trace_of_new_ones() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("inbox.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("file");
        conn.execute_batch(
            "CREATE TABLE webhook_inbox (
                 seq INTEGER PRIMARY KEY, id TEXT NOT NULL, signature BLOB NOT NULL,
                 body BLOB NOT NULL, received_at INTEGER NOT NULL,
                 state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'dead')),
                 attempts INTEGER NOT NULL DEFAULT 0, due_at INTEGER NOT NULL, last_error TEXT);",
        )
        .expect("earlier layout");
        conn.execute(
            "INSERT INTO webhook_inbox (id, signature, body, received_at, state, due_at)
             VALUES ('wh_old', ?1, ?2, ?3, 'pending', ?3)",
            rusqlite::params![&[3_u8; 32][..], event_body("svc_call_old"), T],
        )
        .expect("an entry of the earlier layout");
    }
    let inbox = SqliteInbox::open(&path, InboxPolicy::default()).expect("opened and upgraded");
    let traceparent = svc_receiver::TraceParent::parse(
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    .expect("traceparent");
    let accepted = inbox
        .accept_traced(
            &webhook_id("wh_new"),
            &[4; 32],
            &event_body("svc_call_new"),
            Some(&traceparent),
            T + 1,
        )
        .await
        .expect("accept");
    assert_eq!(accepted, Accepted::Stored);
    let old = inbox
        .next_due(T + 5)
        .await
        .expect("next")
        .expect("the old entry");
    assert_eq!((old.webhook_id.as_str(), old.traceparent), ("wh_old", None));
    let new = inbox
        .next_due(T + 5)
        .await
        .expect("next")
        .expect("the new entry");
    assert_eq!(new.webhook_id.as_str(), "wh_new");
    assert_eq!(new.traceparent, Some(traceparent));
    drop(inbox);
    // Opened again (the column is there now): nothing to add, nothing lost.
    let again = SqliteInbox::open(&path, InboxPolicy::default()).expect("reopened");
    assert_eq!(again.counts().await.expect("counts").0, 2);
}
