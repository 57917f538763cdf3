//! What holds on PostgreSQL only: a database that stops answering, the inbox on the store's
//! own connections, reads beside a long write transaction.

use super::*;

/// A PostgreSQL store whose database stops answering (a stalled network, a hung
/// server; here a proxy that stops forwarding answers on an open connection) gives up on the
/// statement within the answer timeout instead of waiting forever with the connection's lock
/// held, and works again on a fresh connection once the network is back.
#[cfg(feature = "postgres")]
#[test]
fn a_store_whose_database_stops_answering_gives_up_in_time_and_recovers_on_a_new_connection() {
    use std::time::{Duration, Instant};
    use svc_test_support::proxy::{Fault, Proxy};

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let test = "store_stops_answering";
    let Some(url) = runtime.block_on(svc_test_support::postgres::fresh_schema_url(test)) else {
        return;
    };
    let proxy = runtime
        .block_on(Proxy::start(svc_test_support::postgres::upstream(&url)))
        .expect("proxy");
    let location = StoreLocation::parse(&svc_test_support::postgres::via_proxy(&url, proxy.addr()))
        .expect("a location")
        .with_answer_timeout(Duration::from_secs(1));
    let store = Store::open_or_create(location).expect("a PostgreSQL store");
    store.check_writable().expect("writable");

    proxy.set(Fault::StallAfter(0));
    // On a thread of its own, so that a store that waits forever fails the test.
    let (sender, outcome) = std::sync::mpsc::channel();
    let stalled = store.clone();
    std::thread::spawn(move || {
        let started = Instant::now();
        let result = stalled.check_writable();
        let _ = sender.send((result, started.elapsed()));
    });
    let (result, took) = outcome
        .recv_timeout(Duration::from_secs(20))
        .expect("the store gave up instead of waiting forever");
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
    assert!(result.as_ref().is_err_and(StoreError::is_temporary));
    assert!(
        took < Duration::from_secs(3),
        "within the answer timeout: {took:?}"
    );
    assert!(proxy.stats().stalled >= 1);

    proxy.set(Fault::Pass);
    store
        .check_writable()
        .expect("writable again, on a new connection");
    assert!(proxy.stats().accepted >= 2, "{:?}", proxy.stats());
}

/// A fresh PostgreSQL store (its own schema) and a runtime for async calls beside it; `None`
/// when no test server is set.
#[cfg(feature = "postgres")]
fn postgres_store(test: &str) -> Option<(tokio::runtime::Runtime, Store)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let url = runtime.block_on(svc_test_support::postgres::fresh_schema_url(test))?;
    let location = StoreLocation::parse(&url).expect("a location");
    let store = Store::open_or_create(location).expect("a PostgreSQL store");
    Some((runtime, store))
}

/// One PostgreSQL layer. The inbox `webhook serve` opens beside a PostgreSQL store
/// runs on the store's own pool of connections (one set of connections, one answer timeout),
/// not on a second pool: used one after the other, both are served by the same connection.
#[cfg(feature = "postgres")]
#[test]
fn the_inbox_beside_a_postgres_store_runs_on_the_stores_connections() {
    use super::super::inbox::StoreInbox;
    use svc_receiver::inbox::InboxPolicy;

    let Some((runtime, store)) =
        postgres_store("the_inbox_beside_a_postgres_store_runs_on_the_stores_connections")
    else {
        return;
    };
    let backend_pid = |store: &Store| {
        store
            .read(|db| {
                db.query_one("SELECT pg_backend_pid()::bigint", &[])?
                    .count(0)
            })
            .expect("the store's connection")
    };
    let store_pid = backend_pid(&store);
    let inbox = runtime
        .block_on(StoreInbox::open_beside(&store, InboxPolicy::default()))
        .expect("the inbox");
    let StoreInbox::Postgres(inbox) = inbox else {
        panic!("a PostgreSQL store's inbox is in PostgreSQL");
    };
    let inbox_pid: u64 = runtime.block_on(async {
        let conn = inbox.database().pool().get().await.expect("a connection");
        let row = conn
            .query_one("SELECT pg_backend_pid()::bigint", &[])
            .await
            .expect("pid");
        u64::try_from(row.get::<_, i64>(0)).expect("a pid")
    });
    assert_eq!(inbox_pid, store_pid, "one pool, one idle connection");
    assert_eq!(backend_pid(&store), store_pid);
    let StoreLocation::Postgres(url) = store.location() else {
        panic!("a PostgreSQL location");
    };
    assert_eq!(
        inbox.database().answer_timeout(),
        url.answer_timeout(),
        "the store's answer timeout"
    );
}

/// On PostgreSQL the store's transactions have connections of their own (its pool),
/// so a read in one thread is not held behind a long write transaction in another, as it was
/// on the single connection the store used to drive; and writers still follow each other.
#[cfg(feature = "postgres")]
#[test]
fn on_postgres_a_read_goes_on_while_another_thread_holds_a_write_transaction() {
    use std::sync::mpsc;
    use std::time::Duration;

    let Some((_runtime, store)) =
        postgres_store("on_postgres_a_read_goes_on_while_another_thread_holds_a_write")
    else {
        return;
    };
    let (started, write_started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let writer = store.clone();
    let write = std::thread::spawn(move || {
        writer.write(|db| {
            db.execute(
                "INSERT INTO sync_state (source, watermark) VALUES ('roleplay', 'held')",
                &[],
            )?;
            let _ = started.send(());
            let _ = released.recv_timeout(Duration::from_secs(20));
            Ok(())
        })
    });
    write_started
        .recv_timeout(Duration::from_secs(20))
        .expect("the write began");
    let (read_done, read_finished) = mpsc::channel();
    let reader = store.clone();
    std::thread::spawn(move || {
        let count = reader.read(|db| {
            db.query_one("SELECT COUNT(*) FROM sync_state", &[])?
                .count(0)
        });
        let _ = read_done.send(count);
    });
    let count = read_finished
        .recv_timeout(Duration::from_secs(5))
        .expect("the read was not held behind the write")
        .expect("read");
    assert_eq!(count, 0, "the uncommitted write is not seen");
    release.send(()).expect("release the write");
    write.join().expect("writer").expect("the write committed");
    assert_eq!(
        texts(
            &store,
            "SELECT watermark FROM sync_state WHERE source = 'roleplay'"
        ),
        vec!["held".to_owned()]
    );
}

/// The store's PostgreSQL methods block the calling thread; called many times in one poll of
/// a task on a Tokio worker (an embedder's async code calling it directly), they neither hang
/// nor spin once the task's cooperative budget is spent.
#[cfg(feature = "postgres")]
#[test]
fn on_postgres_many_store_calls_in_one_poll_of_a_tokio_task_all_finish() {
    use std::sync::mpsc;
    use std::time::Duration;

    let Some((_runtime, store)) = postgres_store("many_store_calls_in_one_poll") else {
        return;
    };
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let calls = runtime.block_on(runtime.spawn(async move {
            let mut total = 0;
            for _ in 0..300 {
                total += store.read(|db| db.query_one("SELECT 1::bigint", &[])?.count(0))?;
            }
            Ok::<_, StoreError>(total)
        }));
        let _ = done.send(calls);
    });
    let total = finished
        .recv_timeout(Duration::from_secs(120))
        .expect("every call finished")
        .expect("the task")
        .expect("the reads");
    assert_eq!(total, 300);
}
