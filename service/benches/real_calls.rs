//! Benchmark of real calls: ingesting 100 000 dialer records with 1 KiB recordings
//! through the operator's ingestion (records/s, target above 5 000/s; database and archive
//! size), beside two ceilings measured in the same run (the archive alone: the same
//! recordings copied, on one thread per core as ingestion does; the storage alone: the same
//! calls bulk-inserted already scored); then
//! GET /v1/calls `source=real_call` latency with 1 000 000 real calls stored (p99 target under
//! 5 ms, as for practice calls).
//!
//! `cargo bench -p svc-service --bench real_calls`; `REAL_CALLS_BENCH_RECORDS=10000` for a
//! quick check. Run it alone: the header prints `uptime` first.

mod practice_common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use practice_common::*;
use serde_json::{Value, json};
use svc_service::clock::Clock;
use svc_service::db::{Rubric, ScoredCall};
use svc_service::realcall::audio::Archive;
use svc_service::realcall::ingest::{Disposal, Ingest};

const DEFAULT_RECORDS: usize = 100_000;
/// Records per ingest call (one "file" of the operator).
const FILE: usize = 10_000;
/// Real calls stored for the listing latency.
const LISTED: usize = 1_000_000;
const RUNS: usize = 2_000;
const TARGET_RECORDS_PER_SEC: f64 = 5_000.0;
const TARGET_P99_MS: f64 = 5.0;

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// A dialer record of the bench agency, with its own recording.
fn record(n: usize, agency_id: &str, recording: &Path) -> Value {
    let dispositions = ["sale", "no_sale", "callback", "not_interested"];
    json!({
        "dialerCallId": format!("bench-{n:07}"),
        "agencyId": agency_id,
        "rep": {"agentId": "rep-1", "name": "A B"},
        "startedAt": format!("2026-11-{:02}T{:02}:{:02}:00.000Z", 1 + n % 25, (n / 60) % 24, n % 60),
        "durationSec": 60 + n % 900,
        "recording": recording.to_string_lossy(),
        "transcript": [
            {"role": "customer", "content": "Hello?", "startTime": 0.0, "endTime": 1.1},
            {"role": "agent", "content": "Hi, this is A B, a licensed agent. This call is recorded.", "startTime": 1.3, "endTime": 5.0},
            {"role": "agent", "content": "We do not offer every plan available in your area; contact Medicare.gov or 1-800-MEDICARE.", "startTime": 5.2, "endTime": 11.0},
            {"role": "agent", "content": "May I ask which doctors you see and which prescriptions you take?", "startTime": 11.2, "endTime": 14.0},
            {"role": "customer", "content": "Dr. Lee, and metformin.", "startTime": 14.2, "endTime": 16.0},
            {"role": "agent", "content": "This plan has a zero premium and keeps Dr. Lee. Would you like to enroll today?", "startTime": 16.2, "endTime": 21.0}
        ],
        "disposition": dispositions[n % 4],
        "productLine": if n.is_multiple_of(3) { "other" } else { "health_plan_enrollment" },
    })
}

/// Writes `count` distinct 1 KiB recordings; returns their paths.
fn recordings(dir: &Path, count: usize) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).expect("recordings dir");
    (0..count)
        .map(|n| {
            let path = dir.join(format!("r{n:07}.wav"));
            let mut bytes = vec![0u8; 1024];
            bytes[..8].copy_from_slice(&(n as u64).to_le_bytes());
            for (i, b) in bytes.iter_mut().enumerate().skip(8) {
                *b = (i * 31 + n * 7) as u8;
            }
            std::fs::write(&path, bytes).expect("recording");
            path
        })
        .collect()
}

fn uptime() -> String {
    std::process::Command::new("uptime")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

#[tokio::main]
async fn main() {
    println!("uptime: {}", uptime());
    let records: usize = std::env::var("REAL_CALLS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_RECORDS);
    let bench = start(|_| {}).await;
    let agent = bench.get("/v1/agents?platformAgentId=rep-1").await["data"][0].clone();
    let agent_id = agent["id"].as_str().expect("agent").to_owned();
    let agency_id = agent["agencyId"].as_str().expect("agency").to_owned();
    bench
        .db
        .set_real_calls(&bench.tenant_id, &agency_id, Some((false, Rubric::Default)))
        .await
        .expect("enable")
        .expect("agency");
    let work = tempfile::tempdir().expect("work dir");
    let paths = recordings(&work.path().join("dialer"), records);
    eprintln!("wrote {records} recordings");

    // Ceiling: the archive alone, the same recordings copied on as many threads as ingestion
    // uses (one per core), before ingestion so that both meet the file system alike.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let copy_archive = Archive::new(work.path().join("copy"));
    let started = Instant::now();
    std::thread::scope(|scope| {
        for share in paths.chunks(paths.len().div_ceil(cores).max(1)) {
            let copy_archive = &copy_archive;
            scope.spawn(move || {
                for path in share {
                    copy_archive
                        .store(path, std::time::SystemTime::now())
                        .expect("copy");
                }
            });
        }
    });
    let copy_secs = started.elapsed().as_secs_f64();

    // Ingestion, end to end, in operator "files" of FILE records.
    let archive_dir = svc_service::config::default_audio_dir(bench.db.path());
    let ingest = Ingest::new(
        bench.db.clone(),
        Archive::new(&archive_dir),
        Clock::System,
        work.path(),
    );
    let db_before = file_size(bench.db.path());
    let started = Instant::now();
    let mut stored = 0;
    for chunk in paths.chunks(FILE).enumerate() {
        let (file, chunk) = chunk;
        let batch = chunk
            .iter()
            .enumerate()
            .map(|(i, path)| Ok(record(file * FILE + i, &agency_id, path)))
            .collect();
        let outcomes = ingest
            .ingest(&bench.tenant_id, batch)
            .await
            .expect("ingest");
        stored += outcomes
            .iter()
            .filter(|o| matches!(o.disposal, Disposal::Stored { .. }))
            .count();
    }
    let ingest_secs = started.elapsed().as_secs_f64();
    assert_eq!(stored, records, "every record stored");
    let db_growth = file_size(bench.db.path()).saturating_sub(db_before)
        + file_size(&PathBuf::from(format!("{}-wal", bench.db.path().display())));
    let archive_bytes = dir_size(&archive_dir);

    // Ceiling 1: the storage alone, the same number of scored calls bulk-inserted.
    let started = Instant::now();
    for chunk in (0..records).collect::<Vec<_>>().chunks(FILE) {
        let calls = chunk
            .iter()
            .map(|n| ScoredCall {
                id: svc_service::ids::call_id(),
                tenant_id: bench.tenant_id.clone(),
                source: "real_call".into(),
                agent_id: agent_id.clone(),
                agency_id: agency_id.clone(),
                platform_agent_id: Some("rep-1".into()),
                platform_agency_id: Some("ag-1".into()),
                drill_key: None,
                started_at: 1_700_000_000_000 + *n as i64 * 1_000,
                duration_sec: 120,
                transcript: record(*n, &agency_id, Path::new("x"))["transcript"].to_string(),
                score: r#"{"overallScore":80,"summary":"s","feedback":"f","compliancePercent":60}"#
                    .into(),
            })
            .collect();
        bench.db.insert_scored_calls(calls).await.expect("insert");
    }
    let storage_secs = started.elapsed().as_secs_f64();

    // Listing at a million real calls.
    let loading = Instant::now();
    let mut total = 2 * records;
    while total < LISTED {
        let calls = (0..50_000.min(LISTED - total))
            .map(|i| {
                let n = (total + i) as i64;
                ScoredCall {
                    id: svc_service::ids::call_id(),
                    tenant_id: bench.tenant_id.clone(),
                    source: "real_call".into(),
                    agent_id: agent_id.clone(),
                    agency_id: agency_id.clone(),
                    platform_agent_id: Some("rep-1".into()),
                    platform_agency_id: Some("ag-1".into()),
                    drill_key: None,
                    started_at: 1_767_225_600_000 + n * 1_000,
                    duration_sec: 60 + n % 600,
                    transcript: r#"[{"role":"agent","content":"hello"}]"#.into(),
                    score:
                        r#"{"overallScore":70,"summary":"s","feedback":"f","compliancePercent":40}"#
                            .into(),
                }
            })
            .collect::<Vec<_>>();
        total += calls.len();
        bench.db.insert_scored_calls(calls).await.expect("insert");
    }
    eprintln!(
        "{total} real calls stored ({:.1} s)",
        loading.elapsed().as_secs_f64()
    );
    let first = "/v1/calls?from=2023-01-01T00:00:00Z&source=real_call";
    let mut first_h = histogram();
    for _ in 0..RUNS {
        let t = Instant::now();
        bench.get(first).await;
        let _ = first_h.record(micros(t.elapsed()));
    }
    let window =
        "/v1/calls?from=2026-01-02T00:00:00Z&to=2026-01-03T00:00:00Z&source=real_call&limit=100";
    let mut window_h = histogram();
    for _ in 0..RUNS {
        let t = Instant::now();
        bench.get(window).await;
        let _ = window_h.record(micros(t.elapsed()));
    }

    println!();
    println!(
        "| {:<44} | {:>10} | {:>12} | {:>8} |",
        "ingestion", "records", "records/s", "target"
    );
    println!("|{:-<46}|{:->12}|{:->14}|{:->10}|", "", "", "", "");
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    let rate = records as f64 / ingest_secs;
    println!(
        "| {:<44} | {records:>10} | {rate:>12.0} | {:>8} |",
        "calls ingest-real (parse, attribute, archive, score, store, queue)",
        verdict(rate > TARGET_RECORDS_PER_SEC)
    );
    println!(
        "| {:<44} | {records:>10} | {:>12.0} | {:>8} |",
        "ceiling: storage alone (bulk insert of scored calls)",
        records as f64 / storage_secs,
        "-"
    );
    println!(
        "| {:<44} | {records:>10} | {:>12.0} | {:>8} |",
        &format!("ceiling: archive alone (hash and copy, {cores} threads)"),
        records as f64 / copy_secs,
        "-"
    );
    println!();
    println!(
        "database grew {} for {records} calls ({:.0} B a call); archive {} ({} files)",
        mb(db_growth),
        db_growth as f64 / records as f64,
        mb(archive_bytes),
        std::fs::read_dir(&archive_dir)
            .map(|d| d.count())
            .unwrap_or(0)
    );
    println!();
    println!(
        "GET /v1/calls source=real_call with {total} real calls (target p99 < {TARGET_P99_MS} ms):"
    );
    header();
    row("first page (limit 50)", first_h.len(), None, &first_h);
    row(
        "one-day window (limit 100)",
        window_h.len(),
        None,
        &window_h,
    );
    for (name, h) in [("first page", &first_h), ("one-day window", &window_h)] {
        let p99 = h.value_at_quantile(0.99) as f64 / 1000.0;
        println!("{name}: p99 {p99:.3} ms: {}", verdict(p99 < TARGET_P99_MS));
    }
}
