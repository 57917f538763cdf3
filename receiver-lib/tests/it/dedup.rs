//! What is particular to each dedup store (what they share is checked once for all in
//! `store_suite`): claims through two SQLite connections, the memory store's bound, durability
//! across a reopen for SQLite, and a store of one's own.

use std::sync::Arc;
use std::time::Duration;

use svc_contract::WebhookId;
use svc_receiver::StoreError;
use svc_receiver::dedup::{Claim, DedupPolicy, DedupStore, MemoryDedupStore};
use svc_receiver::sqlite::SqliteDedupStore;

use crate::helpers::{integrity, webhook_id as id};

fn sig(n: u8) -> [u8; 32] {
    [n; 32]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_through_two_connections_give_exactly_one_new() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("d.db");
    let one = SqliteDedupStore::open(&path, DedupPolicy::default()).expect("open");
    let two = SqliteDedupStore::open(&path, DedupPolicy::default()).expect("open");
    let mut tasks = Vec::new();
    for n in 0..16 {
        let store = if n % 2 == 0 { one.clone() } else { two.clone() };
        tasks.push(tokio::spawn(async move {
            store.claim(&id("wh_x"), &sig(1), 100).await
        }));
    }
    let mut new = 0;
    for task in tasks {
        if task.await.expect("task").expect("claim") == Claim::New {
            new += 1;
        }
    }
    assert_eq!(new, 1);
}

#[tokio::test]
async fn the_sqlite_store_remembers_every_attempts_signature_across_a_reopen() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("d.db");
    crate::store_suite::every_attempts_signature_is_remembered(Arc::new(
        SqliteDedupStore::open(&path, DedupPolicy::default()).expect("open"),
    ))
    .await;
    // And the SQLite store still knows them, and each id's state, after a reopen.
    let store = SqliteDedupStore::open(&path, DedupPolicy::default()).expect("reopen");
    for n in 1..=6 {
        assert_eq!(
            store
                .claim(&id(&format!("wh_later_{n}")), &sig(n), 530)
                .await
                .expect("c"),
            Claim::Replayed,
            "signature {n} after a reopen"
        );
    }
    assert_eq!(
        store
            .claim(&id("wh_attempts"), &sig(1), 531)
            .await
            .expect("c"),
        Claim::Duplicate
    );
    assert_eq!(
        // Its claim at 502 holds its lease until 562.
        store
            .claim(&id("wh_released"), &sig(6), 532)
            .await
            .expect("c"),
        Claim::InFlight
    );
    assert_eq!(store.completed_count().await.expect("count"), 1);
}

#[tokio::test]
async fn the_memory_store_stays_within_its_bound_dropping_the_oldest() {
    let store = MemoryDedupStore::new(DedupPolicy::default(), 3);
    for n in 0..5u8 {
        store
            .claim(&id(&format!("wh_{n}")), &sig(n), 100)
            .await
            .expect("claim");
    }
    assert_eq!(store.len(), 3);
    assert_eq!(
        store.claim(&id("wh_4"), &sig(4), 100).await.expect("claim"),
        Claim::InFlight
    );
    assert_eq!(
        store.claim(&id("wh_0"), &sig(0), 100).await.expect("claim"),
        Claim::New
    );
}

#[tokio::test]
async fn the_sqlite_store_keeps_its_claims_across_a_reopen() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("d.db");
    let policy = DedupPolicy {
        in_flight_lease: Duration::from_secs(60),
        ..DedupPolicy::default()
    };
    {
        let store = SqliteDedupStore::open(&path, policy).expect("open");
        assert_eq!(
            store.claim(&id("wh_done"), &sig(1), 100).await.expect("c"),
            Claim::New
        );
        store.complete(&id("wh_done"), 100).await.expect("complete");
        assert_eq!(
            store.claim(&id("wh_busy"), &sig(2), 100).await.expect("c"),
            Claim::New
        );
    }
    let store = SqliteDedupStore::open(&path, policy).expect("reopen");
    assert_eq!(
        store.claim(&id("wh_done"), &sig(1), 200).await.expect("c"),
        Claim::Duplicate
    );
    assert_eq!(
        store
            .claim(&id("wh_replay"), &sig(1), 200)
            .await
            .expect("c"),
        Claim::Replayed
    );
    assert_eq!(
        store.claim(&id("wh_busy"), &sig(2), 150).await.expect("c"),
        Claim::InFlight
    );
    assert_eq!(
        store.claim(&id("wh_busy"), &sig(2), 160).await.expect("c"),
        Claim::New
    );
    assert_eq!(store.completed_count().await.expect("count"), 1);
    assert_eq!(store.prune(100 + 24 * 3600).await.expect("prune"), 2);
    // A released claim too; then every row the store wrote passes the table's CHECKs (which
    // its own connection skips: see the writer), as read by another connection.
    let later = 100 + 24 * 3600 + 1;
    assert_eq!(
        store
            .claim(&id("wh_gave_up"), &sig(3), later)
            .await
            .expect("c"),
        Claim::New
    );
    store.release(&id("wh_gave_up")).await.expect("release");
    assert_eq!(
        store
            .claim(&id("wh_next"), &sig(4), later)
            .await
            .expect("c"),
        Claim::New
    );
    store
        .complete(&id("wh_next"), later)
        .await
        .expect("complete");
    assert_eq!(integrity(&path), "ok");
}

#[test]
fn webhook_ids_must_be_printable_ascii_and_bounded() {
    assert!(WebhookId::parse(b"wh_01JGZ").is_ok());
    for bad in [&b""[..], b"wh 1", b"wh_\xff", &[b'a'; 257][..]] {
        assert!(WebhookId::parse(bad).is_err(), "{bad:?}");
    }
}

#[tokio::test]
async fn a_file_written_before_the_append_layout_keeps_its_claims_and_takes_retries_signed_afresh()
{
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("d.db");
    {
        // The layout of the first release: claims keyed by id, with two indexes.
        let old = rusqlite::Connection::open(&path).expect("old file");
        old.execute_batch(
            "CREATE TABLE webhook_claims (
                 id TEXT PRIMARY KEY, signature BLOB NOT NULL,
                 state TEXT NOT NULL CHECK (state IN ('in_flight', 'released', 'done')),
                 lease_until INTEGER NOT NULL, claimed_at INTEGER NOT NULL);
             CREATE INDEX webhook_claims_signature ON webhook_claims (signature);
             CREATE INDEX webhook_claims_claimed_at ON webhook_claims (claimed_at);",
        )
        .expect("old schema");
        old.execute(
            "INSERT INTO webhook_claims VALUES ('wh_old', ?1, 'done', 160, 100)",
            [&sig(1)[..]],
        )
        .expect("old claim");
    }
    let store = SqliteDedupStore::open(&path, DedupPolicy::default()).expect("open old file");
    assert_eq!(
        store.claim(&id("wh_old"), &sig(1), 200).await.expect("c"),
        Claim::Duplicate
    );
    assert_eq!(
        store.claim(&id("wh_other"), &sig(1), 200).await.expect("c"),
        Claim::Replayed
    );
    assert_eq!(
        store.claim(&id("wh_new"), &sig(2), 200).await.expect("c"),
        Claim::New
    );
    store.complete(&id("wh_new"), 200).await.expect("complete");
    assert_eq!(store.completed_count().await.expect("count"), 2);

    // Every retry is signed afresh, so an id gets a row per signature: the old table, keyed
    // by id, could not hold them, and is rebuilt when the file opens.
    assert_eq!(
        store.claim(&id("wh_old"), &sig(3), 300).await.expect("c"),
        Claim::Duplicate,
        "a done id's retry, signed afresh"
    );
    assert_eq!(
        store
            .claim(&id("wh_failed"), &sig(4), 300)
            .await
            .expect("c"),
        Claim::New
    );
    store.release(&id("wh_failed")).await.expect("release");
    assert_eq!(
        store
            .claim(&id("wh_failed"), &sig(5), 400)
            .await
            .expect("c"),
        Claim::New,
        "a released id's retry, signed afresh, is handed over again"
    );
    drop(store);
    let reopened = SqliteDedupStore::open(&path, DedupPolicy::default()).expect("reopen");
    assert_eq!(
        reopened
            .claim(&id("wh_old"), &sig(6), 500)
            .await
            .expect("c"),
        Claim::Duplicate,
        "the claims survive the rebuild"
    );
    assert_eq!(
        reopened.claim(&id("wh_x"), &sig(5), 500).await.expect("c"),
        Claim::Replayed
    );
}

/// A store of one's own over another database, down for the moment.
struct DownStore;

impl DedupStore for DownStore {
    async fn claim(&self, _: &WebhookId, _: &[u8; 32], _: i64) -> Result<Claim, StoreError> {
        Err(StoreError::Backend(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "dedup database refused the connection",
        ))))
    }

    async fn complete(&self, _: &WebhookId, _: i64) -> Result<(), StoreError> {
        Ok(())
    }

    async fn release(&self, _: &WebhookId) -> Result<(), StoreError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_failing_store_of_ones_own_answers_503_and_keeps_its_cause() {
    use crate::helpers::{SECRET, T, client, event_body, post, spawn, verifier};
    use svc_receiver::axum::{WebhookReceiver, webhook_route};

    let err = DownStore
        .claim(&id("wh_x"), &sig(1), T)
        .await
        .expect_err("down");
    let cause = std::error::Error::source(&err).expect("the cause is kept");
    assert_eq!(cause.to_string(), "dedup database refused the connection");

    let handler = |_: svc_receiver::Received| async { Ok::<(), String>(()) };
    let receiver = WebhookReceiver::new(verifier(), DownStore, handler)
        .with_clock(Arc::new(svc_contract::ManualClock::new(T)));
    let addr = spawn(axum::Router::new().route("/webhooks", webhook_route(receiver))).await;
    let body = event_body("svc_call_down");
    let header = svc_contract::sign(SECRET, T, &body);
    let answer = post(&client(), addr, Some("wh_down"), Some(&header), body).await;
    // 503 so the sender retries; the cause goes to the log, never to the sender.
    assert_eq!(
        answer,
        (503, r#"{"error":"temporarily unavailable"}"#.to_owned())
    );
}
