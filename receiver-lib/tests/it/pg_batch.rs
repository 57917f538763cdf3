//! Client-side group commit of the PostgreSQL stores: the set-based functions answer a batch as
//! the same calls one after the other would, a batch that fails fails each of its callers with
//! a `StoreError` (and the store goes on), and a batch that deadlocks with another transaction
//! is tried again. Skipped loudly without `SVC_TEST_POSTGRES_URL`.

use std::time::Duration;

use svc_receiver::StoreError;
use svc_receiver::dedup::{DedupPolicy, DedupStore};
use svc_receiver::inbox::{Accepted, Inbox, InboxAdmin, InboxPolicy};
use svc_receiver::postgres::{PgDatabase, PgDedupStore, PgInbox};

use crate::helpers::{T, event_body, webhook_id as id};

/// A migrated fresh schema and a plain client on it; `None` without a server.
async fn fresh(test: &str) -> Option<(String, tokio_postgres::Client)> {
    let url = svc_test_support::postgres::fresh_schema_url(test).await?;
    PgDatabase::connect(&url)
        .await
        .expect("connect and migrate");
    let client = svc_test_support::postgres::connect(&url).await;
    Some((url, client))
}

/// Rows of an accept: id, signature byte, and the time.
const ACCEPTS: &[(&str, u8, i64)] = &[
    ("wh_a", 1, T),
    // The same id twice (the same copy, then the sender's retry signed afresh).
    ("wh_a", 1, T),
    ("wh_a", 2, T + 1),
    // A signature of wh_a's under other ids: replays.
    ("wh_b", 1, T + 1),
    ("wh_c", 2, T + 2),
    // One new signature under two new ids: the first is stored, the second a replay.
    ("wh_d", 3, T + 2),
    ("wh_e", 3, T + 2),
    ("wh_e", 4, T + 3),
    ("wh_d", 4, T + 3),
];

/// What the tables hold afterwards, to compare.
async fn inbox_rows(client: &tokio_postgres::Client) -> Vec<String> {
    let mut rows: Vec<String> = client
        .query(
            "SELECT 'inbox ' || id || ' ' || state || ' ' || received_at FROM webhook_inbox
             UNION ALL
             SELECT 'signature ' || encode(signature, 'hex') || ' ' || id || ' ' || seen_at
                    || ' ' || first FROM webhook_inbox_signatures",
            &[],
        )
        .await
        .expect("rows")
        .iter()
        .map(|row| row.get(0))
        .collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn an_inbox_batch_answers_as_the_same_accepts_one_after_the_other() {
    let test = "inbox_batch_is_sequential";
    let Some((_, one_by_one)) = fresh(test).await else {
        return;
    };
    let Some((_, batched)) = fresh(test).await else {
        return;
    };
    let mut expected = Vec::new();
    for (name, signature, now) in ACCEPTS {
        let row = one_by_one
            .query_one(
                "SELECT svc_receiver_inbox_accept($1, $2, $3, $4)",
                &[name, &&[*signature; 32][..], &event_body(name), now],
            )
            .await
            .expect("accept");
        expected.push(row.get::<_, String>(0));
    }
    assert_eq!(
        expected,
        [
            "stored",
            "duplicate",
            "duplicate",
            "replayed",
            "replayed",
            "stored",
            "replayed",
            "stored",
            "duplicate"
        ]
    );
    let ids: Vec<&str> = ACCEPTS.iter().map(|row| row.0).collect();
    let signatures: Vec<Vec<u8>> = ACCEPTS.iter().map(|row| vec![row.1; 32]).collect();
    let bodies: Vec<Vec<u8>> = ids.iter().map(|name| event_body(name)).collect();
    let nows: Vec<i64> = ACCEPTS.iter().map(|row| row.2).collect();
    let answers: Vec<String> = batched
        .query_one(
            "SELECT svc_receiver_inbox_accept_many($1, $2, $3, $4)",
            &[&ids, &signatures, &bodies, &nows],
        )
        .await
        .expect("accept many")
        .get(0);
    assert_eq!(answers, expected);
    assert_eq!(inbox_rows(&batched).await, inbox_rows(&one_by_one).await);
    // An empty batch answers nothing; arrays out of step are refused.
    let empty: Vec<String> = batched
        .query_one(
            "SELECT svc_receiver_inbox_accept_many('{}', '{}', '{}', '{}')",
            &[],
        )
        .await
        .expect("empty")
        .get(0);
    assert!(empty.is_empty());
    assert!(
        batched
            .query_one(
                "SELECT svc_receiver_inbox_accept_many($1, '{}', '{}', '{}')",
                &[&ids],
            )
            .await
            .is_err()
    );
}

/// The dedup store's claims, to compare.
async fn claim_rows(client: &tokio_postgres::Client) -> Vec<String> {
    client
        .query(
            "SELECT id || ' ' || state || ' ' || lease_until || ' ' || claimed_at
             FROM webhook_claims ORDER BY id",
            &[],
        )
        .await
        .expect("claims")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[tokio::test]
async fn a_dedup_batch_answers_as_the_same_claims_and_completions_one_after_the_other() {
    let test = "dedup_batch_is_sequential";
    let Some((_, one_by_one)) = fresh(test).await else {
        return;
    };
    let Some((_, batched)) = fresh(test).await else {
        return;
    };
    // (operation, id, signature byte, now); cutoff and lease as the default policy has them.
    let rows: &[(&str, &str, u8, i64)] = &[
        ("claim", "wh_a", 1, T),
        ("claim", "wh_a", 1, T),
        ("complete", "wh_a", 0, T),
        ("claim", "wh_a", 2, T + 1),
        ("claim", "wh_b", 1, T + 1),
        ("claim", "wh_c", 3, T + 2),
        ("claim", "wh_d", 3, T + 2),
        ("claim", "wh_c", 4, T + 3),
    ];
    let cutoff = |now: i64| now - 24 * 3600;
    let lease = |now: i64| now + 60;
    let mut expected = Vec::new();
    for (op, name, signature, now) in rows {
        let answer = if *op == "claim" {
            one_by_one
                .query_one(
                    "SELECT svc_receiver_claim($1, $2, $3, $4, $5)",
                    &[
                        name,
                        &&[*signature; 32][..],
                        now,
                        &cutoff(*now),
                        &lease(*now),
                    ],
                )
                .await
                .expect("claim")
                .get::<_, String>(0)
        } else {
            one_by_one
                .execute(
                    "UPDATE webhook_claims SET state = 'done' WHERE id = $1",
                    &[name],
                )
                .await
                .expect("complete");
            "done".to_owned()
        };
        expected.push(answer);
    }
    assert_eq!(
        expected,
        [
            "new",
            "in_flight",
            "done",
            "duplicate",
            "replayed",
            "new",
            "replayed",
            "in_flight"
        ]
    );
    let ops: Vec<&str> = rows.iter().map(|row| row.0).collect();
    let ids: Vec<&str> = rows.iter().map(|row| row.1).collect();
    let signatures: Vec<Vec<u8>> = rows.iter().map(|row| vec![row.2; 32]).collect();
    let nows: Vec<i64> = rows.iter().map(|row| row.3).collect();
    let cutoffs: Vec<i64> = nows.iter().map(|now| cutoff(*now)).collect();
    let leases: Vec<i64> = nows.iter().map(|now| lease(*now)).collect();
    let answers: Vec<String> = batched
        .query_one(
            "SELECT svc_receiver_dedup_many($1, $2, $3, $4, $5, $6)",
            &[&ops, &ids, &signatures, &nows, &cutoffs, &leases],
        )
        .await
        .expect("dedup many")
        .get(0);
    assert_eq!(answers, expected);
    assert_eq!(claim_rows(&batched).await, claim_rows(&one_by_one).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_batch_fails_each_of_its_callers_and_the_store_goes_on() {
    let test = "failing_batch";
    let Some((url, client)) = fresh(test).await else {
        return;
    };
    let inbox = PgInbox::connect(&url, InboxPolicy::default())
        .await
        .expect("inbox");
    let store = PgDedupStore::connect(&url, DedupPolicy::default())
        .await
        .expect("store");
    // Warm up (the statements are prepared on some pooled connections).
    assert_eq!(
        inbox
            .accept(&id("wh_warm"), &[9; 32], b"{}", T)
            .await
            .expect("accept"),
        Accepted::Stored
    );
    client
        .batch_execute(
            "ALTER FUNCTION svc_receiver_inbox_accept_many RENAME TO gone_inbox;
             ALTER FUNCTION svc_receiver_dedup_many RENAME TO gone_dedup;",
        )
        .await
        .expect("rename");
    let mut tasks = Vec::new();
    for n in 0..32u8 {
        let inbox = inbox.clone();
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let name = id(&format!("wh_fail_{n}"));
            let accepted = inbox.accept(&name, &[n; 32], b"{}", T).await;
            let claimed = store.claim(&name, &[n; 32], T).await;
            (accepted.map(drop), claimed.map(drop))
        }));
    }
    for task in tasks {
        let (accepted, claimed) = task.await.expect("no caller panics");
        for result in [accepted, claimed] {
            match result {
                Err(StoreError::Database { message, .. }) => {
                    assert!(message.contains("does not exist"), "{message}");
                }
                other => panic!("expected a database error, got {other:?}"),
            }
        }
    }
    client
        .batch_execute(
            "ALTER FUNCTION gone_inbox RENAME TO svc_receiver_inbox_accept_many;
             ALTER FUNCTION gone_dedup RENAME TO svc_receiver_dedup_many;",
        )
        .await
        .expect("rename back");
    // Nothing of the failed batches was stored, and the stores work again.
    assert_eq!(
        inbox
            .accept(&id("wh_fail_0"), &[0; 32], b"{}", T)
            .await
            .expect("accept"),
        Accepted::Stored
    );
    assert_eq!(
        store
            .claim(&id("wh_fail_0"), &[0; 32], T)
            .await
            .expect("claim"),
        svc_receiver::dedup::Claim::New
    );
    assert_eq!(inbox.counts().await.expect("counts"), (2, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_deadlocks_with_another_transaction_is_tried_again() {
    let test = "deadlocked_batch";
    let Some((url, mut other)) = fresh(test).await else {
        return;
    };
    let inbox = PgInbox::connect(&url, InboxPolicy::default())
        .await
        .expect("inbox");
    // Another transaction (a batch of another replica, say) holds wh_dl's inbox row...
    let tx = other.transaction().await.expect("begin");
    tx.execute(
        "INSERT INTO webhook_inbox (id, body, received_at, state, due_at)
         VALUES ('wh_dl', '\\x7b7d', $1, 'pending', $1)",
        &[&T],
    )
    .await
    .expect("insert the id");
    // ... while our batch takes the signature's row and waits for the id's ...
    let accept = tokio::spawn({
        let inbox = inbox.clone();
        async move { inbox.accept(&id("wh_dl"), &[7; 32], b"{}", T).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // ... and then wants the signature's: a deadlock. The batch waited first, so it detects
    // it (after deadlock_timeout) and is rolled back; the other transaction goes on.
    tx.execute(
        "INSERT INTO webhook_inbox_signatures (signature, id, seen_at, first)
         VALUES ($1, 'wh_dl', $2, true)",
        &[&&[7u8; 32][..], &T],
    )
    .await
    .expect("the other transaction survives the deadlock");
    tx.commit().await.expect("commit");
    // Tried again, the batch finds the delivery stored by the other transaction.
    let accepted = accept.await.expect("task").expect("the batch is retried");
    assert_eq!(accepted, Accepted::Duplicate);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_that_go_away_do_not_disturb_the_batch_of_the_others() {
    let test = "callers_go_away";
    let Some((url, _client)) = fresh(test).await else {
        return;
    };
    let inbox = PgInbox::connect(&url, InboxPolicy::default())
        .await
        .expect("inbox");
    let mut kept = Vec::new();
    for n in 0..64u8 {
        let inbox = inbox.clone();
        let task = tokio::spawn(async move {
            let name = format!("wh_gone_{n}");
            inbox.accept(&id(&name), &[n; 32], b"{}", T).await
        });
        if n % 2 == 0 {
            // Its request dropped: the caller is gone before or while its batch runs.
            task.abort();
        } else {
            kept.push(task);
        }
    }
    for task in kept {
        assert_eq!(task.await.expect("task").expect("accept"), Accepted::Stored);
    }
    // The inbox goes on; what the gone callers sent is stored or not, never half.
    let (pending, _, _) = inbox.counts().await.expect("counts");
    assert!((32..=64).contains(&pending), "{pending}");
    for n in 0..64u8 {
        let name = id(&format!("wh_gone_{n}"));
        let stored = inbox.contains(&name).await.expect("contains");
        let again = inbox
            .accept(&name, &[n; 32], b"{}", T)
            .await
            .expect("again");
        let expected = if stored {
            Accepted::Duplicate
        } else {
            Accepted::Stored
        };
        assert_eq!(again, expected, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batching_tasks_stop_with_the_last_handle_of_their_store() {
    let test = "batching_tasks_stop";
    let Some((url, client)) = fresh(test).await else {
        return;
    };
    // The stores' connections carry a name of their own, to count them on the server.
    let name = format!("svc_batch_stop_{}", std::process::id());
    let url = format!("{url}&application_name={name}");
    let connections = || async {
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .await
            .expect("count")
            .get::<_, i64>(0)
    };
    {
        let database = PgDatabase::connect(&url).await.expect("connect");
        let inbox = PgInbox::new(database.clone(), InboxPolicy::default());
        let store = PgDedupStore::new(database, DedupPolicy::default());
        let mut tasks = Vec::new();
        for n in 0..16u8 {
            let (inbox, store) = (inbox.clone(), store.clone());
            tasks.push(tokio::spawn(async move {
                let name = id(&format!("wh_stop_{n}"));
                inbox
                    .accept(&name, &[n; 32], b"{}", T)
                    .await
                    .expect("accept");
                store.claim(&name, &[n; 32], T).await.expect("claim");
                store.complete(&name, T).await.expect("complete");
            }));
        }
        for task in tasks {
            task.await.expect("task");
        }
        assert!(connections().await > 0, "the stores are connected");
    }
    // Every handle is dropped: the batching tasks stop and drop the pool, which closes its
    // connections.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while connections().await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "connections still open: a batching task outlived its store"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A store opened in one runtime and used in another after the first shut down (a CLI that runs
/// each command in a runtime of its own, say): its batching task is started again there.
#[test]
fn a_store_outlives_the_runtime_its_batching_task_started_in() {
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    };
    let Some((inbox, store)) = runtime().block_on(async {
        let (url, _client) = fresh("store_outlives_runtime").await?;
        let inbox = PgInbox::connect(&url, InboxPolicy::default())
            .await
            .expect("inbox");
        let store = PgDedupStore::connect(&url, DedupPolicy::default())
            .await
            .expect("store");
        let name = id("wh_first_runtime");
        assert_eq!(
            inbox
                .accept(&name, &[1; 32], b"{}", T)
                .await
                .expect("accept"),
            Accepted::Stored
        );
        store.claim(&name, &[1; 32], T).await.expect("claim");
        Some((inbox, store))
    }) else {
        return;
    };
    runtime().block_on(async {
        let name = id("wh_second_runtime");
        assert_eq!(
            inbox
                .accept(&name, &[2; 32], b"{}", T)
                .await
                .expect("accept"),
            Accepted::Stored
        );
        assert_eq!(
            store.claim(&name, &[2; 32], T).await.expect("claim"),
            svc_receiver::dedup::Claim::New
        );
    });
}

/// Makes every insert into `table` by a session that set `svc.test_pause_ms` sleep that long
/// after the row is in (its lock held), so that another transaction can run into the gap.
async fn pause_after_insert(client: &tokio_postgres::Client, table: &str) {
    client
        .batch_execute(&format!(
            "CREATE FUNCTION svc_test_pause() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 PERFORM pg_sleep(coalesce(nullif(current_setting('svc.test_pause_ms', true), ''),
                                           '0')::int / 1000.0);
                 RETURN NEW;
             END $$;
             CREATE TRIGGER svc_test_pause AFTER INSERT ON {table}
             FOR EACH ROW EXECUTE FUNCTION svc_test_pause();"
        ))
        .await
        .expect("install the pause");
}

/// Parameters of a batched function's call, for [`crossing_batches`].
type Params = Vec<Box<dyn tokio_postgres::types::ToSql + Send + Sync>>;

/// Two replicas' batches crossing (see below): `sql` called with `both` on a connection that
/// pauses after each insert into the table [`pause_after_insert`] slowed down (so that it holds
/// its first row's locks a while), and, once it is inside that pause, with `alone` on another
/// connection; what each answered.
///
/// # Panics
/// When either call fails (a deadlock, say), with the server's words for both.
async fn crossing_batches(
    url: &str,
    sql: &'static str,
    both: Params,
    alone: Params,
) -> (Vec<String>, Vec<String>) {
    let first = svc_test_support::postgres::connect(url).await;
    first
        .batch_execute("SET svc.test_pause_ms = 600")
        .await
        .expect("set the pause");
    let second = svc_test_support::postgres::connect(url).await;
    let call = |client: tokio_postgres::Client, params: Params| async move {
        let params: Vec<_> = params.iter().map(|p| &**p as _).collect();
        client
            .query_one(sql, &params)
            .await
            .map(|row| row.get::<_, Vec<String>>(0))
    };
    let both = tokio::spawn(call(first, both));
    // The first batch is inside its pause, its first row inserted: the other arrives.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let alone = call(second, alone).await;
    match (both.await.expect("task"), alone) {
        (Ok(both), Ok(alone)) => (both, alone),
        (both, alone) => panic!(
            "a batch failed (a deadlock?): {:?} / {:?}",
            both.map_err(|e| svc_postgres::describe_error(&e)),
            alone.map_err(|e| svc_postgres::describe_error(&e))
        ),
    }
}

/// One replica's batch holds two copies of an id (the sender's retry signed
/// afresh), another replica's batch the second copy alone. The first batch's second row
/// locked the retry's signature after the id; the other batch took the signature first, then
/// waited for the id: a deadlock, detected only after `deadlock_timeout` and then retried.
/// With the locks taken in one global order, neither waits in a cycle.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inbox_batches_crossing_on_a_retried_id_do_not_deadlock() {
    let test = "inbox_batches_cross";
    let Some((url, client)) = fresh(test).await else {
        return;
    };
    pause_after_insert(&client, "webhook_inbox").await;
    let (first_sig, retry_sig) = (vec![1u8; 32], vec![2u8; 32]);
    let body = event_body("wh_cross");
    let (both, alone) = crossing_batches(
        &url,
        "SELECT svc_receiver_inbox_accept_many($1, $2, $3, $4)",
        vec![
            Box::new(vec!["wh_cross", "wh_cross"]),
            Box::new(vec![first_sig, retry_sig.clone()]),
            Box::new(vec![body.clone(), body.clone()]),
            Box::new(vec![T, T + 1]),
        ],
        vec![
            Box::new(vec!["wh_cross"]),
            Box::new(vec![retry_sig]),
            Box::new(vec![body]),
            Box::new(vec![T + 1]),
        ],
    )
    .await;
    assert_eq!(both, ["stored", "duplicate"]);
    assert_eq!(alone, ["duplicate"]);
}

/// The same crossing for the dedup store's claims (a claim locks the signature, then the id).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dedup_batches_crossing_on_a_retried_id_do_not_deadlock() {
    let test = "dedup_batches_cross";
    let Some((url, client)) = fresh(test).await else {
        return;
    };
    pause_after_insert(&client, "webhook_claims").await;
    let (both, alone) = crossing_batches(
        &url,
        "SELECT svc_receiver_dedup_many($1, $2, $3, $4, $5, $6)",
        vec![
            Box::new(vec!["claim", "claim"]),
            Box::new(vec!["wh_cross", "wh_cross"]),
            Box::new(vec![vec![1u8; 32], vec![2u8; 32]]),
            Box::new(vec![T, T]),
            Box::new(vec![T - 3600, T - 3600]),
            Box::new(vec![T + 60, T + 60]),
        ],
        vec![
            Box::new(vec!["claim"]),
            Box::new(vec!["wh_cross"]),
            Box::new(vec![vec![2u8; 32]]),
            Box::new(vec![T]),
            Box::new(vec![T - 3600]),
            Box::new(vec![T + 60]),
        ],
    )
    .await;
    assert_eq!(both, ["new", "in_flight"]);
    assert_eq!(alone, ["in_flight"]);
}
