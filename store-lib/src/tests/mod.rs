//! Unit tests of the store: opening and migrating ([`opening`]), storing calls (new, changed,
//! unchanged) and failures ([`calls`]), how a call reached the store and the ledger
//! ([`ledger`]), export and the report ([`reading`]), and what holds on PostgreSQL only
//! ([`postgres`]). The helpers they share are here.

mod calls;
mod ledger;
mod opening;
#[cfg(feature = "postgres")]
mod postgres;
mod reading;

use serde_json::{Value, json};
use svc_contract::{CallScored, CallSource};

#[cfg(feature = "postgres")]
use super::StoreLocation;
use super::calls::Writer;
use super::deliveries::NewDelivery;
use super::export::ExportFormat;
use super::{SCHEMA_VERSION, Store, StoreError};
use svc_client::RawCallDetail;
use svc_client::{CallRow, RawCallRow};
use svc_reconcile::{Arrival, Stored};

fn detail_json(id: &str, source: &str, scored_at: &str, overall: f64) -> Value {
    json!({
        "id": id, "source": source, "agentId": "svc_agent_1", "agencyId": "svc_agency_1",
        "platformAgentId": "rep-1", "platformAgencyId": "ag-1", "externalUserId": null,
        "externalAgencyId": null, "drillKey": null,
        "startedAt": "2026-03-01T10:00:00.000Z", "endedAt": "2026-03-01T10:05:00.000Z",
        "durationSec": 300, "scoredAt": scored_at, "status": "scored",
        "transcript": [{"role": "agent", "content": "Hello"}],
        "score": {"overallScore": overall, "summary": "s", "feedback": "f", "newKey": [1, 2]},
        "audioUrl": null, "audioUrlExpiresAt": null, "waveform": null,
        "createdAt": "2026-03-01T10:05:00.000Z", "updatedAt": scored_at
    })
}

fn detail(value: &Value) -> RawCallDetail {
    RawCallDetail::parse(value.to_string().as_bytes()).expect("a call detail")
}

fn row(value: &Value) -> RawCallRow {
    let mut row = value.clone();
    for key in [
        "status",
        "transcript",
        "score",
        "audioUrl",
        "audioUrlExpiresAt",
        "waveform",
    ] {
        row.as_object_mut().expect("object").remove(key);
    }
    RawCallRow {
        row: serde_json::from_value::<CallRow>(row.clone()).expect("a row"),
        json: row.to_string(),
    }
}

fn writer(missed_before_ms: i64, ledger_since_ms: Option<i64>) -> Writer {
    Writer {
        by: "reconcile",
        run_id: Some(1),
        now: "2026-03-02T00:00:00.000Z".into(),
        ledger_since_ms,
        missed_before_ms,
    }
}

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open_or_create(dir.path().join("store.db")).expect("store");
    (dir, store)
}

/// Runs `check` on a fresh store of each backend: a file, and a fresh schema of the test
/// PostgreSQL (skipped with a loud line when `SVC_TEST_POSTGRES_URL` is not set).
fn on_each_backend(test: &str, check: impl Fn(&Store)) {
    let (_dir, store) = store();
    check(&store);
    #[cfg(feature = "postgres")]
    on_postgres(test, check);
    #[cfg(not(feature = "postgres"))]
    let _ = test;
}

#[cfg(feature = "postgres")]
fn on_postgres(test: &str, check: impl Fn(&Store)) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    if let Some(url) = runtime.block_on(svc_test_support::postgres::fresh_schema_url(test)) {
        let location = StoreLocation::parse(&url).expect("a location");
        check(&Store::open_or_create(location).expect("a PostgreSQL store"));
    }
}

/// The text columns of the one row of `sql`.
fn texts(store: &Store, sql: &str) -> Vec<String> {
    store
        .read(|db| {
            let row = db.query_one(sql, &[])?;
            (0..row.0.len()).map(|i| row.text(i)).collect()
        })
        .expect("one row")
}

/// Unix ms of 2026-03-01T10:06:00Z, a minute after the test calls are scored.
const AFTER_SCORING: i64 = 1_772_359_560_000;

fn event(call_id: &str, success: bool) -> CallScored {
    let event = CallScored::scored(
        call_id,
        CallSource::Roleplay,
        "svc_agent_1",
        "svc_agency_1",
        "2026-03-01T10:05:30.000Z",
        "req_1",
    );
    if success {
        event
    } else {
        event.not_scored(
            svc_contract::FailureReason::ScoringIncomplete,
            "rep never spoke",
        )
    }
}

fn record(store: &Store, webhook_id: &str, event: &CallScored, verified_at: &str) -> bool {
    let body = serde_json::to_vec(event).expect("body");
    store
        .record_delivery(&NewDelivery {
            webhook_id,
            event,
            body: &body,
            verified_at,
        })
        .expect("record")
}
