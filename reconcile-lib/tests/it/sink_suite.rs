//! The conformance suite of the [`svc_reconcile::Sink`] trait (`svc_reconcile::testing`) over
//! this crate's sinks: every behaviour over the memory sink, the SQLite store and the
//! PostgreSQL store (a fresh schema of the server `SVC_TEST_POSTGRES_URL` names; skipped with a
//! loud line without one), and those every sink owes over a tenant's sink that implements only
//! the required methods (`own_sink`).

use svc_reconcile::MemorySink;
#[cfg(feature = "sqlite")]
use svc_reconcile::store::Store;
#[cfg(feature = "postgres")]
use svc_reconcile::store::StoreLocation;
use svc_reconcile::testing::sink_suite;

async fn memory(_: &str) -> Option<MemorySink> {
    Some(MemorySink::default())
}

async fn own_sink(_: &str) -> Option<super::own_sink::OwnSink> {
    Some(super::own_sink::OwnSink::default())
}

#[cfg(feature = "sqlite")]
async fn sqlite(_: &str) -> Option<Store> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.keep().join("store.db");
    let store = tokio::task::spawn_blocking(move || Store::open_or_create(path))
        .await
        .expect("open task")
        .expect("a SQLite store");
    Some(store)
}

#[cfg(feature = "postgres")]
async fn postgres(test: &str) -> Option<Store> {
    let url = svc_test_support::postgres::fresh_schema_url(test).await?;
    let location = StoreLocation::parse(&url).expect("a PostgreSQL URL");
    let store = tokio::task::spawn_blocking(move || Store::open_or_create(location))
        .await
        .expect("open task")
        .expect("a PostgreSQL store");
    Some(store)
}

sink_suite!(on_memory, memory);
sink_suite!(on_own_sink, own_sink; required);
#[cfg(feature = "sqlite")]
sink_suite!(on_sqlite, sqlite);
#[cfg(feature = "postgres")]
sink_suite!(on_postgres, postgres);
