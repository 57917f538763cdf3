//! A full disk under the service's ingestion and its webhook outbox: the database
//! and the recording archive on a small tmpfs this test mounts, filled to the last byte. No
//! record is reported stored unless it is, nothing is half-stored, the database stays intact,
//! and once space returns the same file stores every call exactly once and every queued
//! webhook goes out once. Skipped, with a line on stderr, where a tmpfs cannot be mounted
//! (it needs root or CAP_SYS_ADMIN): `svc_test_support::tmpfs`.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use svc_service::db::TenantChange;
use svc_service::faults::Faults;
use svc_service::realcall::audio::Archive;
use svc_service::realcall::ingest::{Ingest, IngestError};
use svc_test_support::tmpfs::Tmpfs;

use super::operator::{array, file, svc};
use super::support::*;
use crate::practice_helpers::Received;
use svc_test_support::logs::Logs;

/// `PRAGMA integrity_check` of the database at `path`.
fn integrity(path: &Path) -> String {
    let conn = rusqlite::Connection::open(path).expect("open the database");
    conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity check")
}

/// Three records, each with its own 2 MiB recording (so each needs a new archive file, larger
/// than what a tmpfs's per-CPU accounting may still hand out once it reported itself full).
fn records(world: &World) -> Vec<Value> {
    (0..3u8)
        .map(|n| {
            let name = format!("big-{n}.wav");
            world.recording(&name, &vec![n; 2 * 1024 * 1024]);
            with(
                record(&format!("d-{n}"), &world.agency),
                json!({ "recording": name }),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_ingestion_on_a_full_disk_stores_nothing_and_the_same_file_stores_everything_later() {
    let Some(fs) = Tmpfs::mount("full-disk ingestion") else {
        return;
    };
    let db_path = fs.path().join("service.db");
    let mut world = World::with_config(|config| config.db_path = db_path.clone()).await;
    let records = records(&world);
    let ingest = Ingest::new(
        world.app.db.clone(),
        world.archive(),
        world.app.clock.clone(),
        world.dir.path(),
    );

    fs.fill();
    // Where the disk runs out: copying a recording, or the database.
    let full = ["No space left on device", "database or disk is full"];
    // The operator's command says why and exits 75 (temporary: the same file again later).
    let path = file(&world, "records.json", &array(&records));
    let tenant = world.tenant.id.clone();
    let args = ["calls", "ingest-real", "--tenant", &tenant, "--file", &path];
    let run = svc(&world, &args).await.expect(75);
    assert!(
        run.stderr.contains("ingest the same file again"),
        "{}",
        run.stderr
    );
    assert!(
        full.iter().any(|says| run.stderr.contains(says)),
        "{}",
        run.stderr
    );
    assert!(
        full.iter()
            .all(|says| run.stderr.matches(says).count() <= 1),
        "the cause is said once: {}",
        run.stderr
    );
    let failed = ingest
        .ingest(&world.tenant.id, records.iter().cloned().map(Ok).collect())
        .await;
    let error = failed
        .expect_err("a full disk fails the ingestion")
        .to_string();
    assert!(full.iter().any(|says| error.contains(says)), "{error}");
    // A recording copied whole before the disk ran out may stay, as an orphan the sweep
    // deletes; a partial copy never does.
    let partial: Vec<PathBuf> = world
        .archived_files()
        .into_iter()
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    assert!(partial.is_empty(), "{partial:?}");
    assert!(world.listed_ids().await.is_empty(), "nothing stored");
    assert!(world.deliveries().await.is_empty(), "nothing queued");
    assert_eq!(integrity(&db_path), "ok");
    // The API keeps answering: reads as usual, a write with an error in the envelope.
    world.app.get(&world.tenant, "/v1/agents").await.expect(200);
    let write = json!({ "platformAgencyId": "ag-full", "name": "Full" });
    let refused = world.app.post(&world.tenant, "/v1/agencies", write).await;
    assert!(refused.status.is_server_error(), "{}", refused.body);
    assert!(
        refused.body["error"]["code"].is_string(),
        "{}",
        refused.body
    );

    fs.free();
    let outcomes = world.ingest(records).await;
    let stored: Vec<String> = outcomes.iter().map(stored_id).collect();
    assert_eq!(world.listed_ids().await.len(), 3);
    let received = world.received(3).await;
    let mut delivered: Vec<String> = received
        .iter()
        .map(|d| d.json()["callId"].as_str().expect("callId").to_owned())
        .collect();
    delivered.sort();
    let mut expected = stored.clone();
    expected.sort();
    assert_eq!(delivered, expected, "each call's webhook once");
    world.sink.assert_silent(Duration::from_millis(500)).await;
    assert_eq!(integrity(&db_path), "ok");
}

#[tokio::test]
async fn a_full_database_disk_after_the_archive_was_written_stores_nothing_either() {
    let Some(fs) = Tmpfs::mount("full-disk database") else {
        return;
    };
    let db_path = fs.path().join("service.db");
    let mut world = World::with_config(|config| config.db_path = db_path.clone()).await;
    let records = records(&world);
    // The archive on another file system, with room: only the database's writes fail.
    let archive = world.dir.path().join("archive");
    let ingest = Ingest::new(
        world.app.db.clone(),
        Archive::new(&archive),
        world.app.clock.clone(),
        world.dir.path(),
    );

    fs.fill();
    let failed = ingest
        .ingest(&world.tenant.id, records.iter().cloned().map(Ok).collect())
        .await;
    assert!(
        matches!(failed, Err(IngestError::Db(_))),
        "a full database disk fails the ingestion: {failed:?}"
    );
    assert!(world.listed_ids().await.is_empty(), "nothing stored");
    assert!(world.deliveries().await.is_empty(), "nothing queued");
    assert_eq!(integrity(&db_path), "ok");

    fs.free();
    let outcomes = ingest
        .ingest(&world.tenant.id, records.into_iter().map(Ok).collect())
        .await
        .expect("space is back");
    outcomes.iter().for_each(|o| {
        stored_id(o);
    });
    assert_eq!(world.listed_ids().await.len(), 3);
    world.received(3).await;
    world.sink.assert_silent(Duration::from_millis(500)).await;
    assert_eq!(integrity(&db_path), "ok");
}

#[tokio::test]
async fn the_outbox_on_a_full_disk_sends_every_queued_webhook_when_space_returns() {
    let Some(fs) = Tmpfs::mount("full-disk outbox") else {
        return;
    };
    let (logs, _guard) = Logs::capture_at(tracing::Level::INFO);
    let db_path = fs.path().join("service.db");
    let mut world = World::with_config(|config| config.db_path = db_path.clone()).await;
    // First attempts put off a minute (of the manual clock): queued, not sent yet.
    let faults = Faults {
        delay_deliveries_ms: 60_000,
        ..Faults::default()
    };
    world
        .app
        .change(&world.tenant, TenantChange::Faults(faults))
        .await;
    let records = records(&world);
    let stored: Vec<String> = world.ingest(records).await.iter().map(stored_id).collect();
    world.sink.assert_silent(Duration::from_millis(300)).await;

    fs.fill();
    world.app.clock.advance(chrono::Duration::seconds(61));
    // The worker wakes at least every 5 s and, while it cannot claim, tries every second.
    let mut received = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(6);
    while let Some(delivery) = world
        .sink
        .within(until.saturating_duration_since(tokio::time::Instant::now()))
        .await
    {
        received.push(delivery);
    }
    let _ = writeln!(
        std::io::stderr(),
        "full-disk outbox: {} of 3 webhooks sent while the disk was full",
        received.len()
    );

    // Every loop fails each second; the log says so once (then once a minute).
    let said = logs.lines_with("webhook outbox storage failure");
    assert_eq!(said.len(), 1, "{said:#?}");

    fs.free();
    // Past any lease a claim on the full disk may have taken.
    world.app.clock.advance(chrono::Duration::seconds(61));
    let call_of = |d: &Received| d.json()["callId"].as_str().expect("callId").to_owned();
    let calls = |received: &[Received]| received.iter().map(call_of).collect::<BTreeSet<_>>();
    while calls(&received).len() < 3 {
        received.push(world.sink.next().await);
    }
    world.sink.assert_silent(Duration::from_secs(1)).await;
    assert_eq!(
        calls(&received),
        stored.into_iter().collect::<BTreeSet<_>>(),
        "every queued webhook went out"
    );
    // A repeat (a claim that went through while recording the attempt did not) carries the
    // same webhook id, so a receiver drops it.
    for call in calls(&received) {
        let ids: BTreeSet<String> = received
            .iter()
            .filter(|d| call_of(d) == call)
            .map(Received::webhook_id)
            .collect();
        assert_eq!(ids.len(), 1, "{call}: {ids:?}");
    }
    assert_eq!(
        logs.lines_with("webhook outbox storage works again").len(),
        1
    );
    assert_eq!(logs.lines_with("webhook outbox storage failure").len(), 1);
    assert_eq!(integrity(&db_path), "ok");
}
