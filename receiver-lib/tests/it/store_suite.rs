//! One suite for every store: each check below is written once, against the `DedupStore` or
//! `Inbox` trait, and run against the memory store, SQLite and PostgreSQL (a fresh schema per
//! test, with the feature `postgres`; skipped with a loud line when `SVC_TEST_POSTGRES_URL` is
//! not set).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use svc_receiver::dedup::{Claim, DedupPolicy, DedupStore};
use svc_receiver::inbox::{Accepted, InboxAdmin, InboxPolicy, Settled, Step, process_next};

use svc_receiver::{Received, TraceParent};

use crate::helpers::{T, event_body, webhook_id as id};

fn sig(n: u8) -> [u8; 32] {
    [n; 32]
}

/// A signature of its own for each `n` (none equal to a `sig`).
fn nth_sig(n: u32) -> [u8; 32] {
    let mut signature = [0xee; 32];
    signature[..4].copy_from_slice(&n.to_le_bytes());
    signature
}

// ---- dedup stores ----

pub(crate) async fn concurrent_claims_give_exactly_one_new<S: DedupStore>(store: Arc<S>) {
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            store.claim(&id("wh_race"), &sig(1), 100).await
        }));
    }
    let mut new = 0;
    for task in tasks {
        match task.await.expect("task").expect("claim") {
            Claim::New => new += 1,
            Claim::InFlight => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(new, 1);
}

/// Many requests at once, each claiming and completing its own id (what a store that batches
/// them must still answer one by one): every claim is new, every completion sticks.
pub(crate) async fn many_concurrent_claims_and_completions_each_count_once<S: DedupStore>(
    store: Arc<S>,
) {
    const TASKS: u32 = 32;
    const EACH: u32 = 25;
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            for n in 0..EACH {
                let k = task * EACH + n;
                let name = id(&format!("wh_many_{k}"));
                assert_eq!(
                    store.claim(&name, &nth_sig(k), 100).await.expect("claim"),
                    Claim::New
                );
                store.complete(&name, 101).await.expect("complete");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    // A later copy of each (signed afresh) is a duplicate; its first signature under another
    // id a replay.
    for k in (0..TASKS * EACH).step_by(37) {
        let name = id(&format!("wh_many_{k}"));
        assert_eq!(
            store
                .claim(&name, &nth_sig(100_000 + k), 102)
                .await
                .expect("c"),
            Claim::Duplicate
        );
        assert_eq!(
            store
                .claim(&id("wh_other"), &nth_sig(k), 102)
                .await
                .expect("c"),
            Claim::Replayed
        );
    }
}

pub(crate) async fn claims_follow_the_lifecycle<S: DedupStore>(store: Arc<S>) {
    let a = id("wh_a");
    assert_eq!(store.claim(&a, &sig(1), 100).await.expect("c"), Claim::New);
    assert_eq!(
        store.claim(&a, &sig(1), 101).await.expect("c"),
        Claim::InFlight
    );
    store.release(&a).await.expect("release");
    // The sender's retry after a failure is processed again.
    assert_eq!(store.claim(&a, &sig(2), 400).await.expect("c"), Claim::New);
    store.complete(&a, 401).await.expect("complete");
    assert_eq!(
        store.claim(&a, &sig(3), 402).await.expect("c"),
        Claim::Duplicate
    );
    // The first delivery's signature resent under a new id is a replay.
    assert_eq!(
        store.claim(&id("wh_b"), &sig(1), 403).await.expect("c"),
        Claim::Replayed
    );
    // A dead holder's claim is taken over once its lease runs out.
    let c = id("wh_c");
    assert_eq!(store.claim(&c, &sig(4), 500).await.expect("c"), Claim::New);
    assert_eq!(
        store.claim(&c, &sig(4), 559).await.expect("c"),
        Claim::InFlight
    );
    assert_eq!(store.claim(&c, &sig(4), 560).await.expect("c"), Claim::New);
}

/// The sender signs each attempt afresh, so a retry carries a signature never seen before:
/// it must be remembered too, or a captured retry could be replayed under a new id.
pub(crate) async fn every_attempts_signature_is_remembered<S: DedupStore>(store: Arc<S>) {
    let a = id("wh_attempts");
    assert_eq!(store.claim(&a, &sig(1), 100).await.expect("c"), Claim::New);
    assert_eq!(
        store.claim(&a, &sig(2), 101).await.expect("c"),
        Claim::InFlight
    );
    store.release(&a).await.expect("release");
    assert_eq!(store.claim(&a, &sig(3), 400).await.expect("c"), Claim::New);
    store.complete(&a, 401).await.expect("complete");
    assert_eq!(
        store.claim(&a, &sig(4), 402).await.expect("c"),
        Claim::Duplicate
    );
    for n in 1..=4 {
        let other = id(&format!("wh_new_{n}"));
        assert_eq!(
            store.claim(&other, &sig(n), 403).await.expect("c"),
            Claim::Replayed,
            "attempt {n}'s signature under a new id"
        );
    }
    // Another delivery's signature under an id whose claim was released is a replay too,
    // and leaves that id's claim as it was.
    let b = id("wh_released");
    assert_eq!(store.claim(&b, &sig(5), 500).await.expect("c"), Claim::New);
    store.release(&b).await.expect("release");
    assert_eq!(
        store.claim(&b, &sig(3), 501).await.expect("c"),
        Claim::Replayed
    );
    assert_eq!(store.claim(&b, &sig(6), 502).await.expect("c"), Claim::New);
}

pub(crate) async fn claims_are_forgotten_after_retention<S: DedupStore>(store: Arc<S>) {
    let a = id("wh_old");
    assert_eq!(
        store.claim(&a, &sig(9), 1_000).await.expect("c"),
        Claim::New
    );
    store.complete(&a, 1_000).await.expect("complete");
    let day = 24 * 3600;
    assert_eq!(
        store.claim(&a, &sig(9), 1_000 + day - 1).await.expect("c"),
        Claim::Duplicate
    );
    assert_eq!(
        store
            .claim(&id("wh_other"), &sig(9), 1_000 + day - 1)
            .await
            .expect("c"),
        Claim::Replayed
    );
    assert_eq!(
        store.claim(&a, &sig(9), 1_000 + day).await.expect("c"),
        Claim::New
    );
}

// ---- inboxes ----

/// The inbox policy of the suite: short retention, two attempts.
fn inbox_policy() -> InboxPolicy {
    InboxPolicy {
        retention: Duration::from_secs(100),
        max_attempts: 2,
        ..InboxPolicy::default()
    }
}

async fn accept<I: InboxAdmin>(inbox: &I, name: &str, signature: u8, at: i64) -> Accepted {
    inbox
        .accept(&id(name), &sig(signature), &event_body(name), at)
        .await
        .expect("accept")
}

pub(crate) async fn accepts_store_once_and_catch_replays<I: InboxAdmin>(inbox: I) {
    assert_eq!(accept(&inbox, "wh_a", 1, T).await, Accepted::Stored);
    assert_eq!(accept(&inbox, "wh_a", 1, T).await, Accepted::Duplicate);
    // The sender's retry, signed afresh: a duplicate, and its signature is remembered.
    assert_eq!(accept(&inbox, "wh_a", 2, T + 1).await, Accepted::Duplicate);
    assert_eq!(accept(&inbox, "wh_b", 1, T + 2).await, Accepted::Replayed);
    assert_eq!(accept(&inbox, "wh_c", 2, T + 2).await, Accepted::Replayed);
    assert!(inbox.contains(&id("wh_a")).await.expect("contains"));
    assert!(!inbox.contains(&id("wh_b")).await.expect("contains"));
    assert_eq!(inbox.counts().await.expect("counts"), (1, 0, 0));
}

/// The trace context a delivery was stored with comes back with its entry, on each attempt;
/// a duplicate's (the sender's retry, another span) does not replace it; an entry stored
/// without one has none.
pub(crate) async fn entries_keep_the_trace_context_they_were_stored_with<I: InboxAdmin>(inbox: I) {
    let first = TraceParent::parse(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        .expect("traceparent");
    let retry = TraceParent::parse(b"00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01")
        .expect("traceparent");
    for (traceparent, signature, at) in [(&first, 1, T), (&retry, 2, T + 1)] {
        inbox
            .accept_traced(
                &id("wh_t"),
                &sig(signature),
                &event_body("wh_t"),
                Some(traceparent),
                at,
            )
            .await
            .expect("accept");
    }
    assert_eq!(accept(&inbox, "wh_plain", 3, T + 2).await, Accepted::Stored);
    let entry = inbox.next_due(T + 3).await.expect("next").expect("due");
    assert_eq!(entry.webhook_id.as_str(), "wh_t");
    assert_eq!(entry.traceparent.as_ref(), Some(&first));
    inbox
        .settle(&entry, Err("not yet".into()), T + 3)
        .await
        .expect("settle");
    let plain = inbox.next_due(T + 3).await.expect("next").expect("due");
    assert_eq!(
        (plain.webhook_id.as_str(), plain.traceparent),
        ("wh_plain", None)
    );
    let again = inbox
        .next_due(T + 3600)
        .await
        .expect("next")
        .expect("the retry");
    assert_eq!((again.attempt, again.traceparent), (2, Some(first)));
}

pub(crate) async fn concurrent_accepts_of_one_id_store_it_once<I: InboxAdmin>(inbox: I) {
    let mut tasks = Vec::new();
    for n in 0..24u8 {
        let inbox = inbox.clone();
        // The same delivery (and signature) from many requests, and the sender's retry.
        let signature = if n % 2 == 0 { 1 } else { 2 };
        tasks.push(tokio::spawn(async move {
            accept(&inbox, "wh_race", signature, T).await
        }));
    }
    let mut stored = 0;
    for task in tasks {
        match task.await.expect("task") {
            Accepted::Stored => stored += 1,
            Accepted::Duplicate => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(stored, 1);
    assert_eq!(inbox.counts().await.expect("counts"), (1, 0, 0));
}

/// Many accepts at once, each of its own delivery (what a store that batches them must still
/// answer one by one): each is stored exactly once, and each copy sent again is a duplicate.
pub(crate) async fn many_concurrent_accepts_are_each_stored_once<I: InboxAdmin>(inbox: I) {
    const TASKS: u32 = 32;
    const EACH: u32 = 40;
    let run = |answer: Accepted| {
        let inbox = inbox.clone();
        (0..TASKS)
            .map(move |task| {
                let inbox = inbox.clone();
                tokio::spawn(async move {
                    for n in 0..EACH {
                        let k = task * EACH + n;
                        let name = format!("wh_many_{k}");
                        let got = inbox
                            .accept(&id(&name), &nth_sig(k), &event_body(&name), T)
                            .await
                            .expect("accept");
                        assert_eq!(got, answer, "{name}");
                    }
                })
            })
            .collect::<Vec<_>>()
    };
    for task in run(Accepted::Stored) {
        task.await.expect("task");
    }
    for task in run(Accepted::Duplicate) {
        task.await.expect("task");
    }
    assert_eq!(
        inbox.counts().await.expect("counts"),
        (u64::from(TASKS * EACH), 0, 0)
    );
}

/// One signature under two ids at once (a replay racing its original): exactly one of them is
/// stored, the other is a replay, as if one came after the other.
pub(crate) async fn one_signature_under_two_ids_at_once_is_stored_once<I: InboxAdmin>(inbox: I) {
    for n in 0..20u32 {
        let (first, second) = (format!("wh_sx_{n}"), format!("wh_sy_{n}"));
        let tasks = [first.clone(), second.clone()].map(|name| {
            let inbox = inbox.clone();
            tokio::spawn(async move {
                inbox
                    .accept(&id(&name), &nth_sig(n), &event_body(&name), T)
                    .await
                    .expect("accept")
            })
        });
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.expect("task"));
        }
        let stored_first = answers == [Accepted::Stored, Accepted::Replayed];
        let stored_second = answers == [Accepted::Replayed, Accepted::Stored];
        assert!(stored_first || stored_second, "round {n}: {answers:?}");
        assert_eq!(inbox.contains(&id(&first)).await.expect("c"), stored_first);
        assert_eq!(
            inbox.contains(&id(&second)).await.expect("c"),
            stored_second
        );
    }
    assert_eq!(inbox.counts().await.expect("counts"), (20, 0, 0));
}

pub(crate) async fn entries_are_leased_retried_and_set_aside<I: InboxAdmin>(inbox: I) {
    let (ok, fails) = (
        |_: Received| async { Ok::<(), String>(()) },
        |_: Received| async { Err::<(), _>("downstream rejected it") },
    );
    assert_eq!(accept(&inbox, "wh_1", 1, T).await, Accepted::Stored);
    assert_eq!(accept(&inbox, "wh_2", 2, T).await, Accepted::Stored);
    // A handed-out entry is reserved for its lease: the next call gets the other one.
    let first = inbox.next_due(T).await.expect("due").expect("an entry");
    let second = inbox.next_due(T).await.expect("due").expect("another");
    assert_eq!(
        (first.webhook_id.as_str(), second.webhook_id.as_str()),
        ("wh_1", "wh_2")
    );
    assert!(inbox.next_due(T).await.expect("due").is_none());
    // Its worker died: once the lease ran out, it is handed out again as attempt 2.
    let lease = inbox.policy().lease.as_secs() as i64;
    let again = inbox
        .next_due(T + lease)
        .await
        .expect("due")
        .expect("again");
    assert_eq!((again.webhook_id.as_str(), again.attempt), ("wh_1", 2));
    assert_eq!(
        inbox.settle(&again, Ok(()), T + lease).await.expect("s"),
        Settled::Done
    );
    // A failure is retried after the backoff, then set aside on its last attempt.
    assert_eq!(
        inbox.settle(&second, Err("no".into()), T).await.expect("s"),
        Settled::Retrying
    );
    assert_eq!(
        process_next(&inbox, &fails, &svc_contract::ManualClock::new(T + 1))
            .await
            .expect("s"),
        Step::Empty
    );
    assert_eq!(
        process_next(&inbox, &fails, &svc_contract::ManualClock::new(T + 5))
            .await
            .expect("s"),
        Step::Settled(Settled::Dead)
    );
    assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 1));
    let dead = inbox.dead_letters().await.expect("dead");
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (
            dead[0].webhook_id.as_str(),
            dead[0].attempts,
            dead[0].last_error.as_str()
        ),
        ("wh_2", 2, "downstream rejected it")
    );
    assert_eq!(dead[0].body, event_body("wh_2"));
    // Requeued, it starts over; discarded, it counts as done and stays a duplicate.
    assert!(
        inbox
            .requeue_dead_letter(&id("wh_2"), T + 10)
            .await
            .expect("r")
    );
    assert!(
        !inbox
            .requeue_dead_letter(&id("wh_2"), T + 10)
            .await
            .expect("r")
    );
    assert_eq!(
        process_next(&inbox, &fails, &svc_contract::ManualClock::new(T + 10))
            .await
            .expect("s"),
        Step::Settled(Settled::Retrying)
    );
    assert_eq!(
        process_next(&inbox, &fails, &svc_contract::ManualClock::new(T + 20))
            .await
            .expect("s"),
        Step::Settled(Settled::Dead)
    );
    assert!(inbox.discard_dead_letter(&id("wh_2")).await.expect("d"));
    assert!(!inbox.discard_dead_letter(&id("wh_2")).await.expect("d"));
    assert_eq!(accept(&inbox, "wh_2", 9, T + 21).await, Accepted::Duplicate);
    assert_eq!(
        process_next(&inbox, &ok, &svc_contract::ManualClock::new(T + 99))
            .await
            .expect("s"),
        Step::Empty
    );
    // Every dead letter goes back to the queue at once.
    assert_eq!(accept(&inbox, "wh_3", 3, T + 30).await, Accepted::Stored);
    assert_eq!(accept(&inbox, "wh_4", 4, T + 30).await, Accepted::Stored);
    for at in [T + 30, T + 30, T + 40, T + 40] {
        process_next(&inbox, &fails, &svc_contract::ManualClock::new(at))
            .await
            .expect("s");
    }
    assert_eq!(inbox.counts().await.expect("counts"), (0, 2, 2));
    assert_eq!(inbox.requeue_all_dead_letters(T + 50).await.expect("r"), 2);
    assert_eq!(inbox.counts().await.expect("counts"), (2, 2, 0));
}

pub(crate) async fn concurrent_workers_take_each_entry_once<I: InboxAdmin>(inbox: I) {
    let count = 60u8;
    for n in 0..count {
        accept(&inbox, &format!("wh_q{n}"), n, T).await;
    }
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let inbox = inbox.clone();
        tasks.push(tokio::spawn(async move {
            let mut taken = Vec::new();
            while let Some(entry) = inbox.next_due(T).await.expect("due") {
                inbox.settle(&entry, Ok(()), T).await.expect("settle");
                taken.push(entry.webhook_id.as_str().to_owned());
            }
            taken
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("task"));
    }
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(
        (all.len(), unique.len()),
        (usize::from(count), usize::from(count))
    );
    assert_eq!(
        inbox.counts().await.expect("counts"),
        (0, u64::from(count), 0)
    );
}

pub(crate) async fn processed_entries_are_forgotten_after_retention<I: InboxAdmin>(inbox: I) {
    assert_eq!(accept(&inbox, "wh_done", 0, T).await, Accepted::Stored);
    assert_eq!(accept(&inbox, "wh_pending", 1, T).await, Accepted::Stored);
    // A later attempt of the pending one, signed afresh.
    assert_eq!(
        accept(&inbox, "wh_pending", 2, T + 1).await,
        Accepted::Duplicate
    );
    let entry = inbox.next_due(T).await.expect("due").expect("an entry");
    assert_eq!(entry.webhook_id.as_str(), "wh_done");
    inbox.settle(&entry, Ok(()), T).await.expect("settle");
    // Past the retention, the next accept prunes: the processed id is forgotten, the pending
    // one is kept (and its first signature with it); a later attempt's signature is
    // forgotten with the retention.
    let later = T + 161;
    assert_eq!(accept(&inbox, "wh_done", 0, later).await, Accepted::Stored);
    assert_eq!(
        accept(&inbox, "wh_pending", 1, later).await,
        Accepted::Duplicate
    );
    assert_eq!(
        accept(&inbox, "wh_other", 1, later).await,
        Accepted::Replayed
    );
    assert_eq!(accept(&inbox, "wh_new", 2, later).await, Accepted::Stored);
    assert_eq!(inbox.counts().await.expect("counts"), (3, 0, 0));
}

// ---- one test per check and store ----

#[cfg(feature = "postgres")]
async fn postgres_url(test: &str) -> Option<String> {
    svc_test_support::postgres::fresh_schema_url(test).await
}

macro_rules! dedup_suite {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            use std::sync::Arc;
            use svc_receiver::dedup::{DedupPolicy, MemoryDedupStore};

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn memory() {
                super::$check(Arc::new(MemoryDedupStore::default())).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let dir = tempfile::tempdir().expect("dir");
                let path = dir.path().join("d.db");
                let store = svc_receiver::sqlite::SqliteDedupStore::open(path, DedupPolicy::default());
                super::$check(Arc::new(store.expect("open"))).await;
            }

            #[cfg(feature = "postgres")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                let test = concat!(stringify!($check), "_postgres");
                let Some(url) = super::postgres_url(test).await else { return };
                let store = svc_receiver::postgres::PgDedupStore::connect(&url, DedupPolicy::default());
                super::$check(Arc::new(store.await.expect("connect"))).await;
            }
        }
    )*};
}

macro_rules! inbox_suite {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let dir = tempfile::tempdir().expect("dir");
                let path = dir.path().join("inbox.db");
                let inbox = svc_receiver::sqlite::SqliteInbox::open(path, super::inbox_policy());
                super::$check(inbox.expect("open")).await;
            }

            #[cfg(feature = "postgres")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                let test = concat!(stringify!($check), "_postgres");
                let Some(url) = super::postgres_url(test).await else { return };
                let inbox = svc_receiver::postgres::PgInbox::connect(&url, super::inbox_policy());
                super::$check(inbox.await.expect("connect")).await;
            }
        }
    )*};
}

dedup_suite!(
    concurrent_claims_give_exactly_one_new,
    claims_follow_the_lifecycle,
    every_attempts_signature_is_remembered,
    claims_are_forgotten_after_retention,
    many_concurrent_claims_and_completions_each_count_once,
);

inbox_suite!(
    accepts_store_once_and_catch_replays,
    entries_keep_the_trace_context_they_were_stored_with,
    concurrent_accepts_of_one_id_store_it_once,
    entries_are_leased_retried_and_set_aside,
    concurrent_workers_take_each_entry_once,
    processed_entries_are_forgotten_after_retention,
    many_concurrent_accepts_are_each_stored_once,
    one_signature_under_two_ids_at_once_is_stored_once,
);

/// The policy the dedup checks assume (the default's 24 h retention and 60 s lease).
#[test]
fn the_suite_assumes_the_default_dedup_policy() {
    let policy = DedupPolicy::default();
    assert_eq!(
        (policy.retention.as_secs(), policy.in_flight_lease.as_secs()),
        (24 * 3600, 60)
    );
}
