//! A full disk: `webhook serve` and `reconcile` run as the real binary with their
//! SQLite store (and the receiver's inbox, tables of the same file) on a small tmpfs the test
//! mounts and fills to its last byte (`svc_test_support::tmpfs`; skipped with a line on stderr
//! where it cannot be mounted); and `reconcile` on a PostgreSQL store whose tables are in a
//! tablespace on such a tmpfs. Nothing acknowledged is lost, nothing is stored twice, the
//! file stays intact, and everything resumes once space returns, without a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use svc_fixtures::calls::ROLEPLAY;
use svc_fixtures::webhooks::{Delivery, Event, Sender};
use svc_test_support::tmpfs::Tmpfs;

use crate::ops::{SECRET, event, get, serve_at};
use crate::reconcile::{fake, number, reconcile_args, secs_ago, watermark};

/// `PRAGMA integrity_check` of the SQLite file at `path`.
fn integrity(path: &Path) -> String {
    let conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open the file");
    conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity check")
}

/// Waits until `readyz` answers 200, asking every 200 ms; fails with `never` after 15 s.
async fn ready_within_15_s(readyz: &str, never: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while get(readyz).await.0 != 200 {
        assert!(Instant::now() < deadline, "{never}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The CPU time (user and system, in clock ticks) process `pid` has used so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command name (which may hold spaces), from the third: utime is the
    // 14th field of the line, stime the 15th.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let field = |n: usize| fields[n - 3].parse::<u64>().expect("a number of ticks");
    field(14) + field(15)
}

/// How many times each webhook id is in the store's ledger.
fn ledger(store: &Path) -> BTreeMap<String, i64> {
    let conn = Connection::open_with_flags(store, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open the store");
    let mut stmt = conn
        .prepare("SELECT webhook_id, COUNT(*) FROM deliveries GROUP BY webhook_id")
        .expect("deliveries table");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

#[tokio::test]
async fn webhook_serve_on_a_full_disk_acknowledges_only_what_it_stored_and_recovers_on_its_own() {
    let Some(fs) = Tmpfs::mount("full-disk webhook serve") else {
        return;
    };
    let store = fs.path().join("store.db");
    let mut serving = serve_at(Some(store.clone()), &[], &[]).await;
    let pid = serving.child.id().expect("running");
    let readyz = format!("{}/readyz", serving.base);
    let sender = Sender::new(format!("{}/webhooks", serving.base), SECRET);
    let send = |n: usize| {
        let sender = sender.clone();
        async move {
            let body = event(&format!("svc_call_full_{n:04}"));
            let body = std::str::from_utf8(&body).expect("utf-8").to_owned();
            sender
                .deliver(&Event::from_body(&body))
                .await
                .expect("an answer")
        }
    };
    // Ready once a probe write goes through within its deadline (2 s: on a machine busy with
    // other tests, the first one may not).
    ready_within_15_s(&readyz, "/readyz never turned 200").await;
    let mut acknowledged = BTreeSet::new();
    for n in 0..3 {
        let delivery = send(n).await;
        assert_eq!(delivery.status, 200);
        acknowledged.insert(delivery.webhook_id);
    }

    fs.fill();
    // Until five in a row are refused: what fits in space SQLite already holds may still be
    // stored (and acknowledged); nothing else.
    let mut refused: Vec<Delivery> = Vec::new();
    let mut in_a_row = 0;
    for n in 3..400 {
        let delivery = send(n).await;
        match delivery.status {
            200 => {
                acknowledged.insert(delivery.webhook_id.clone());
                in_a_row = 0;
            }
            503 => {
                refused.push(delivery);
                in_a_row += 1;
            }
            other => panic!("delivery {n} on a full disk answered {other}"),
        }
        if in_a_row == 5 {
            break;
        }
    }
    assert_eq!(in_a_row, 5, "the full disk never refused a delivery");
    let (status, body) = get(&readyz).await;
    if status != 503 {
        let lines = serving.stderr_lines().await;
        panic!("/readyz while writes fail: {status} {body}: {lines:#?}");
    }

    // Left alone with the disk full: it stays up, does not spin, and does not flood its log.
    let _ = serving.stderr_lines().await;
    let (ticks, since) = (cpu_ticks(pid), Instant::now());
    tokio::time::sleep(Duration::from_secs(6)).await;
    let lines = serving.stderr_lines().await;
    let (used, waited) = (cpu_ticks(pid) - ticks, since.elapsed());
    assert!(
        serving.child.try_wait().expect("wait").is_none(),
        "webhook serve exited on a full disk"
    );
    // Clock ticks are hundredths of a second on Linux: at most a tenth of one core.
    let allowed = waited.as_millis() as u64 / 10 / 10;
    assert!(
        used <= allowed,
        "{used} ticks of CPU in {waited:?}: {lines:#?}"
    );
    assert!(
        lines.len() <= 6,
        "{} log lines in {waited:?} with the disk full: {lines:#?}",
        lines.len()
    );
    // Still refusing, or ready again: a checkpoint may rewind the WAL while the disk is full,
    // and a write then fits in space SQLite already holds (the probe's does; a delivery's may
    // too, and is acknowledged only once stored, as above). Never an error of another kind.
    let (status, body) = get(&readyz).await;
    assert!(
        status == 503 || status == 200,
        "/readyz with the disk full: {status} {body}"
    );

    fs.free();
    ready_within_15_s(&readyz, "/readyz never turned 200 again").await;
    // The sender's retries of what was refused: the same ids, signed afresh.
    for delivery in &refused {
        let retried = sender.retry(delivery).await.expect("an answer");
        assert_eq!(retried.status, 200, "the retry of {}", delivery.webhook_id);
        acknowledged.insert(retried.webhook_id);
    }
    // Every acknowledged id ends up in the ledger, each once.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let recorded = ledger(&store);
        assert!(
            recorded.values().all(|&n| n == 1),
            "an id recorded twice: {recorded:?}"
        );
        let ids: BTreeSet<String> = recorded.into_keys().collect();
        if ids == acknowledged {
            break;
        }
        let missing: Vec<_> = acknowledged.difference(&ids).collect();
        assert!(
            Instant::now() < deadline,
            "acknowledged and never recorded: {missing:?}"
        );
        assert!(ids.is_subset(&acknowledged), "recorded, never acknowledged");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(serving.terminate().await, 0);
    assert_eq!(integrity(&store), "ok");
}

/// How many calls the store holds, or `None` while it cannot be read.
fn stored_calls(store: &Path) -> Option<i64> {
    let conn = Connection::open_with_flags(store, OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    conn.query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0))
        .ok()
}

#[tokio::test]
async fn a_reconcile_whose_disk_fills_mid_run_exits_75_and_the_next_run_stores_every_call_once() {
    let Some(fs) = Tmpfs::mount("full-disk reconcile") else {
        return;
    };
    let fake = fake().await;
    let store = fs.path().join("calls.db");
    let old = fake
        .calls
        .add_many(ROLEPLAY, [secs_ago(5 * 3600), secs_ago(4 * 3600)]);
    let first = fake.reconcile_at(&store, &["--source", "roleplay"]).await;
    assert_eq!(first.code, 0, "{first:?}");
    let mark = watermark(&store, ROLEPLAY).expect("a watermark");
    // 150 calls within the overlap: the first page of the next run is answered at once, the
    // second only after a pause, during which the disk fills.
    let new = fake
        .calls
        .add_many(ROLEPLAY, (1..=150).map(|n| secs_ago(10 * n)));
    fake.calls.delay_list_after(1, Some(Duration::from_secs(3)));
    let args = reconcile_args(&store, &["--source", "roleplay"]);
    let child = fake.sandbox.command(&args).spawn().expect("spawn svc-cli");
    let deadline = Instant::now() + Duration::from_secs(30);
    while stored_calls(&store) < Some(102) {
        assert!(
            Instant::now() < deadline,
            "the first page was never stored: {:?}",
            stored_calls(&store)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fs.fill();
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the run ends")
        .expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("full"), "it says why: {stderr}");
    assert_eq!(integrity(&store), "ok");
    assert_eq!(
        watermark(&store, ROLEPLAY).as_deref(),
        Some(mark.as_str()),
        "the watermark did not move"
    );

    fs.free();
    fake.calls.delay_list_after(0, None);
    let rerun = fake.reconcile_at(&store, &["--source", "roleplay"]).await;
    assert_eq!(rerun.code, 0, "{rerun:?}");
    assert_eq!(integrity(&store), "ok");
    let mut expected: Vec<String> = old.into_iter().chain(new).collect();
    expected.sort();
    let conn = Connection::open_with_flags(&store, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open the store");
    let mut stmt = conn
        .prepare("SELECT id FROM calls ORDER BY id")
        .expect("calls table");
    let stored: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(stored, expected, "every call once");
    assert_ne!(
        watermark(&store, ROLEPLAY).as_deref(),
        Some(mark.as_str()),
        "the watermark moves once every call is stored"
    );
    assert_eq!(
        number(
            &store,
            "SELECT COUNT(*) FROM runs WHERE outcome = 'running'"
        ),
        0,
        "no run is left running"
    );
}

#[tokio::test]
async fn sandbox_ingest_real_on_a_full_disk_exits_75_and_the_same_file_later_stores_the_call() {
    let Some(fs) = Tmpfs::mount("full-disk sandbox ingest-real") else {
        return;
    };
    let dir = crate::helpers::Sandbox::inside(fs.path());
    let sandbox = crate::browser::RunningSandbox::start(&dir).await;
    // The roster's agency, by its service id (POST /agencies of the same name is a no-op 200).
    let agency: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/agencies", sandbox.base_url))
        .bearer_auth(&sandbox.api_key)
        .json(&serde_json::json!({ "platformAgencyId": "agency-1", "name": "First Agency" }))
        .send()
        .await
        .expect("the API answers")
        .json()
        .await
        .expect("an agency");
    let agency = agency["id"].as_str().expect("the agency's id").to_owned();
    let db = ["--db", "sandbox.db"];
    let enable = [
        &["sandbox", "enable-real-calls", "--agency-id", &agency][..],
        &db,
    ]
    .concat();
    let enabled = dir.run(&enable).await;
    assert_eq!(enabled.code, 0, "{enabled:?}");
    dir.write("call.wav", b"RIFF\x1c\x00\x00\x00WAVEfmt fake-pcm");
    let record = crate::sandbox::dialer_record("d-full", &agency);
    dir.write("records.jsonl", format!("{record}\n"));
    let ingest = [
        &[
            "--json",
            "sandbox",
            "ingest-real",
            "--file",
            "records.jsonl",
        ][..],
        &db,
    ]
    .concat();

    fs.fill();
    let full = dir.run(&ingest).await;
    assert_eq!(full.code, 75, "{full:?}");
    assert!(
        full.stderr.contains("ingest the same file again"),
        "{full:?}"
    );
    assert!(
        ["No space left on device", "database or disk is full"]
            .iter()
            .all(|says| full.stderr.matches(says).count() <= 1),
        "the cause is said once: {}",
        full.stderr
    );
    assert_eq!(full.stdout, "", "nothing reported stored");

    fs.free();
    let later = dir.run(&ingest).await;
    assert_eq!(later.code, 0, "{later:?}");
    let line: serde_json::Value =
        serde_json::from_str(later.stdout.lines().next().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}: {later:?}"));
    assert!(line["callId"].is_string(), "stored: {later:?}");
    assert!(
        line.get("alreadyIngested").is_none(),
        "stored now: {later:?}"
    );
    drop(sandbox);
    assert_eq!(integrity(&dir.path("sandbox.db")), "ok");
}

/// A test's schema and tablespace, dropped (the schema's tables first) when this is.
struct DroppedTablespace {
    url: String,
    schema: String,
    tablespace: String,
}

impl Drop for DroppedTablespace {
    fn drop(&mut self) {
        let statements = [
            format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema),
            format!("DROP TABLESPACE IF EXISTS {}", self.tablespace),
        ];
        let url = self.url.clone();
        // A runtime of its own on a thread of its own: this may run inside the test's.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                let db = crate::postgres::database(&url).await;
                for statement in &statements {
                    if let Err(err) = db.batch_execute(statement).await {
                        eprintln!("{statement}: {err}");
                    }
                }
            });
        })
        .join();
        if dropped.is_err() {
            eprintln!("could not drop tablespace {}", self.tablespace);
        }
    }
}

/// The watermark of `source` in the PostgreSQL store at `url`.
async fn pg_watermark(db: &tokio_postgres::Client, source: &str) -> Option<String> {
    db.query_opt(
        "SELECT watermark FROM sync_state WHERE source = $1",
        &[&source],
    )
    .await
    .expect("sync_state")
    .and_then(|row| row.get(0))
}

/// A full disk under a PostgreSQL store: the store's tables live in a tablespace on the
/// tmpfs (the server's `disk_full`, SQLSTATE 53100, when a table or index cannot grow). The
/// run stops with 75 (temporary, as on SQLite), the watermark stays, and the next run once
/// space returns stores every call once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_whose_postgres_disk_fills_exits_75_and_the_next_run_stores_every_call_once() {
    use std::os::unix::fs::MetadataExt as _;

    let test = "full-disk reconcile on PostgreSQL";
    let Some(url) = svc_test_support::postgres::fresh_schema_url(test).await else {
        return;
    };
    let Some(fs) = Tmpfs::mount(test) else {
        return;
    };
    let db = crate::postgres::database(&url).await;
    let schema: String = db
        .query_one("SELECT current_schema()", &[])
        .await
        .expect("schema")
        .get(0);
    let tablespace = format!("t_full_{}", std::process::id());
    // Dropped before the file system (declared after it), even when the test fails: the
    // server must not keep a tablespace whose files are gone (its checkpoints would fail).
    let _tablespace = DroppedTablespace {
        url: url.clone(),
        schema,
        tablespace: tablespace.clone(),
    };
    // The tablespace's directory belongs to the server's own user (the data directory's): a
    // server this test cannot see the files of (another machine's) cannot take part.
    let data_dir: String = db
        .query_one("SHOW data_directory", &[])
        .await
        .expect("data_directory")
        .get(0);
    let Ok(owner) = std::fs::metadata(&data_dir) else {
        svc_test_support::skip::announce(
            test,
            "the PostgreSQL server's data directory is not on this machine",
        );
        return;
    };
    let space = fs.path().join("tablespace");
    std::fs::create_dir(&space).expect("the tablespace's directory");
    for dir in [fs.path(), space.as_path()] {
        std::os::unix::fs::chown(dir, Some(owner.uid()), Some(owner.gid()))
            .expect("hand the directory to the server's user");
    }
    db.batch_execute(&format!(
        "CREATE TABLESPACE {tablespace} LOCATION '{}'",
        space.display()
    ))
    .await
    .expect("create the tablespace");
    // The URL's options already set the schema: the store's tables go to the tablespace too.
    let store = format!("{url}%20-c%20default_tablespace%3D{tablespace}");
    let store = Path::new(&store);

    let fake = fake().await;
    let old = fake
        .calls
        .add_many(ROLEPLAY, [secs_ago(5 * 3600), secs_ago(4 * 3600)]);
    let first = fake.reconcile_at(store, &["--source", "roleplay"]).await;
    assert_eq!(first.code, 0, "{first:?}");
    let mark = pg_watermark(&db, ROLEPLAY).await.expect("a watermark");

    fs.fill();
    let new = fake
        .calls
        .add_many(ROLEPLAY, (1..=150).map(|n| secs_ago(10 * n)));
    let full = fake.reconcile_at(store, &["--source", "roleplay"]).await;
    assert_eq!(full.code, 75, "{full:?}");
    assert!(
        full.stderr.contains("space"),
        "it says why: {}",
        full.stderr
    );
    assert_eq!(
        pg_watermark(&db, ROLEPLAY).await.as_deref(),
        Some(mark.as_str()),
        "the watermark did not move"
    );

    fs.free();
    let rerun = fake.reconcile_at(store, &["--source", "roleplay"]).await;
    assert_eq!(rerun.code, 0, "{rerun:?}");
    let mut expected: Vec<String> = old.into_iter().chain(new).collect();
    expected.sort();
    let stored: Vec<String> = db
        .query("SELECT id FROM calls ORDER BY id", &[])
        .await
        .expect("calls")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(stored, expected, "every call once");
    let running: i64 = db
        .query_one("SELECT COUNT(*) FROM runs WHERE outcome = 'running'", &[])
        .await
        .expect("runs")
        .get(0);
    assert_eq!(running, 0, "no run is left running");
}
