//! The edges exactly once hands to the tenant and to the database around it:
//! - a handler that swallows a failed statement and commits (PostgreSQL turns that COMMIT into
//!   a rollback without an error; SQLite may roll back by itself): the delivery is not
//!   acknowledged nor settled done, its retry writes the effect once, and committing through
//!   the recorder says so at once; per driver (tokio-postgres, deadpool-postgres, sqlx,
//!   rusqlite), in inbox mode, and in direct mode through the route;
//! - another role with `CREATE` on the database: a schema named after the receiver's role with
//!   a forged inbox, and objects planted before the first migration, in the schema the crate
//!   uses and as that schema itself;
//! - records timed and pruned by the database's clock: a recorder whose replica's clock runs
//!   two days ahead forgets nothing early, and a dead letter older than the retention keeps its
//!   record until it is requeued and handled.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use svc_contract::{Clock, ManualClock};
use svc_receiver::exactly_once::Recorded;
use svc_receiver::inbox::{Inbox, InboxAdmin, Settled, Step, process_next};
use svc_receiver::postgres::{PgDatabase, PgInbox, PgRecorder};
use svc_receiver::{EventHandler, Received};
use svc_test_support::postgres as pg;

use super::postgres::{effects, insert_effect, tenant_recorder};
use super::{SqliteTenant, quick_policy, received, verified};
use crate::helpers::{T, webhook_id};

/// How a tenant's handler ends its transaction in these tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Ignores a failed statement, then commits with the driver's own `commit`.
    SwallowAndCommit,
    /// Ignores a failed statement, then commits through the recorder.
    SwallowAndCommitThroughRecorder,
    /// Writes and commits through the recorder, as the README does.
    Clean,
}

/// The inbox of the crate's schema beside a [`tenant_recorder`], with `id` stored in it.
async fn inbox_with(url: &str, schema: &str, id: &str) -> PgInbox {
    let database = PgDatabase::connect_in_schema(url, schema, 2)
        .await
        .expect("database");
    let inbox = PgInbox::new(database, quick_policy());
    let (signature, body) = verified(id, T);
    inbox
        .accept(&webhook_id(id), &signature, &body, T)
        .await
        .expect("accept");
    inbox
}

/// Runs the inbox's next entry with `handler`, then (after the backoff) with the clean one,
/// checking what was settled and the effect count after each.
async fn swallowed_then_clean<H, C>(
    inbox: &PgInbox,
    id: &str,
    swallowing: H,
    clean: H,
    count: C,
) -> (Settled, i64)
where
    H: EventHandler,
    C: AsyncFn() -> i64,
{
    let Step::Settled(first) = process_next(inbox, &swallowing, &ManualClock::new(T))
        .await
        .expect("step")
    else {
        panic!("{id} was not handed out");
    };
    let after_first = count().await;
    let Step::Settled(second) = process_next(inbox, &clean, &ManualClock::new(T + 3600))
        .await
        .expect("step")
    else {
        panic!("{id} was not handed out again");
    };
    assert_eq!(second, Settled::Done, "the clean retry is settled done");
    assert_eq!(count().await, 1, "the retry wrote the effect exactly once");
    (first, after_first)
}

/// A tokio-postgres handler on connections of its own, ending as `ending`.
fn tokio_postgres_handler(
    url: &str,
    recorder: &PgRecorder,
    ending: Ending,
) -> impl EventHandler + use<> {
    let (url, recorder) = (url.to_owned(), recorder.clone());
    move |received: Received| {
        let (url, recorder) = (url.clone(), recorder.clone());
        async move {
            let mut client = pg::connect(&url).await;
            let tx = client.transaction().await?;
            if recorder.record(&tx, &received).await?.is_fresh() {
                insert_effect(&tx, &received).await?;
            }
            if ending != Ending::Clean {
                // An error logged and dropped: the transaction is now aborted.
                let _ = tx.execute("SELECT 1 / 0", &[]).await;
            }
            match ending {
                Ending::SwallowAndCommit => tx.commit().await?,
                _ => recorder.commit(tx, &received).await?,
            }
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_a_swallowed_failure_then_commit_is_not_settled_done_and_retried_once() {
    for ending in [
        Ending::SwallowAndCommit,
        Ending::SwallowAndCommitThroughRecorder,
    ] {
        let Some((url, schema, client, recorder)) = tenant_recorder("eo_edge_tokio", 2).await
        else {
            return;
        };
        let inbox = inbox_with(&url, &schema, "wh_swallow").await;
        let (first, effects_after_first) = swallowed_then_clean(
            &inbox,
            "wh_swallow",
            tokio_postgres_handler(&url, &recorder, ending),
            tokio_postgres_handler(&url, &recorder, Ending::Clean),
            async || effects(&client, "wh_swallow").await,
        )
        .await;
        assert_eq!(first, Settled::Retrying, "{ending:?}: not settled done");
        assert_eq!(effects_after_first, 0, "{ending:?}: rolled back");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadpool_a_swallowed_failure_then_commit_is_not_settled_done_and_retried_once() {
    use svc_postgres::deadpool_postgres::{Manager, Pool};
    let Some((url, schema, client, recorder)) = tenant_recorder("eo_edge_deadpool", 2).await else {
        return;
    };
    let config: svc_postgres::tokio_postgres::Config = url.parse().expect("config");
    let pool = Pool::builder(Manager::new(config, svc_postgres::tokio_postgres::NoTls))
        .max_size(2)
        .build()
        .expect("pool");
    let handler = |swallow: bool| {
        let (pool, recorder) = (pool.clone(), recorder.clone());
        move |received: Received| {
            let (pool, recorder) = (pool.clone(), recorder.clone());
            async move {
                let mut client = pool.get().await?;
                let tx = client.transaction().await?;
                if recorder.record(&tx, &received).await?.is_fresh() {
                    insert_effect(&tx, &received).await?;
                }
                if swallow {
                    let _ = tx.execute("SELECT 1 / 0", &[]).await;
                    tx.commit().await?;
                } else {
                    recorder.commit(tx, &received).await?;
                }
                Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
            }
        }
    };
    let inbox = inbox_with(&url, &schema, "wh_deadpool").await;
    let (first, effects_after_first) = swallowed_then_clean(
        &inbox,
        "wh_deadpool",
        handler(true),
        handler(false),
        async || effects(&client, "wh_deadpool").await,
    )
    .await;
    assert_eq!(first, Settled::Retrying);
    assert_eq!(effects_after_first, 0);
}

#[cfg(feature = "sqlx-postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlx_a_swallowed_failure_then_commit_is_not_settled_done_and_retried_once() {
    use super::postgres::{insert_effect_sqlx, sqlx_pool};
    for through_recorder in [false, true] {
        let Some((url, schema, client, recorder)) = tenant_recorder("eo_edge_sqlx", 2).await else {
            return;
        };
        let pool = sqlx_pool(&url, 2).await;
        let handler = |ending: Ending| {
            let (pool, recorder) = (pool.clone(), recorder.clone());
            move |received: Received| {
                let (pool, recorder) = (pool.clone(), recorder.clone());
                async move {
                    let mut tx = pool.begin().await?;
                    if recorder.record_sqlx(&mut tx, &received).await?.is_fresh() {
                        insert_effect_sqlx(&mut tx, &received).await?;
                    }
                    if ending != Ending::Clean {
                        let _ = sqlx::query("SELECT 1 / 0").execute(&mut *tx).await;
                    }
                    match ending {
                        Ending::SwallowAndCommit => tx.commit().await?,
                        _ => recorder.commit_sqlx(tx, &received).await?,
                    }
                    Ok::<(), sqlx::Error>(())
                }
            }
        };
        let swallowing = if through_recorder {
            Ending::SwallowAndCommitThroughRecorder
        } else {
            Ending::SwallowAndCommit
        };
        let inbox = inbox_with(&url, &schema, "wh_sqlx_swallow").await;
        let (first, effects_after_first) = swallowed_then_clean(
            &inbox,
            "wh_sqlx_swallow",
            handler(swallowing),
            handler(Ending::Clean),
            async || effects(&client, "wh_sqlx_swallow").await,
        )
        .await;
        assert_eq!(first, Settled::Retrying, "{swallowing:?}");
        assert_eq!(effects_after_first, 0, "{swallowing:?}");
    }
}

/// SQLite rolled the transaction back by itself (as on a full disk; here a `ROLLBACK` in its
/// place): the handler ignores the errors, and its own commit fails, ignored too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rusqlite_a_transaction_rolled_back_under_the_handler_is_not_settled_done() {
    let dir = tempfile::tempdir().expect("dir");
    let tenant = SqliteTenant::open(&dir.path().join("app.db"));
    let inbox =
        svc_receiver::sqlite::SqliteInbox::open(dir.path().join("inbox.db"), quick_policy())
            .expect("inbox");
    let (signature, body) = verified("wh_sqlite_swallow", T);
    inbox
        .accept(&webhook_id("wh_sqlite_swallow"), &signature, &body, T)
        .await
        .expect("accept");
    let handler = |through_recorder: bool| {
        let tenant = tenant.clone();
        move |received: Received| {
            let tenant = tenant.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    let mut conn = tenant.conn.lock().unwrap_or_else(PoisonError::into_inner);
                    let tx = conn.transaction().map_err(|e| e.to_string())?;
                    if tenant
                        .recorder
                        .record(&tx, &received)
                        .map_err(|e| e.to_string())?
                        .is_fresh()
                    {
                        tx.execute(
                            "INSERT INTO effects (webhook_id, call_id) VALUES (?1, ?2)",
                            [received.webhook_id.as_str(), &received.event.call_id],
                        )
                        .map_err(|e| e.to_string())?;
                    }
                    let _ = tx.execute_batch("ROLLBACK");
                    if through_recorder {
                        tenant
                            .recorder
                            .commit(tx, &received)
                            .map_err(|e| e.to_string())
                    } else {
                        let _ = tx.commit();
                        Ok(())
                    }
                })
                .await
                .map_err(|e| e.to_string())?
            }
        }
    };
    for (through_recorder, now) in [(false, T), (true, T + 3600)] {
        let Step::Settled(first) =
            process_next(&inbox, &handler(through_recorder), &ManualClock::new(now))
                .await
                .expect("step")
        else {
            panic!("not handed out");
        };
        assert_eq!(
            first,
            Settled::Retrying,
            "through recorder: {through_recorder}"
        );
        assert_eq!(tenant.effects("wh_sqlite_swallow"), 0);
    }
    let clean = tenant.handler();
    let Step::Settled(last) = process_next(&inbox, &clean, &ManualClock::new(T + 7200))
        .await
        .expect("step")
    else {
        panic!("not handed out");
    };
    assert_eq!(last, Settled::Done);
    assert_eq!(tenant.effects("wh_sqlite_swallow"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_mode_does_not_acknowledge_a_commit_the_database_turned_into_a_rollback() {
    use svc_receiver::axum::{WebhookReceiver, webhook_route};
    use svc_receiver::dedup::{DedupPolicy, MemoryDedupStore};
    let Some((url, _, client, recorder)) = tenant_recorder("eo_edge_direct", 2).await else {
        return;
    };
    let swallow = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let handler = {
        let (url, recorder, swallow) = (url.clone(), recorder.clone(), Arc::clone(&swallow));
        move |received: Received| {
            let (url, recorder) = (url.clone(), recorder.clone());
            let ending = if swallow.load(std::sync::atomic::Ordering::SeqCst) {
                Ending::SwallowAndCommit
            } else {
                Ending::Clean
            };
            async move {
                tokio_postgres_handler(&url, &recorder, ending)
                    .handle(received)
                    .await
                    .map_err(|e| e.to_string())
            }
        }
    };
    let receiver = WebhookReceiver::new(
        crate::helpers::verifier(),
        MemoryDedupStore::new(DedupPolicy::default(), 1000),
        handler,
    )
    .with_clock(ManualClock::new(T));
    let addr =
        crate::helpers::spawn(axum::Router::new().route("/webhooks", webhook_route(receiver)))
            .await;
    let (header, body) = super::delivery("wh_direct_swallow", T);
    let http = crate::helpers::client();
    let send = || {
        crate::helpers::post(
            &http,
            addr,
            Some("wh_direct_swallow"),
            Some(&header),
            body.clone(),
        )
    };
    let (status, _) = send().await;
    assert_eq!(status, 500, "not acknowledged");
    assert_eq!(effects(&client, "wh_direct_swallow").await, 0);
    swallow.store(false, std::sync::atomic::Ordering::SeqCst);
    let (status, _) = send().await;
    assert_eq!(status, 200, "the sender's retry is processed");
    let (status, _) = send().await;
    assert_eq!(status, 200, "and then a duplicate");
    assert_eq!(effects(&client, "wh_direct_swallow").await, 1);
}

/// Taken around every change to the test database's ACL: PostgreSQL refuses two at once
/// ("tuple concurrently updated", both rewrite the database's one catalog row), and the tests
/// that make roles run side by side.
const DATABASE_ACL_LOCK: i64 = 7_376_635;

/// Two login roles of a test's own, neither a superuser, both with `CREATE` on the database:
/// the receiver's and another's; and a schema owned by the receiver's, first in its path
/// after `"$user"`.
struct Roles {
    admin: tokio_postgres::Client,
    base: String,
    receiver: String,
    other: String,
    app_schema: String,
}

impl Roles {
    async fn create(test: &str) -> Option<Self> {
        let base = pg::server_url(test)?;
        let admin = pg::connect(&base).await;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let tag = format!("{}_{nanos}", std::process::id());
        let (receiver, other) = (format!("rcv_{tag}"), format!("other_{tag}"));
        let app_schema = format!("app_{tag}");
        let db: String = admin
            .query_one("SELECT current_database()::TEXT", &[])
            .await
            .expect("db")
            .get(0);
        admin
            .batch_execute(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({DATABASE_ACL_LOCK});
                 CREATE ROLE {receiver} LOGIN NOSUPERUSER;
                 CREATE ROLE {other} LOGIN NOSUPERUSER;
                 GRANT CREATE ON DATABASE {db} TO {receiver}, {other};
                 CREATE SCHEMA {app_schema} AUTHORIZATION {receiver}; COMMIT;"
            ))
            .await
            .expect("roles");
        Some(Self {
            admin,
            base,
            receiver,
            other,
            app_schema,
        })
    }

    /// The test server's URL logging in as `role` with `options` (percent-encoded).
    fn url(&self, role: &str, options: &str) -> String {
        let separator = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{separator}user={role}&options={options}", self.base)
    }

    /// The receiver's URL: the default `search_path` (`"$user"` first), then its schema.
    fn receiver_url(&self) -> String {
        self.url(
            &self.receiver,
            &format!("-c%20search_path%3D%22%24user%22%2C{}", self.app_schema),
        )
    }

    /// A client of the other role.
    async fn other_client(&self) -> tokio_postgres::Client {
        pg::connect(&self.url(&self.other, "-c%20search_path%3Dpg_catalog")).await
    }

    async fn drop_all(self) {
        for role in [&self.receiver, &self.other] {
            let _ = self
                .admin
                .batch_execute(&format!(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
                ))
                .await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let db: String = self
            .admin
            .query_one("SELECT current_database()::TEXT", &[])
            .await
            .expect("db")
            .get(0);
        let _ = self
            .admin
            .batch_execute(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({DATABASE_ACL_LOCK});
                 DROP OWNED BY {r}, {o} CASCADE; REVOKE ALL ON DATABASE {db} FROM {r}, {o};
                 DROP ROLE {r}; DROP ROLE {o}; COMMIT;",
                r = self.receiver,
                o = self.other
            ))
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_named_after_the_receivers_role_with_a_forged_inbox_reaches_nothing() {
    let Some(roles) = Roles::create("eo_edge_hijack").await else {
        return;
    };
    let url = roles.receiver_url();
    let inbox = PgInbox::new(
        PgDatabase::connect(&url).await.expect("database"),
        quick_policy(),
    );
    assert_eq!(inbox.database().schema(), roles.app_schema);
    let (signature, body) = verified("wh_real", T);
    inbox
        .accept(&webhook_id("wh_real"), &signature, &body, T)
        .await
        .expect("accept");

    // The other role plants a schema named after the receiver's role (first in its default
    // search_path) holding an inbox with a forged, never-signed delivery, open to it.
    let other = roles.other_client().await;
    let (_, forged_body) = verified("wh_forged", T);
    other
        .batch_execute(&format!(
            "CREATE SCHEMA {r};
             GRANT USAGE ON SCHEMA {r} TO {r};
             CREATE TABLE {r}.webhook_inbox (
                 seq BIGINT GENERATED ALWAYS AS IDENTITY, id TEXT PRIMARY KEY, body BYTEA NOT NULL,
                 received_at BIGINT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
                 due_at BIGINT NOT NULL, last_error TEXT);
             GRANT ALL ON {r}.webhook_inbox TO {r};",
            r = roles.receiver
        ))
        .await
        .expect("plant");
    other
        .execute(
            &format!(
                "INSERT INTO {}.webhook_inbox (id, body, received_at, state, due_at)
                 VALUES ('wh_forged', $1, 0, 'pending', 0)",
                roles.receiver
            ),
            &[&forged_body],
        )
        .await
        .expect("forged row");

    let handed = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let handed = Arc::clone(&handed);
        move |received: Received| {
            handed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(received.webhook_id.as_str().to_owned());
            async { Ok::<(), String>(()) }
        }
    };
    inbox.database().pool().close_idle();
    while let Step::Settled(_) = process_next(&inbox, &handler, &ManualClock::new(T + 10))
        .await
        .expect("step")
    {}
    assert_eq!(
        *handed.lock().unwrap_or_else(PoisonError::into_inner),
        vec!["wh_real".to_owned()],
        "only the signed delivery reached the handler"
    );
    assert_eq!(inbox.counts().await.expect("counts"), (0, 1, 0));

    // Opened again, the receiver finds the planted schema first in its path, and refuses it.
    let err = PgDatabase::connect(&url)
        .await
        .expect_err("a schema of another role is refused")
        .to_string();
    assert!(
        err.contains(&format!("schema \"{}\"", roles.receiver)),
        "{err}"
    );
    assert!(err.contains(&format!("role \"{}\"", roles.other)), "{err}");
    drop(inbox);
    roles.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_another_role_planted_before_the_first_start_are_refused_and_never_run() {
    let Some(roles) = Roles::create("eo_edge_planted").await else {
        return;
    };
    let other = roles.other_client().await;
    // The other role may create in the receiver's schema, as every role may in `public` on
    // PostgreSQL 14 and older.
    roles
        .admin
        .batch_execute(&format!(
            "GRANT CREATE, USAGE ON SCHEMA {} TO {}",
            roles.app_schema, roles.other
        ))
        .await
        .expect("grant");
    other
        .batch_execute(&format!(
            "CREATE TABLE {s}.planted_calls (n INT);
             GRANT ALL ON {s}.planted_calls TO PUBLIC;
             CREATE TABLE {s}.svc_receiver_schema (version INTEGER NOT NULL);
             INSERT INTO {s}.svc_receiver_schema VALUES (1);
             GRANT ALL ON {s}.svc_receiver_schema TO PUBLIC;
             CREATE FUNCTION {s}.svc_receiver_inbox_accept_many(
                 TEXT[], BYTEA[], BYTEA[], BIGINT[]) RETURNS TEXT[] LANGUAGE sql
                 AS 'INSERT INTO {s}.planted_calls VALUES (1) RETURNING ARRAY[''stored'']';",
            s = roles.app_schema
        ))
        .await
        .expect("plant");
    let url = roles.receiver_url();
    let err = PgDatabase::connect(&url)
        .await
        .expect_err("planted objects are refused")
        .to_string();
    assert!(err.contains("svc_receiver_inbox_accept_many"), "{err}");
    assert!(err.contains(&format!("role \"{}\"", roles.other)), "{err}");
    other
        .batch_execute(&format!(
            "DROP FUNCTION {}.svc_receiver_inbox_accept_many(TEXT[], BYTEA[], BYTEA[], BIGINT[])",
            roles.app_schema
        ))
        .await
        .expect("drop function");
    let err = PgDatabase::connect(&url)
        .await
        .expect_err("a planted version table is refused")
        .to_string();
    assert!(err.contains("svc_receiver_schema"), "{err}");

    // A schema of the crate's name made by the other role is refused too.
    other
        .batch_execute(&format!("CREATE SCHEMA svc_{}", roles.receiver))
        .await
        .expect("schema");
    let err = PgDatabase::connect_in_schema(&url, &format!("svc_{}", roles.receiver), 2)
        .await
        .expect_err("another role's schema is refused")
        .to_string();
    assert!(err.contains(&format!("role \"{}\"", roles.other)), "{err}");
    let ran: i64 = roles
        .admin
        .query_one(
            &format!("SELECT COUNT(*) FROM {}.planted_calls", roles.app_schema),
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(ran, 0, "nothing planted ran");
    roles
        .admin
        .batch_execute(&format!("DROP SCHEMA svc_{} CASCADE", roles.receiver))
        .await
        .expect("drop");
    roles.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_clock_runs_two_days_ahead_forgets_no_record_early() {
    let Some((url, schema, client, recorder)) = tenant_recorder("eo_edge_clock", 2).await else {
        return;
    };
    let mut tenant = pg::connect(&url).await;
    let on_time = recorder.with_retention(Duration::from_secs(3600));
    let first = received("wh_committed", T);
    assert!(
        super::postgres::write_effect(&mut tenant, &on_time, &first)
            .await
            .expect("record")
            .is_fresh()
    );
    // Another replica, its clock two days ahead, records another delivery: its prune runs.
    let database = PgDatabase::connect_in_schema(&url, &schema, 2)
        .await
        .expect("database");
    let ahead = database
        .recorder()
        .with_retention(Duration::from_secs(3600))
        .with_clock(ManualClock::new(T + 2 * 86_400));
    let other = received("wh_other", T + 2 * 86_400);
    assert!(
        super::postgres::write_effect(&mut tenant, &ahead, &other)
            .await
            .expect("record")
            .is_fresh()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The committed id comes back (the sender's retry) to either replica: a duplicate.
    for recorder in [&on_time, &ahead] {
        assert_eq!(
            super::postgres::write_effect(&mut tenant, recorder, &first)
                .await
                .expect("again"),
            Recorded::Duplicate
        );
    }
    assert_eq!(effects(&client, "wh_committed").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_older_than_the_retention_keeps_its_record_and_its_requeue_writes_nothing() {
    let Some((url, schema, client, recorder)) = tenant_recorder("eo_edge_dead", 2).await else {
        return;
    };
    let mut tenant = pg::connect(&url).await;
    let inbox = inbox_with(&url, &schema, "wh_dead").await;
    // The handler commits its effect, but its answer is lost: the entry dies (one attempt).
    let recorder = recorder.with_retention(Duration::from_secs(3600));
    let inbox = PgInbox::new(
        inbox.database().clone(),
        svc_receiver::inbox::InboxPolicy {
            max_attempts: 1,
            ..quick_policy()
        },
    );
    let committed_then_failed = {
        let (url, recorder) = (url.clone(), recorder.clone());
        move |received: Received| {
            let (url, recorder) = (url.clone(), recorder.clone());
            async move {
                let mut client = pg::connect(&url).await;
                super::postgres::write_effect(&mut client, &recorder, &received)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())?;
                Err::<(), String>("the answer to the commit was lost".into())
            }
        }
    };
    let step = process_next(&inbox, &committed_then_failed, &ManualClock::new(T))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Dead));
    assert_eq!(effects(&client, "wh_dead").await, 1);
    // A plain old record beside it, both recorded two days ago by the database's clock.
    assert!(
        super::postgres::write_effect(&mut tenant, &recorder, &received("wh_old", T))
            .await
            .expect("old")
            .is_fresh()
    );
    client
        .batch_execute(&format!(
            "UPDATE {schema}.webhook_recorded SET recorded_at = recorded_at - INTERVAL '2 days'"
        ))
        .await
        .expect("backdate");
    // A recorder with a fresh pace prunes at its first record.
    let pruning = PgDatabase::connect_in_schema(&url, &schema, 2)
        .await
        .expect("database")
        .recorder()
        .with_retention(Duration::from_secs(3600));
    assert!(
        super::postgres::write_effect(&mut tenant, &pruning, &received("wh_new", T))
            .await
            .expect("new")
            .is_fresh()
    );
    let recorded = async |id: &str| -> i64 {
        client
            .query_one(
                &format!("SELECT COUNT(*) FROM {schema}.webhook_recorded WHERE id = $1"),
                &[&id],
            )
            .await
            .expect("count")
            .get(0)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while recorded("wh_old").await > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(recorded("wh_old").await, 0, "past the retention: forgotten");
    assert_eq!(
        recorded("wh_dead").await,
        1,
        "a dead letter's record is kept"
    );

    // Requeued and handled: a duplicate, nothing written again.
    let clock = ManualClock::new(T + 5 * 86_400);
    assert!(
        inbox
            .requeue_dead_letter(&webhook_id("wh_dead"), clock.now())
            .await
            .expect("requeue")
    );
    let handler = {
        let (url, recorder) = (url.clone(), recorder.clone());
        move |received: Received| {
            let (url, recorder) = (url.clone(), recorder.clone());
            async move {
                let mut client = pg::connect(&url).await;
                super::postgres::write_effect(&mut client, &recorder, &received)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        }
    };
    let step = process_next(&inbox, &handler, &ManualClock::new(clock.now()))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Done));
    assert_eq!(
        effects(&client, "wh_dead").await,
        1,
        "its effect is not repeated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_dead_letter_older_than_the_retention_keeps_its_record_with_the_inbox_given() {
    let dir = tempfile::tempdir().expect("dir");
    let inbox = svc_receiver::sqlite::SqliteInbox::open(
        dir.path().join("inbox.db"),
        svc_receiver::inbox::InboxPolicy {
            max_attempts: 1,
            ..quick_policy()
        },
    )
    .expect("inbox");
    let clock = Arc::new(ManualClock::new(T));
    let mut tenant = SqliteTenant::open(&dir.path().join("app.db"));
    tenant.recorder = tenant
        .recorder
        .clone()
        .with_retention(Duration::from_secs(3600))
        .with_clock(Arc::clone(&clock))
        .with_inbox(&inbox);
    for id in ["wh_sqlite_dead", "wh_sqlite_old"] {
        let (signature, body) = verified(id, T);
        inbox
            .accept(&webhook_id(id), &signature, &body, T)
            .await
            .expect("accept");
    }
    // The first commits its effect but reports a failure (a lost answer): it dies with its
    // record committed. The second is handled and done.
    tenant
        .fail_after_commit
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let step = process_next(&inbox, &tenant.handler(), &ManualClock::new(T))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Dead));
    tenant
        .fail_after_commit
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let step = process_next(&inbox, &tenant.handler(), &ManualClock::new(T))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Done));
    // Two days later a record prunes: the done one's record goes, the dead letter's stays.
    clock.set(T + 2 * 86_400);
    tenant
        .write(&received("wh_sqlite_prune", T + 2 * 86_400))
        .expect("prune");
    let recorded = |id: &str| -> i64 {
        let conn = rusqlite::Connection::open(dir.path().join("app.db")).expect("open");
        conn.query_row(
            "SELECT COUNT(*) FROM webhook_recorded WHERE id = ?1",
            [id],
            |row| row.get(0),
        )
        .expect("count")
    };
    assert_eq!(
        recorded("wh_sqlite_old"),
        0,
        "past the retention: forgotten"
    );
    assert_eq!(
        recorded("wh_sqlite_dead"),
        1,
        "a dead letter's record is kept"
    );
    assert!(
        inbox
            .requeue_dead_letter(&webhook_id("wh_sqlite_dead"), clock.now())
            .await
            .expect("requeue")
    );
    let step = process_next(&inbox, &tenant.handler(), &ManualClock::new(clock.now()))
        .await
        .expect("step");
    assert_eq!(step, Step::Settled(Settled::Done));
    assert_eq!(
        tenant.effects("wh_sqlite_dead"),
        1,
        "its effect is not repeated"
    );
}

/// Direct mode on two replicas of one database, each with the in-memory dedup store the README
/// recommends: a delivery, its signature replayed under another webhook id to the other
/// replica (the id is not signed), and the sender's retry there: one effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_under_another_id_to_another_replica_is_recorded_as_a_duplicate() {
    use svc_receiver::axum::{WebhookReceiver, webhook_route};
    use svc_receiver::dedup::{DedupPolicy, MemoryDedupStore};
    let Some((url, _, client, recorder)) = tenant_recorder("eo_edge_replay", 2).await else {
        return;
    };
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let handler = Arc::new(tokio_postgres_handler(&url, &recorder, Ending::Clean));
        let handler = move |received: Received| {
            let handler = Arc::clone(&handler);
            async move { handler.handle(received).await.map_err(|e| e.to_string()) }
        };
        let receiver = WebhookReceiver::new(
            crate::helpers::verifier(),
            MemoryDedupStore::new(DedupPolicy::default(), 1000),
            handler,
        )
        .with_clock(ManualClock::new(T));
        replicas.push(
            crate::helpers::spawn(axum::Router::new().route("/webhooks", webhook_route(receiver)))
                .await,
        );
    }
    let http = crate::helpers::client();
    let (header, body) = super::delivery("wh_replayed", T);
    let (status, _) = crate::helpers::post(
        &http,
        replicas[0],
        Some("wh_replayed"),
        Some(&header),
        body.clone(),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = crate::helpers::post(
        &http,
        replicas[1],
        Some("wh_forged_id"),
        Some(&header),
        body.clone(),
    )
    .await;
    assert_eq!(status, 200, "answered as a duplicate: harmless");
    assert_eq!(
        effects(&client, "wh_forged_id").await,
        0,
        "the replay wrote nothing"
    );
    let (retry_header, _) = super::delivery("wh_replayed", T + 1);
    let (status, _) = crate::helpers::post(
        &http,
        replicas[1],
        Some("wh_replayed"),
        Some(&retry_header),
        body,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(effects(&client, "wh_replayed").await, 1, "one effect");
}

/// A tenant whose only pool is sqlx's: the recorder made on it (no pool of the crate's), in
/// direct mode with the in-memory dedup store. A swallowed failure is not acknowledged (the
/// lookup runs on the tenant's pool), the retry writes once, and old records are pruned there.
#[cfg(feature = "sqlx-postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlx_tenant_with_no_other_pool_gets_exactly_once_and_its_checks() {
    use super::postgres::{insert_effect_sqlx, sqlx_pool, tenant};
    use svc_receiver::axum::{WebhookReceiver, webhook_route};
    use svc_receiver::dedup::{DedupPolicy, MemoryDedupStore};
    let Some((url, schema, client)) = tenant("eo_edge_sqlx_only").await else {
        return;
    };
    let pool = sqlx_pool(&url, 4).await;
    let recorder = PgRecorder::on_sqlx(pool.clone(), &schema)
        .await
        .expect("the crate's tables through sqlx")
        .with_retention(Duration::from_secs(3600));
    let swallow = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let handler = {
        let (pool, recorder, swallow) = (pool.clone(), recorder.clone(), Arc::clone(&swallow));
        move |received: Received| {
            let (pool, recorder) = (pool.clone(), recorder.clone());
            let swallowing = swallow.load(std::sync::atomic::Ordering::SeqCst);
            async move {
                let mut tx = pool.begin().await?;
                if recorder.record_sqlx(&mut tx, &received).await?.is_fresh() {
                    insert_effect_sqlx(&mut tx, &received).await?;
                }
                if swallowing {
                    let _ = sqlx::query("SELECT 1 / 0").execute(&mut *tx).await;
                }
                tx.commit().await
            }
        }
    };
    let receiver = WebhookReceiver::new(
        crate::helpers::verifier(),
        MemoryDedupStore::new(DedupPolicy::default(), 1000),
        handler,
    )
    .with_clock(ManualClock::new(T));
    let addr =
        crate::helpers::spawn(axum::Router::new().route("/webhooks", webhook_route(receiver)))
            .await;
    let http = crate::helpers::client();
    let (header, body) = super::delivery("wh_sqlx_only", T);
    let send = || {
        crate::helpers::post(
            &http,
            addr,
            Some("wh_sqlx_only"),
            Some(&header),
            body.clone(),
        )
    };
    assert_eq!(send().await.0, 500, "not acknowledged");
    assert_eq!(effects(&client, "wh_sqlx_only").await, 0);
    swallow.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(send().await.0, 200);
    assert_eq!(send().await.0, 200);
    assert_eq!(effects(&client, "wh_sqlx_only").await, 1, "one effect");

    // Records past the retention (by the database's clock) are pruned on the tenant's pool.
    client
        .batch_execute(&format!(
            "UPDATE {schema}.webhook_recorded SET recorded_at = recorded_at - INTERVAL '2 days'"
        ))
        .await
        .expect("backdate");
    let fresh_pace = PgRecorder::on_sqlx(pool.clone(), &schema)
        .await
        .expect("again")
        .with_retention(Duration::from_secs(3600));
    let mut tx = pool.begin().await.expect("begin");
    let next = received("wh_sqlx_next", T);
    assert!(
        fresh_pace
            .record_sqlx(&mut tx, &next)
            .await
            .expect("record")
            .is_fresh()
    );
    fresh_pace.commit_sqlx(tx, &next).await.expect("commit");
    let count = async || -> i64 {
        client
            .query_one(
                &format!(
                    "SELECT COUNT(*) FROM {schema}.webhook_recorded WHERE id = 'wh_sqlx_only'"
                ),
                &[],
            )
            .await
            .expect("count")
            .get(0)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while count().await > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(count().await, 0, "pruned through the tenant's pool");
}
