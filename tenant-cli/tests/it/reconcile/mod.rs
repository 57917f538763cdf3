//! `svc-cli reconcile` run as a binary against the stateful fake of `GET /calls`
//! and `GET /calls/{callId}` (`svc_fixtures::calls`), checked by what a user sees: the exit
//! code, the `--json` report, and what the store file holds afterwards.
//!
//! Submodules: [`runs`] (first runs, reruns, the report, dry runs, bounded detail reads),
//! [`windows`] (what each run lists), [`deliveries`] (recovered or delivered), [`changes`]
//! (silent re-dispositions), [`faults`] (a failing or misbehaving service), [`call_failures`]
//! (a listed call whose detail fails, a revoked key), [`store_file`] (paths, foreign files,
//! schema versions), [`lock`] (overlapping runs), [`kill`] (SIGKILL between two pages),
//! [`store_commands`] (`store stats` and `store export`), [`network`] (a slow or lossy network
//! between the run and the sandbox service, through a fault-injecting proxy).

mod call_failures;
mod changes;
mod deliveries;
mod faults;
mod kill;
mod lock;
mod network;
mod runs;
mod store_commands;
mod store_file;
mod windows;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::{Value, json};
use svc_contract::{CallScored, CallSource};
use svc_fixtures::calls::Calls;
use svc_store::Store;
use svc_store::deliveries::NewDelivery;
use wiremock::MockServer;

use crate::helpers::{Run, Sandbox};

/// A fake service, a sandbox pointed at it, and the store path the runs use.
pub(super) struct Fake {
    pub(super) server: MockServer,
    pub(super) calls: Calls,
    pub(super) sandbox: Sandbox,
    pub(super) store: PathBuf,
}

pub(super) async fn fake() -> Fake {
    let server = MockServer::start().await;
    let calls = Calls::mount(&server).await;
    let sandbox = Sandbox::for_server(&server);
    let store = sandbox.path("calls.db");
    Fake {
        server,
        calls,
        sandbox,
        store,
    }
}

impl Fake {
    /// `svc-cli reconcile --store <store> --json --retry-base-ms 1 <flags>`.
    pub(super) async fn reconcile(&self, flags: &[&str]) -> Run {
        self.reconcile_at(&self.store, flags).await
    }

    /// The same on another store.
    pub(super) async fn reconcile_at(&self, store: &Path, flags: &[&str]) -> Run {
        self.sandbox.run(&reconcile_args(store, flags)).await
    }
}

/// The arguments of a reconcile run on `store` with `flags`.
pub(super) fn reconcile_args<'a>(store: &'a Path, flags: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "reconcile",
        "--store",
        store.to_str().expect("utf-8 path"),
        "--json",
        "--retry-base-ms",
        "1",
    ];
    args.extend_from_slice(flags);
    args
}

pub(super) fn secs_ago(n: i64) -> DateTime<Utc> {
    Utc::now() - chrono::Duration::seconds(n)
}

pub(super) fn mins_ago(n: i64) -> DateTime<Utc> {
    Utc::now() - chrono::Duration::minutes(n)
}

pub(super) fn hours_ago(n: i64) -> DateTime<Utc> {
    Utc::now() - chrono::Duration::hours(n)
}

pub(super) fn days_ago(n: i64) -> DateTime<Utc> {
    Utc::now() - chrono::Duration::days(n)
}

/// A timestamp in the contract's form.
pub(super) fn ts(at: DateTime<Utc>) -> String {
    svc_reconcile::time::format_ts(at)
}

/// A contract timestamp moved back by `by`.
pub(super) fn minus(text: &str, by: chrono::Duration) -> String {
    ts(svc_reconcile::time::parse_ts(text).expect("a timestamp") - by)
}

/// The `--json` report of a run.
pub(super) fn report(run: &Run) -> Value {
    run.json()
}

/// One source's part of a report.
pub(super) fn source_report(report: &Value, source: &str) -> Value {
    report["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .find(|s| s["source"] == json!(source))
        .unwrap_or_else(|| panic!("no {source} in {report}"))
        .clone()
}

/// The ids of a JSON array of strings, sorted.
pub(super) fn sorted_ids(value: &Value) -> Vec<String> {
    let mut ids: Vec<String> = value
        .as_array()
        .expect("an array of ids")
        .iter()
        .map(|v| v.as_str().expect("an id").to_owned())
        .collect();
    ids.sort();
    ids
}

pub(super) fn sorted(ids: &[String]) -> Vec<String> {
    let mut ids = ids.to_vec();
    ids.sort();
    ids
}

/// The store opened read-only, as another program would look at it.
pub(super) fn db(path: &Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open the store")
}

/// Every stored call: id → detail JSON text.
pub(super) fn stored_details(path: &Path) -> BTreeMap<String, String> {
    let conn = db(path);
    let mut stmt = conn
        .prepare("SELECT id, detail_json FROM calls")
        .expect("calls table");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// The watermark of a source.
pub(super) fn watermark(path: &Path, source: &str) -> Option<String> {
    db(path)
        .query_row(
            "SELECT watermark FROM sync_state WHERE source = ?1",
            [source],
            |r| r.get(0),
        )
        .optional()
        .expect("sync_state")
        .flatten()
}

/// A single number out of the store.
pub(super) fn number(path: &Path, sql: &str) -> i64 {
    db(path)
        .query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// How each stored call reached the store: id → `webhook`, `awaiting`, `recovered`, `backfill`.
pub(super) fn deliveries(path: &Path) -> BTreeMap<String, String> {
    let conn = db(path);
    let mut stmt = conn
        .prepare("SELECT id, delivery FROM calls")
        .expect("calls table");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// Records in the store's ledger a verified `call.scored` delivery for `call_id`, as
/// `webhook serve` does.
pub(super) fn record_webhook(store: &Path, call_id: &str, source: CallSource, at: DateTime<Utc>) {
    let store = Store::open_or_create(store).expect("open the store");
    let event = CallScored::scored(
        call_id,
        source,
        "svc_agent_fx0001",
        "svc_agency_fx0001",
        ts(at),
        "req_test0001",
    );
    let body = serde_json::to_vec(&event).expect("event body");
    let webhook_id = format!("wh_{call_id}");
    let recorded = store
        .record_delivery(&NewDelivery {
            webhook_id: &webhook_id,
            event: &event,
            body: &body,
            verified_at: &ts(at),
        })
        .expect("record the delivery");
    assert!(recorded, "a first delivery of {webhook_id}");
}

/// Asserts that every stored call is one the fake serves, with its detail exactly as served.
pub(super) fn assert_stored_as_served(fake: &Fake) -> BTreeMap<String, String> {
    let stored = stored_details(&fake.store);
    for (id, detail) in &stored {
        let served = fake.calls.detail_text(id).expect("a call the fake serves");
        assert_eq!(detail, &served, "call {id} is stored exactly as served");
    }
    stored
}
