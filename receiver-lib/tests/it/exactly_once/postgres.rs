//! `PgRecorder` (tokio-postgres, and sqlx's `record_sqlx`) against a real server: one `Fresh`
//! per id across connections, the tenant's own savepoints and rollbacks, a read-modify-write
//! total, isolation levels, replicas starting at once, a planted overload, errors.

use std::sync::Arc;
use std::time::Duration;

use svc_postgres::PgError;
use svc_receiver::Received;
use svc_receiver::exactly_once::Recorded;
use svc_receiver::inbox::{Inbox, Step, process_next};
use svc_receiver::postgres::{PgDatabase, PgInbox, PgRecorder};
use tokio::sync::oneshot;

use super::{delivery, quick_policy, received, verified};
use crate::helpers::{T, webhook_id};

/// A fresh schema for the tenant (its URL's search_path) with the effect table, and the name
/// of a schema for the crate's tables beside it; `None` without a server.
pub(super) async fn tenant(test: &str) -> Option<(String, String, tokio_postgres::Client)> {
    let url = svc_test_support::postgres::fresh_schema_url(test).await?;
    let tenant_schema = url
        .rsplit("search_path%3D")
        .next()
        .expect("a schema")
        .to_owned();
    let client = svc_test_support::postgres::connect(&url).await;
    client
        .batch_execute(
            "CREATE TABLE effects (n BIGSERIAL PRIMARY KEY, webhook_id TEXT NOT NULL,
                                   call_id TEXT NOT NULL)",
        )
        .await
        .expect("effects table");
    Some((url, format!("{tenant_schema}_svc"), client))
}

/// A [`tenant`] with the crate's tables opened in the schema beside its own (a pool of
/// `connections`): (the tenant's URL, the crate's schema, a client of the tenant's, the
/// recorder); `None` without a server.
pub(super) async fn tenant_recorder(
    test: &str,
    connections: usize,
) -> Option<(String, String, tokio_postgres::Client, PgRecorder)> {
    let (url, schema, client) = tenant(test).await?;
    let database = PgDatabase::connect_in_schema(&url, &schema, connections)
        .await
        .expect("database");
    Some((url, schema, client, database.recorder()))
}

/// How many effect rows `id` has.
pub(super) async fn effects(client: &tokio_postgres::Client, id: &str) -> i64 {
    client
        .query_one("SELECT COUNT(*) FROM effects WHERE webhook_id = $1", &[&id])
        .await
        .expect("count")
        .get(0)
}

/// The tenant's usual transaction for one delivery on `client`: record, one effect row,
/// commit.
pub(super) async fn write_effect(
    client: &mut tokio_postgres::Client,
    recorder: &PgRecorder,
    received: &Received,
) -> Result<Recorded, PgError> {
    let tx = client.transaction().await?;
    let recorded = recorder.record(&tx, received).await?;
    if recorded.is_fresh() {
        insert_effect(&tx, received).await?;
    }
    tx.commit().await?;
    Ok(recorded)
}

/// Writes `received`'s effect row in `tx`.
pub(super) async fn insert_effect(
    tx: &tokio_postgres::Transaction<'_>,
    received: &Received,
) -> Result<(), PgError> {
    tx.execute(
        "INSERT INTO effects (webhook_id, call_id) VALUES ($1, $2)",
        &[&received.webhook_id.as_str(), &received.event.call_id],
    )
    .await?;
    Ok(())
}

/// A transaction open on a connection of its own that recorded a delivery: what `record`
/// answered comes on `recorded` (once it stops waiting), and `end` commits (true) or rolls back.
struct OpenRecord {
    recorded: oneshot::Receiver<Result<Recorded, PgError>>,
    end: oneshot::Sender<bool>,
    done: tokio::task::JoinHandle<()>,
}

fn open_record(url: &str, recorder: &PgRecorder, received: Received) -> OpenRecord {
    let (url, recorder) = (url.to_owned(), recorder.clone());
    let (send_recorded, recorded) = oneshot::channel();
    let (end, ended) = oneshot::channel::<bool>();
    let done = tokio::spawn(async move {
        let mut client = svc_test_support::postgres::connect(&url).await;
        let tx = client.transaction().await.expect("begin");
        let answer = recorder.record(&tx, &received).await;
        let fresh = matches!(answer, Ok(Recorded::Fresh));
        let _ = send_recorded.send(answer);
        if ended.await.unwrap_or(false) {
            if fresh {
                insert_effect(&tx, &received).await.expect("effect");
            }
            tx.commit().await.expect("commit");
        } else {
            tx.rollback().await.expect("rollback");
        }
    });
    OpenRecord {
        recorded,
        end,
        done,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_records_of_one_id_wait_for_the_first_and_follow_its_commit_or_rollback() {
    let Some((url, _, client, recorder)) = tenant_recorder("eo_pg_concurrent", 2).await else {
        return;
    };
    let delivery = received("wh_race", T);

    let first = open_record(&url, &recorder, delivery.clone());
    let first_answer = first.recorded.await.expect("answer").expect("record");
    assert_eq!(first_answer, Recorded::Fresh);
    // A second transaction waits on the first's uncommitted record.
    let mut second = open_record(&url, &recorder, delivery.clone());
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut second.recorded)
            .await
            .is_err(),
        "the second record waits for the first transaction"
    );
    // The first rolls back: the second is the fresh one.
    let _ = first.end.send(false);
    first.done.await.expect("first");
    let second_answer = second.recorded.await.expect("answer").expect("record");
    assert_eq!(second_answer, Recorded::Fresh);
    // A third waits on the second, which commits: the third is a duplicate.
    let mut third = open_record(&url, &recorder, delivery.clone());
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut third.recorded)
            .await
            .is_err()
    );
    let _ = second.end.send(true);
    second.done.await.expect("second");
    let third_answer = third.recorded.await.expect("answer").expect("record");
    assert_eq!(third_answer, Recorded::Duplicate);
    let _ = third.end.send(true);
    third.done.await.expect("third");
    assert_eq!(effects(&client, "wh_race").await, 1);
}

/// What a tenant's transaction does besides recording, in the load test below.
#[derive(Clone, Copy, Debug)]
enum Style {
    /// A savepoint of its own around a statement that fails, rolled back to, then the write.
    SavepointRolledBack,
    /// Its first try rolls the whole transaction back itself, then tries again.
    RollsBackOnce,
    /// `SET LOCAL` and a read of its own before the write.
    SetLocal,
}

/// One delivery handled the way `style` says, until it succeeds.
async fn deliver_styled(
    client: &mut tokio_postgres::Client,
    recorder: &PgRecorder,
    received: &Received,
    style: Style,
) -> Result<(), PgError> {
    let mut rolled_back = false;
    loop {
        let tx = client.transaction().await?;
        if !recorder.record(&tx, received).await?.is_fresh() {
            tx.commit().await?;
            return Ok(());
        }
        match style {
            Style::SavepointRolledBack => {
                tx.batch_execute("SAVEPOINT mine").await?;
                let failed = tx.batch_execute("SELECT 1 / 0").await;
                assert!(failed.is_err());
                tx.batch_execute("ROLLBACK TO SAVEPOINT mine").await?;
            }
            Style::RollsBackOnce if !rolled_back => {
                insert_effect(&tx, received).await?;
                tx.batch_execute("ROLLBACK").await?;
                rolled_back = true;
                // The transaction object's own end is moot now; drop it and start again.
                drop(tx);
                continue;
            }
            Style::RollsBackOnce => {}
            Style::SetLocal => {
                tx.batch_execute(
                    "SET LOCAL statement_timeout = '5s'; SELECT count(*) FROM effects",
                )
                .await?;
            }
        }
        insert_effect(&tx, received).await?;
        tx.commit().await?;
        return Ok(());
    }
}

/// One delivery's transaction in [`senders`].
type Delivery<'c> = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'c>>;

/// `count` senders at once, each on a connection of its own, each delivering every one of
/// `ids` once in an order of its own: sender `s`'s `i`th delivery is of
/// `ids[(i * step + s * shift) % ids.len()]`, at `T`, handed to `deliver` with the
/// connection, `recorder` and the id's index. Returns once all are done; a panic in `deliver`
/// fails the test.
async fn senders<F>(
    url: &str,
    recorder: &PgRecorder,
    count: usize,
    ids: &[String],
    (step, shift): (usize, usize),
    deliver: F,
) where
    F: for<'c> Fn(&'c mut tokio_postgres::Client, &'c PgRecorder, usize, Received) -> Delivery<'c>
        + Send
        + Sync
        + 'static,
{
    let (ids, deliver): (Arc<[String]>, _) = (ids.into(), Arc::new(deliver));
    let senders: Vec<_> = (0..count)
        .map(|sender| {
            let (url, recorder) = (url.to_owned(), recorder.clone());
            let (ids, deliver) = (Arc::clone(&ids), Arc::clone(&deliver));
            tokio::spawn(async move {
                let mut client = svc_test_support::postgres::connect(&url).await;
                for i in 0..ids.len() {
                    let n = (i * step + sender * shift) % ids.len();
                    deliver(&mut client, &recorder, n, received(&ids[n], T)).await;
                }
            })
        })
        .collect();
    for sender in senders {
        sender.await.expect("sender");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenants_savepoints_rollbacks_and_set_local_under_concurrent_load_lose_and_double_nothing()
 {
    let Some((url, _, client, recorder)) = tenant_recorder("eo_pg_styles", 2).await else {
        return;
    };
    let styles = [
        Style::SavepointRolledBack,
        Style::RollsBackOnce,
        Style::SetLocal,
    ];
    // 8 senders, each delivering every id (so each id is delivered 8 times, concurrently).
    let ids: Vec<String> = (0..30).map(|n| format!("wh_style_{n}")).collect();
    senders(
        &url,
        &recorder,
        8,
        &ids,
        (7, 5),
        move |client, recorder, n, received| {
            Box::pin(async move {
                let style = styles[n % styles.len()];
                deliver_styled(client, recorder, &received, style)
                    .await
                    .unwrap_or_else(|e| panic!("{} {style:?}: {e}", received.webhook_id));
            })
        },
    )
    .await;
    for id in &ids {
        assert_eq!(effects(&client, id).await, 1, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_modify_write_effect_under_concurrent_deliveries_keeps_an_exact_total() {
    let Some((url, _, client, recorder)) = tenant_recorder("eo_pg_rmw", 2).await else {
        return;
    };
    client
        .batch_execute(
            "CREATE TABLE balance (id INT PRIMARY KEY, amount BIGINT NOT NULL);
                        INSERT INTO balance VALUES (1, 0);",
        )
        .await
        .expect("balance");
    let ids: Vec<String> = (0..40).map(|n| format!("wh_rmw_{n}")).collect();
    senders(
        &url,
        &recorder,
        6,
        &ids,
        (3, 11),
        |client, recorder, _, received| {
            Box::pin(async move {
                let tx = client.transaction().await.expect("begin");
                if recorder
                    .record(&tx, &received)
                    .await
                    .expect("record")
                    .is_fresh()
                {
                    let amount: i64 = tx
                        .query_one("SELECT amount FROM balance WHERE id = 1 FOR UPDATE", &[])
                        .await
                        .expect("read")
                        .get(0);
                    tx.execute(
                        "UPDATE balance SET amount = $1 WHERE id = 1",
                        &[&(amount + 1)],
                    )
                    .await
                    .expect("write");
                }
                tx.commit().await.expect("commit");
            })
        },
    )
    .await;
    let amount: i64 = client
        .query_one("SELECT amount FROM balance WHERE id = 1", &[])
        .await
        .expect("balance")
        .get(0);
    assert_eq!(amount, 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_repeatable_read_a_record_racing_a_commit_fails_to_serialize_and_its_retry_is_a_duplicate()
 {
    let Some((url, _, client, recorder)) = tenant_recorder("eo_pg_rr", 2).await else {
        return;
    };
    let delivery = received("wh_rr", T);
    let mut late = svc_test_support::postgres::connect(&url).await;
    let tx = late
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .start()
        .await
        .expect("begin");
    // Its snapshot, taken before the other commits.
    tx.query_one("SELECT count(*) FROM effects", &[])
        .await
        .expect("snapshot");
    let mut other = svc_test_support::postgres::connect(&url).await;
    assert_eq!(
        write_effect(&mut other, &recorder, &delivery)
            .await
            .expect("other"),
        Recorded::Fresh
    );
    let err = recorder
        .record(&tx, &delivery)
        .await
        .expect_err("a serialization failure");
    assert!(err.is_serialization_failure(), "{err}");
    assert!(err.to_string().contains("40001"), "{err}");
    drop(tx);
    assert_eq!(
        write_effect(&mut late, &recorder, &delivery)
            .await
            .expect("retry"),
        Recorded::Duplicate
    );
    assert_eq!(effects(&client, "wh_rr").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_at_once_all_start_and_hand_out_under_any_default_isolation() {
    let Some(url) = svc_test_support::postgres::server_url("eo_pg_isolation") else {
        return;
    };
    for isolation in ["read committed", "repeatable read", "serializable"] {
        let base = svc_test_support::postgres::fresh_schema_url("eo_pg_isolation")
            .await
            .expect("a server");
        // The role's default, as a database's would be: the crate must not inherit it.
        let role = svc_test_support::postgres::TestRole::create(&url, "iso").await;
        role.admin()
            .batch_execute(&format!(
                "ALTER ROLE {} SET default_transaction_isolation = '{isolation}'",
                role.name()
            ))
            .await
            .expect("role default");
        let login = role.login_url(&base);
        // The crate's schema beside the fresh one, so that every run starts empty.
        let schema = format!(
            "{}_svc",
            base.rsplit("search_path%3D").next().expect("a schema")
        );
        let barrier = Arc::new(tokio::sync::Barrier::new(3));
        let replicas: Vec<_> = (0..3)
            .map(|_| {
                let (login, schema, barrier) =
                    (login.clone(), schema.clone(), Arc::clone(&barrier));
                tokio::spawn(async move {
                    barrier.wait().await;
                    PgDatabase::connect_in_schema(&login, &schema, 4).await
                })
            })
            .collect();
        let mut databases = Vec::new();
        for replica in replicas {
            databases.push(
                replica
                    .await
                    .expect("replica")
                    .unwrap_or_else(|e| panic!("{isolation}: a replica failed to start: {e}")),
            );
        }
        // Their workers share one queue without serialization failures.
        let inboxes: Vec<PgInbox> = databases
            .into_iter()
            .map(|database| PgInbox::new(database, quick_policy()))
            .collect();
        for n in 0..24 {
            let id = format!("wh_iso_{n}");
            let (signature, body) = verified(&id, T);
            inboxes[n % 3]
                .accept(&webhook_id(&id), &signature, &body, T)
                .await
                .unwrap_or_else(|e| panic!("{isolation}: accept: {e}"));
        }
        let handled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let started = std::time::Instant::now();
        let workers: Vec<_> = inboxes
            .iter()
            .flat_map(|inbox| [inbox.clone(), inbox.clone()])
            .map(|inbox| {
                let handled = Arc::clone(&handled);
                tokio::spawn(async move {
                    let handler = move |_: Received| {
                        let handled = Arc::clone(&handled);
                        async move {
                            handled.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            Ok::<(), String>(())
                        }
                    };
                    loop {
                        match process_next(&inbox, &handler, &svc_contract::ManualClock::new(T))
                            .await
                        {
                            Ok(Step::Empty) => return Ok(()),
                            Ok(_) => {}
                            Err(err) => return Err(err.to_string()),
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            worker
                .await
                .expect("worker")
                .unwrap_or_else(|e| panic!("{isolation}: a hand-out failed: {e}"));
        }
        assert_eq!(
            handled.load(std::sync::atomic::Ordering::SeqCst),
            24,
            "{isolation}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{isolation}: the hand-outs took {:?}",
            started.elapsed()
        );
        drop(inboxes);
        role.drop_role().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overload_planted_in_the_crates_schema_is_never_called() {
    let Some((url, _, client)) = tenant("eo_pg_planted").await else {
        return;
    };
    // Another role's functions in the schema the crate's tables go to (the search_path's
    // first, as `public` is by default), each a better match for a call with an integer
    // literal than the built-in's `bigint`, or for any array than the built-ins' `anyarray`.
    client
        .batch_execute(
            "CREATE FUNCTION hashtextextended(TEXT, INTEGER) RETURNS BIGINT LANGUAGE plpgsql
                 AS $$ BEGIN RAISE EXCEPTION 'planted hashtextextended called'; END $$;
             CREATE FUNCTION cardinality(TEXT[]) RETURNS INTEGER LANGUAGE plpgsql
                 AS $$ BEGIN RAISE EXCEPTION 'planted cardinality called'; END $$;",
        )
        .await
        .expect("planted");
    let database = PgDatabase::connect(&url).await.expect("database");
    let inbox = PgInbox::new(database.clone(), quick_policy());
    let (signature, body) = verified("wh_planted", T);
    let accepted = inbox
        .accept(&webhook_id("wh_planted"), &signature, &body, T)
        .await
        .expect("accepted without the planted functions");
    assert_eq!(accepted, svc_receiver::inbox::Accepted::Stored);
    let store = svc_receiver::postgres::PgDedupStore::new(
        database,
        svc_receiver::dedup::DedupPolicy::default(),
    );
    let claim =
        svc_receiver::dedup::DedupStore::claim(&store, &webhook_id("wh_claimed"), &signature, T)
            .await
            .expect("claimed without the planted functions");
    assert_eq!(claim, svc_receiver::dedup::Claim::New);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_the_servers_sqlstate_and_message() {
    let Some((url, _, _, recorder)) = tenant_recorder("eo_pg_errors", 1).await else {
        return;
    };
    let mut client = svc_test_support::postgres::connect(&url).await;
    let tx = client.transaction().await.expect("begin");
    assert!(
        recorder
            .record(&tx, &received("wh_err", T))
            .await
            .expect("record")
            .is_fresh()
    );
    let err: PgError = tx
        .execute("INSERT INTO no_such_table VALUES (1)", &[])
        .await
        .expect_err("no table")
        .into();
    let text = err.to_string();
    assert!(text.contains("42P01"), "{text}");
    assert!(
        text.contains("relation \"no_such_table\" does not exist"),
        "{text}"
    );
    assert!(!text.contains("db error"), "{text}");
    // The transaction is aborted now: recording again says so, with the server's words.
    let err = recorder
        .record(&tx, &received("wh_err_2", T))
        .await
        .expect_err("aborted");
    assert!(err.to_string().contains("25P02"), "{err}");
}

#[cfg(feature = "sqlx-postgres")]
mod sqlx_driver {
    use super::*;

    /// The tenant's own sqlx pool on `url`.
    pub(crate) async fn sqlx_pool(url: &str, connections: u32) -> sqlx::PgPool {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(connections)
            .connect(url)
            .await
            .expect("sqlx pool")
    }

    /// Writes `received`'s effect row in `tx`, through sqlx.
    pub(crate) async fn insert_effect_sqlx(
        tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
        received: &Received,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO effects (webhook_id, call_id) VALUES ($1, $2)")
            .bind(received.webhook_id.as_str())
            .bind(&received.event.call_id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn record_sqlx_is_fresh_once_committed_and_rolls_back_with_the_transaction() {
        let Some((url, _, client, recorder)) = tenant_recorder("eo_sqlx_record", 1).await else {
            return;
        };
        let pool = sqlx_pool(&url, 2).await;
        let delivery = received("wh_sqlx", T);

        let mut tx = pool.begin().await.expect("begin");
        assert_eq!(
            recorder
                .record_sqlx(&mut tx, &delivery)
                .await
                .expect("record"),
            Recorded::Fresh
        );
        tx.rollback().await.expect("rollback");

        let mut tx = pool.begin().await.expect("begin");
        assert_eq!(
            recorder
                .record_sqlx(&mut tx, &delivery)
                .await
                .expect("record"),
            Recorded::Fresh
        );
        insert_effect_sqlx(&mut tx, &delivery)
            .await
            .expect("effect");
        tx.commit().await.expect("commit");

        let mut tx = pool.begin().await.expect("begin");
        assert_eq!(
            recorder
                .record_sqlx(&mut tx, &delivery)
                .await
                .expect("record"),
            Recorded::Duplicate
        );
        tx.commit().await.expect("commit");
        assert_eq!(effects(&client, "wh_sqlx").await, 1);
    }
}
#[cfg(feature = "sqlx-postgres")]
pub(super) use sqlx_driver::{insert_effect_sqlx, sqlx_pool};

#[tokio::test]
async fn a_store_error_is_logged_once_with_the_servers_sqlstate_and_message() {
    let Some((url, schema, client)) = tenant("eo_pg_store_error").await else {
        return;
    };
    let (logs, _logging) = crate::helpers::Logs::capture();
    let database = PgDatabase::connect_in_schema(&url, &schema, 1)
        .await
        .expect("database");
    // The store's table gone (dropped by an operator, say): every claim fails.
    client
        .batch_execute(&format!("DROP TABLE {schema}.webhook_claims CASCADE"))
        .await
        .expect("drop");
    let store = svc_receiver::postgres::PgDedupStore::new(
        database,
        svc_receiver::dedup::DedupPolicy::default(),
    );
    let handler = |_: Received| async { Ok::<(), String>(()) };
    let receiver =
        svc_receiver::axum::WebhookReceiver::new(crate::helpers::verifier(), store, handler)
            .with_clock(Arc::new(svc_contract::ManualClock::new(T)));
    let addr = crate::helpers::spawn(
        axum::Router::new().route("/webhooks", svc_receiver::axum::webhook_route(receiver)),
    )
    .await;
    let (header, body) = delivery("wh_store_error", T);
    let (status, _) = crate::helpers::post(
        &crate::helpers::client(),
        addr,
        Some("wh_store_error"),
        Some(&header),
        body,
    )
    .await;
    assert_eq!(status, 503);
    let text = logs.text();
    let line = text
        .lines()
        .find(|line| line.contains("webhook delivery not processed"))
        .unwrap_or_else(|| panic!("no log line for the delivery: {text}"));
    assert!(line.contains("42P01"), "{line}");
    assert!(line.contains("does not exist"), "{line}");
    assert_eq!(
        line.matches("webhook store database error").count(),
        1,
        "{line}"
    );
    assert!(!line.contains("db error"), "{line}");
}
