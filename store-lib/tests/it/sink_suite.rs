//! The conformance suite of the [`svc_reconcile::Sink`] trait (`svc_reconcile::testing`), every
//! behaviour, over a store in a fresh SQLite file and over one in a fresh schema of the server
//! `SVC_TEST_POSTGRES_URL` names (skipped with a loud line without one).

use svc_reconcile::testing::sink_suite;
use svc_store::{Store, StoreLocation};

async fn sqlite(_: &str) -> Option<Store> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.keep().join("store.db");
    let store = tokio::task::spawn_blocking(move || Store::open_or_create(path))
        .await
        .expect("open task")
        .expect("a SQLite store");
    Some(store)
}

async fn postgres(test: &str) -> Option<Store> {
    let url = svc_test_support::postgres::fresh_schema_url(test).await?;
    let location = StoreLocation::parse(&url).expect("a PostgreSQL URL");
    let store = tokio::task::spawn_blocking(move || Store::open_or_create(location))
        .await
        .expect("open task")
        .expect("a PostgreSQL store");
    Some(store)
}

sink_suite!(on_sqlite, sqlite);
sink_suite!(on_postgres, postgres);
