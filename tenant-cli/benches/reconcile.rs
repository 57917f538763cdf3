//! Benchmark of `svc-cli reconcile` and `svc-cli store export` against the compact service:
//! how fast a first reconcile stores every scored call with its
//! detail and how much memory it takes, what a rerun costs when nothing or 1% changed, how
//! fast the store exports, and how much of a first run is the service itself.
//!
//! # Running it
//! ```text
//! cargo bench -p svc-cli --bench reconcile                                # N = 100 000
//! RECONCILE_BENCH_CALLS=5000 cargo bench -p svc-cli --bench reconcile     # a quick check
//! ```
//! `RECONCILE_BENCH_CALLS` is N (at least 400, so that 1% of the real calls is a call or
//! more); `RECONCILE_BENCH_ROUNDS` (3 by default) how many rounds of the first syncs of N and
//! their ceiling run, taking turns, each row showing its median round and the range: on a
//! small machine a row moves by a tenth or more from one minute to the next, so a ratio is
//! only read between rows of the same rounds. Progress goes to stderr; the header and the table go to stdout.
//! Take figures on a quiet machine: the header prints `uptime` and, over the run, the share
//! of CPU time that was idle, used by this bench (the service and its `svc-cli` children) or
//! used by other processes. At N = 100 000 the temp directory needs about 1 GB (the service's
//! database and the stores). The process exits 1 when a check fails (a count that is wrong,
//! a child that failed), not when a target is missed.
//!
//! # What it does
//! The compact service runs in this process on `127.0.0.1:0` with a fresh database holding
//! N scored calls of one tenant (half practice, half real, spread over the last 20 days, a
//! dozen transcript turns each, attributed to five agents in two agencies) and N/4 of a
//! second tenant. The real `svc-cli` binary (built by cargo for this bench, release
//! profile) runs as a child with `SVC_BASE_URL`/`SVC_API_KEY` and `--json`; its wall time
//! is spawn to exit, its peak RSS the `VmHWM` of `/proc/<pid>/status` polled every 20 ms.
//!
//! # Rows and targets
//! - first reconcile of N/4 and of N calls (`reconcile --since <21 days ago>` into an empty
//!   store): calls/s (above 2 000/s), peak RSS (under 100 MB; N within 1.25× of N/4: flat in
//!   the number of calls);
//! - the same first reconcile of N through `svc-reconcile` in this process into a `MemorySink`
//!   (no store, no child process): what the engine and its client cost without the store, so
//!   the SQLite run against it is the store's share, and it against the ceiling the engine's;
//! - the same first reconcile of N in this process into the least a SQLite sink can be (each
//!   detail's text under its id in a bare table, a transaction per page; `bare_sink`): the
//!   ceiling of any SQLite store that keeps the details; and the same bare table never
//!   checkpointed during the sync (`wal_autocheckpoint = 0`): the ceiling of such a store
//!   whatever thread or moment it moved its checkpoints to;
//! - svc-store's own work on the same calls with no service running (`known_calls` and
//!   `store_batch` per page of 100), beside its floor: each detail's text inserted into a bare
//!   table (`id` key, a transaction per page, the store's WAL and `synchronous`);
//! - the same first reconcile of N through `svc-reconcile` in this process into svc-store's
//!   SQLite store (what `svc-cli` opens, no child process): against the `MemorySink` run it is
//!   the store's share, against the `svc-cli` run the child process's;
//! - the ceiling: the service alone answering the same list pages and N details, the pages
//!   listed on a task of their own while the details are read 8 at a time as their ids arrive
//!   (as the engine overlaps them), from a plain reqwest client in this process (no parsing, no
//!   store, no child): the first run's floor;
//! - a rerun over the same window with every call stored (under 10 s; no detail read);
//! - a rerun after 1% of the real calls were re-dispositioned in the service's database (new
//!   score, `scored_at`, `updated_at`): only those details read, each change logged;
//! - `store export --format jsonl` and `--format csv` of the N calls to a drained pipe
//!   (under 2 s).

mod reconcile_support;

use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use std::sync::Arc;

use chrono::Utc;
use serde_json::Value;
use svc_client::{ApiKey, Client};
use svc_reconcile::time::{format_ts, parse_ts};
use svc_reconcile::{
    Batch, BatchContext, FetchedCall, MemoryCall, MemorySink, Options, Reconciler, Sink,
};
use svc_store::{Store, StoreLocation};

use reconcile_support::bare_sink::{BareSink, Checkpoints};
use reconcile_support::child::{self, Measured};
use reconcile_support::machine;
use reconcile_support::service::{Ceiling, Service, Tenant};

/// How many calls the first reconcile stores, unless [`CALLS_ENV`] says otherwise.
const DEFAULT_CALLS: usize = 100_000;
const CALLS_ENV: &str = "RECONCILE_BENCH_CALLS";
/// Rounds of the first syncs of N and their ceiling, unless [`ROUNDS_ENV`] says otherwise.
const DEFAULT_ROUNDS: usize = 3;
const ROUNDS_ENV: &str = "RECONCILE_BENCH_ROUNDS";
/// First reconcile throughput, calls per second (more is better).
const TARGET_RATE: f64 = 2_000.0;
/// Peak RSS of any `svc-cli` run, in MB (10^6 bytes).
const TARGET_RSS_MB: f64 = 100.0;
/// Peak RSS at N over peak RSS at N/4: at most this for "flat in the number of calls".
const TARGET_RSS_GROWTH: f64 = 1.25;
const TARGET_RERUN: Duration = Duration::from_secs(10);
const TARGET_EXPORT: Duration = Duration::from_secs(2);
/// One real call in this many is re-dispositioned (1%).
const REDISPOSITION_EVERY: usize = 100;
/// Details in flight in the ceiling pass (reconcile's default concurrency).
const CEILING_IN_FLIGHT: usize = 8;

fn main() -> ExitCode {
    let calls = match std::env::var(CALLS_ENV) {
        Ok(text) => match text.trim().replace('_', "").parse::<usize>() {
            Ok(n) if n >= 400 => n,
            _ => {
                eprintln!("{CALLS_ENV}={text:?}: expected a number of calls, at least 400");
                return ExitCode::from(2);
            }
        },
        Err(_) => DEFAULT_CALLS,
    };
    let rounds = match std::env::var(ROUNDS_ENV) {
        Ok(text) => match text.trim().parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => {
                eprintln!("{ROUNDS_ENV}={text:?}: expected a number of rounds, at least 1");
                return ExitCode::from(2);
            }
        },
        Err(_) => DEFAULT_ROUNDS,
    };
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let failed = runtime.block_on(bench(calls, rounds));
    if failed {
        eprintln!("reconcile bench: a check failed (see the checks column)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs every row and prints the table; returns whether a check failed.
async fn bench(calls: usize, rounds: usize) -> bool {
    let uptime = machine::uptime();
    let quarter = calls / 4;
    eprintln!("reconcile bench: seeding {calls} + {quarter} scored calls…");
    let seeding = Instant::now();
    let service = Service::start().await;
    let full = service.add_tenant("bench tenant (N calls)").await;
    let small = service.add_tenant("bench tenant (N/4 calls)").await;
    let now_ms = Utc::now().timestamp_millis();
    service.seed(&full, calls, now_ms).await;
    service.seed(&small, quarter, now_ms).await;
    let seeded = seeding.elapsed();
    let dir = tempfile::tempdir().expect("temp dir");
    let since = format_ts(Utc::now() - chrono::Duration::days(21));
    let cpu_before = machine::sample();
    let mut rows = Rows::default();

    eprintln!("reconcile bench: first reconcile of {quarter} calls…");
    let small_store = dir.path().join("store-quarter.db");
    let (small_run, small_report) = reconcile(&service, &small, &small_store, &since).await;
    let small_stored = rows_in(&small_store, "calls");
    remove_db(&small_store);
    let case = "first reconcile, N/4";
    rows.first_run(
        (&small_run, &small_report, small_stored),
        quarter as u64,
        case,
        None,
        None,
    );

    // The first syncs of N and their ceiling, in rounds taking turns, so that each ratio is
    // between runs of the same moments of the machine; each row shows its median round.
    let to = format_ts(Utc::now());
    let store = dir.path().join("store.db");
    let mut firsts = Vec::new();
    let mut memories = Vec::new();
    let mut in_stores = Vec::new();
    let mut bares = Vec::new();
    let mut unchecked_bares = Vec::new();
    let mut ceilings = Vec::new();
    for round in 1..=rounds {
        eprintln!("reconcile bench: round {round} of {rounds}: first reconcile of {calls} calls…");
        let round_store = dir.path().join(format!("store-round-{round}.db"));
        let (first, report) = reconcile(&service, &full, &round_store, &since).await;
        let stored = rows_in(&round_store, "calls");
        // The last round's store is the one the reruns below find full.
        if round == rounds {
            std::fs::rename(&round_store, &store).expect("keep the last round's store");
        } else {
            remove_db(&round_store);
        }
        firsts.push((first, report, stored));

        eprintln!("reconcile bench: round {round}: into a MemorySink…");
        let mut memory =
            reconcile_in_process(&service, &full, &since, Arc::new(MemorySink::default())).await;
        if round != rounds {
            memory.calls = Vec::new(); // only the last round's go to the store-alone rows
        }
        memories.push(memory);

        eprintln!("reconcile bench: round {round}: into svc-store, in process…");
        let in_process_store = dir.path().join(format!("store-in-process-{round}.db"));
        let opened = Store::open_or_create(in_process_store.as_path()).expect("a fresh store");
        in_stores.push(reconcile_in_process(&service, &full, &since, Arc::new(opened)).await);
        remove_db(&in_process_store);

        eprintln!("reconcile bench: round {round}: into a bare SQLite table, in process…");
        let bare_path = dir.path().join(format!("bare-sink-{round}.db"));
        let bare = BareSink::create(&bare_path, Checkpoints::Automatic).expect("a bare table");
        bares.push(reconcile_in_process(&service, &full, &since, Arc::new(bare)).await);
        remove_db(&bare_path);

        eprintln!("reconcile bench: round {round}: into a bare table never checkpointed…");
        let bare = BareSink::create(&bare_path, Checkpoints::Never).expect("a bare table");
        unchecked_bares.push(reconcile_in_process(&service, &full, &since, Arc::new(bare)).await);
        remove_db(&bare_path);

        eprintln!("reconcile bench: round {round}: the ceiling (the service alone)…");
        ceilings.push(service.ceiling(&full, &since, &to, CEILING_IN_FLIGHT).await);
    }
    let walls = |w: Vec<Duration>| Spread::of(w);
    let first_spread = walls(firsts.iter().map(|f| f.0.wall).collect());
    let memory_spread = walls(memories.iter().map(|m| m.wall).collect());
    let in_store_spread = walls(in_stores.iter().map(|m| m.wall).collect());
    let bare_spread = walls(bares.iter().map(|m| m.wall).collect());
    let unchecked_spread = walls(unchecked_bares.iter().map(|m| m.wall).collect());
    let ceiling_spread = walls(ceilings.iter().map(|c| c.wall).collect());
    let (first, first_report, first_stored) = firsts.swap_remove(first_spread.median);
    let memory_calls = std::mem::take(&mut memories.last_mut().expect("a round").calls);
    let memory = memories.swap_remove(memory_spread.median);
    let stored = in_stores.swap_remove(in_store_spread.median);
    let bare = bares.swap_remove(bare_spread.median);
    let unchecked_bare = unchecked_bares.swap_remove(unchecked_spread.median);
    let ceiling = ceilings.swap_remove(ceiling_spread.median);

    let quarter_rss = small_run.peak_rss_kib;
    rows.first_run(
        (&first, &first_report, first_stored),
        calls as u64,
        "first reconcile, N",
        quarter_rss,
        Some(&first_spread),
    );
    rows.in_process(
        &memory,
        calls as u64,
        &first,
        InProcess::Memory,
        &memory_spread,
    );
    rows.in_process(
        &stored,
        calls as u64,
        &first,
        InProcess::Store(&memory),
        &in_store_spread,
    );
    rows.in_process(
        &bare,
        calls as u64,
        &first,
        InProcess::Bare(&memory),
        &bare_spread,
    );
    rows.in_process(
        &unchecked_bare,
        calls as u64,
        &first,
        InProcess::BareNeverCheckpointed(&memory),
        &unchecked_spread,
    );
    rows.ceiling(
        &ceiling,
        calls as u64,
        &first,
        &first_report,
        &memory,
        &ceiling_spread,
    );

    eprintln!("reconcile bench: the store alone, and a bare SQLite insert of the same details…");
    let alone = store_alone(dir.path(), &memory_calls).await;
    drop(memory_calls);
    rows.store_alone(&alone, calls as u64, &memory);

    eprintln!("reconcile bench: rerun with every call stored…");
    let (rerun, rerun_report) = reconcile(&service, &full, &store, &since).await;
    rows.rerun(&rerun, &rerun_report, calls as u64);

    let changed = service
        .redisposition(&full, REDISPOSITION_EVERY, Utc::now().timestamp_millis())
        .await;
    eprintln!("reconcile bench: rerun after re-dispositioning {changed} real calls…");
    let (after, after_report) = reconcile(&service, &full, &store, &since).await;
    rows.redispositioned(&after, &after_report, &store, calls as u64, changed);

    for format in ["jsonl", "csv"] {
        eprintln!("reconcile bench: store export --format {format}…");
        let exported = export(&store, format).await;
        rows.export(&exported, format, calls as u64);
    }
    let share = cpu_before
        .zip(machine::sample())
        .and_then(|(a, b)| machine::share(a, b));
    drop(service);

    println!(
        "reconcile bench: N = {calls} scored calls ({CALLS_ENV}), N/4 = {quarter}; \
         {rounds} rounds of the first syncs of N ({ROUNDS_ENV}); seeded in {:.1} s",
        seeded.as_secs_f64()
    );
    println!("uptime before the run: {uptime}");
    match share {
        Some(s) => {
            println!(
                "CPU over the run ({} CPUs): idle {:.0}%, this bench (service + svc-cli) {:.0}%, \
                 other processes {:.0}%",
                machine::cpus(),
                s.idle * 100.0,
                s.own * 100.0,
                s.others * 100.0
            );
            if s.others > 0.10 {
                println!(
                    "note: other processes used {:.0}% of the CPU: these figures are noisy",
                    s.others * 100.0
                );
            }
        }
        None => println!("CPU over the run: unknown (no /proc/stat)"),
    }
    println!("{}", rows.table);
    rows.failed
}

/// Runs `svc-cli --json reconcile --store <store> --since <since>` for `tenant`; returns the
/// measures and the report (`Null` when stdout was not one).
async fn reconcile(
    service: &Service,
    tenant: &Tenant,
    store: &Path,
    since: &str,
) -> (Measured, Value) {
    let mut command = svc_cli();
    command
        .args(["--json", "reconcile", "--store"])
        .arg(store)
        .args(["--since", since])
        .env("SVC_BASE_URL", service.base_url())
        .env("SVC_API_KEY", &tenant.key);
    let measured = tokio::task::spawn_blocking(move || child::run(command, true))
        .await
        .expect("child task")
        .expect("run svc-cli reconcile");
    let report = serde_json::from_slice(&measured.stdout).unwrap_or(Value::Null);
    (measured, report)
}

/// What an in-process first reconcile did.
struct InMemory {
    wall: Duration,
    /// The run's report as `--json` prints it (`Null` when the run stopped early).
    report: Value,
    error: Option<String>,
    /// Calls the sink holds afterwards.
    held: u64,
    /// What a `MemorySink` holds afterwards (empty for another sink), for the store-alone rows.
    calls: Vec<MemoryCall>,
}

/// The first reconcile of `tenant` through `svc-reconcile` in this process, into an empty
/// `sink` (a `MemorySink`, or svc-store's SQLite store as `svc-cli` opens it), with the options
/// `svc-cli reconcile --since <since>` runs with.
async fn reconcile_in_process<S: Sink + Held>(
    service: &Service,
    tenant: &Tenant,
    since: &str,
    sink: Arc<S>,
) -> InMemory {
    let client = Client::builder(service.base_url())
        .api_key(ApiKey::new(tenant.key.clone()))
        .allow_insecure_http(true)
        .build()
        .expect("a client for the bench's service");
    let options = Options {
        since: Some(parse_ts(since).expect("the bench's own timestamp")),
        ..Options::default()
    };
    let reconciler = Reconciler::new(client, Arc::clone(&sink), options);
    let started = Instant::now();
    let guard = reconciler
        .lock(Duration::ZERO)
        .await
        .expect("a fresh sink's lock");
    let (report, error) = match reconciler.run(&guard, &()).await {
        Ok(report) => (serde_json::to_value(&report).unwrap_or(Value::Null), None),
        Err(e) => (Value::Null, Some(e.to_string())),
    };
    InMemory {
        wall: started.elapsed(),
        report,
        error,
        held: sink.held(),
        calls: sink.held_calls(),
    }
}

/// The SQLite store's own work on the calls a first reconcile fetched, with no service running
/// beside it, and the least any SQLite store keeping each detail does.
struct StoreAlone {
    /// svc-store: `known_calls` then `store_batch` per page of 100, one after the other.
    store: Duration,
    /// Calls svc-store holds afterwards.
    stored: u64,
    /// A bare table (`id` primary key, the detail's text), a transaction per page of 100, the
    /// same journal (WAL) and `synchronous` (NORMAL) as the store.
    bare: Duration,
    /// Rows the bare table holds afterwards.
    bare_rows: u64,
    /// The size of each database file afterwards (with its WAL), in bytes.
    store_bytes: u64,
    bare_bytes: u64,
}

/// A SQLite database's size with its WAL, in bytes.
fn db_bytes(path: &Path) -> u64 {
    let wal = path.with_extension("db-wal");
    [path, wal.as_path()]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

/// Times [`StoreAlone`] on `calls` (a `MemorySink`'s, in any order), in fresh files in `dir`.
async fn store_alone(dir: &Path, calls: &[MemoryCall]) -> StoreAlone {
    let store_path = dir.join("store-alone.db");
    let store = Store::open_or_create(store_path.as_path()).expect("a fresh store");
    let now = Utc::now();
    let started = Instant::now();
    for page in calls.chunks(PAGE) {
        let ids: Vec<_> = page
            .iter()
            .map(|c| c.detail.detail.row.id.clone())
            .collect();
        Sink::known_calls(&store, &ids).await.expect("known calls");
        let batch = Batch {
            calls: page
                .iter()
                .map(|c| FetchedCall {
                    row: c.row.clone(),
                    detail: c.detail.clone(),
                })
                .collect(),
            failures: Vec::new(),
            rows_to_fill: Vec::new(),
            context: BatchContext {
                run_id: None,
                now,
                ledger_since: None,
                missed_before: now,
            },
        };
        Sink::store_batch(&store, batch)
            .await
            .expect("store a page");
    }
    let store_wall = started.elapsed();
    let stored = rows_in(&store_path, "calls").unwrap_or(0);
    let store_bytes = db_bytes(&store_path);
    let bare_path = dir.join("bare.db");
    let details: Vec<(String, String)> = calls
        .iter()
        .map(|c| {
            (
                c.detail.detail.row.id.as_str().to_owned(),
                c.detail.json.clone(),
            )
        })
        .collect();
    let bare_file = bare_path.clone();
    let (bare, bare_rows) = tokio::task::spawn_blocking(move || {
        let conn = rusqlite::Connection::open(&bare_path).expect("bare table");
        conn.pragma_update(None, "journal_mode", "WAL")
            .expect("WAL");
        conn.pragma_update(None, "synchronous", "NORMAL")
            .expect("synchronous");
        conn.execute_batch("CREATE TABLE calls (id TEXT PRIMARY KEY, detail TEXT NOT NULL)")
            .expect("create");
        let started = Instant::now();
        for page in details.chunks(PAGE) {
            conn.execute_batch("BEGIN IMMEDIATE").expect("begin");
            let mut insert = conn
                .prepare_cached("INSERT INTO calls (id, detail) VALUES (?1, ?2)")
                .expect("prepare");
            for (id, detail) in page {
                insert.execute((id, detail)).expect("insert");
            }
            drop(insert);
            conn.execute_batch("COMMIT").expect("commit");
        }
        let wall = started.elapsed();
        drop(conn);
        (wall, rows_in(&bare_path, "calls").unwrap_or(0))
    })
    .await
    .expect("bare insert task");
    StoreAlone {
        store: store_wall,
        stored,
        bare,
        bare_rows,
        store_bytes,
        bare_bytes: db_bytes(&bare_file),
    }
}

/// Calls per page: what reconcile lists and stores in one transaction.
const PAGE: usize = 100;

/// How many calls a sink holds, for the checks (and a `MemorySink`'s calls themselves).
trait Held {
    fn held(&self) -> u64;
    fn held_calls(&self) -> Vec<MemoryCall> {
        Vec::new()
    }
}

impl Held for MemorySink {
    fn held(&self) -> u64 {
        self.calls().len() as u64
    }
    fn held_calls(&self) -> Vec<MemoryCall> {
        self.calls().into_values().collect()
    }
}

impl Held for Store {
    fn held(&self) -> u64 {
        match self.location() {
            StoreLocation::File(path) => rows_in(path, "calls").unwrap_or(0),
            _ => 0,
        }
    }
}

/// Which in-process row: the `MemorySink`, svc-store or the bare table, checkpointed as
/// svc-store or never (the last three shown against the `MemorySink` run).
enum InProcess<'a> {
    Memory,
    Store(&'a InMemory),
    Bare(&'a InMemory),
    BareNeverCheckpointed(&'a InMemory),
}

impl Held for BareSink {
    fn held(&self) -> u64 {
        BareSink::held(self)
    }
}

/// Runs `svc-cli store export --store <store> --format <format>`, stdout drained and counted.
async fn export(store: &Path, format: &str) -> Measured {
    let mut command = svc_cli();
    command
        .args(["store", "export", "--store"])
        .arg(store)
        .args(["--format", format]);
    tokio::task::spawn_blocking(move || child::run(command, false))
        .await
        .expect("child task")
        .expect("run svc-cli store export")
}

/// The `svc-cli` that cargo built for this bench, with no configuration from the caller's
/// environment (no profile, config file, store or log filter).
fn svc_cli() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_svc-cli"));
    for var in [
        "SVC_BASE_URL",
        "SVC_API_KEY",
        "SVC_PROFILE",
        "SVC_CONFIG",
        "SVC_STORE",
        "RUST_LOG",
    ] {
        command.env_remove(var);
    }
    command
}

/// The walls of one row's rounds: which round is the median, and the range.
struct Spread {
    /// Index of the median round (the lower middle one for an even count).
    median: usize,
    min: Duration,
    max: Duration,
    rounds: usize,
}

impl Spread {
    fn of(walls: Vec<Duration>) -> Self {
        let mut order: Vec<usize> = (0..walls.len()).collect();
        order.sort_by_key(|&i| walls[i]);
        Self {
            median: order[(order.len() - 1) / 2],
            min: walls[order[0]],
            max: walls[order[order.len() - 1]],
            rounds: walls.len(),
        }
    }

    /// `median of R (min to max)` under the wall, for more than one round.
    fn cell(&self) -> String {
        if self.rounds < 2 {
            return String::new();
        }
        format!(
            "\nmedian of {} ({:.2} to {:.2})",
            self.rounds,
            self.min.as_secs_f64(),
            self.max.as_secs_f64()
        )
    }
}

/// Removes a SQLite file and its WAL and shared-memory files (the rounds' stores take room).
fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
}

/// The checks of one row: each holds or not.
#[derive(Debug, Default)]
struct Checks(Vec<(bool, String)>);

impl Checks {
    fn that(&mut self, ok: bool, what: String) {
        self.0.push((ok, what));
    }

    /// A count of the report's `totals` (or any figure) equals `want`.
    fn count(&mut self, what: &str, got: Option<u64>, want: u64) {
        match got {
            Some(got) if got == want => self.that(true, format!("{what} = {want}")),
            Some(got) => self.that(false, format!("{what} = {got}, want {want}")),
            None => self.that(false, format!("{what}: missing, want {want}")),
        }
    }

    /// The child exited with `code`, and a report says `outcome: ok` when there is one.
    fn exited(&mut self, run: &Measured, code: i32, report: Option<&Value>) {
        let ok = run.status.code() == Some(code);
        let mut what = format!("exit {}", run.status.code().unwrap_or(-1));
        if !ok {
            what.push_str(&format!(", want {code}: {}", last_line(&run.stderr)));
        }
        self.that(ok, what);
        if let Some(report) = report {
            let outcome = report["outcome"].as_str().unwrap_or("no report");
            let mut what = format!("outcome {outcome}");
            if let Some(error) = report["error"].as_str() {
                what.push_str(&format!(": {error}"));
            }
            self.that(outcome == "ok", what);
        }
    }

    fn failed(&self) -> bool {
        self.0.iter().any(|(ok, _)| !ok)
    }

    fn cell(&self) -> String {
        let lines: Vec<String> = self
            .0
            .iter()
            .map(|(ok, what)| format!("{} {what}", if *ok { "ok  " } else { "FAIL" }))
            .collect();
        lines.join("\n")
    }
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
}

fn total(report: &Value, key: &str) -> Option<u64> {
    report["totals"][key].as_u64()
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn mb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e6
}

/// `figure`, and below it the target with PASS or MISS.
fn against(figure: String, target: &str, ok: bool) -> String {
    format!("{figure}\n{target}: {}", if ok { "PASS" } else { "MISS" })
}

/// Fewer `VmHWM` reads than this and the peak is shown as a lower bound: the growth of the
/// last poll interval before exit is never seen.
const FEW_RSS_SAMPLES: u64 = 10;

fn rss_cell(run: &Measured) -> String {
    let target = format!("< {TARGET_RSS_MB:.0} MB");
    match run.peak_rss_kib {
        Some(kib) if run.rss_samples < FEW_RSS_SAMPLES => against(
            format!("≥ {:.1} MB ({} reads)", mb(kib), run.rss_samples),
            &target,
            mb(kib) < TARGET_RSS_MB,
        ),
        Some(kib) => against(
            format!("{:.1} MB", mb(kib)),
            &target,
            mb(kib) < TARGET_RSS_MB,
        ),
        None => format!("unknown\n{target}: MISS"),
    }
}

/// The number of rows of `table` in the SQLite file at `path`.
fn rows_in(path: &Path, table: &str) -> Option<u64> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| {
        r.get::<_, i64>(0)
    })
    .ok()
    .and_then(|n| u64::try_from(n).ok())
}

/// The table being built, and whether a check failed.
struct Rows {
    table: comfy_table::Table,
    failed: bool,
}

impl Default for Rows {
    fn default() -> Self {
        Self {
            table: svc_cli::output::table([
                "case", "calls", "wall", "rate", "peak RSS", "reads", "checks",
            ]),
            failed: false,
        }
    }
}

/// What a reconcile report says it read.
fn reads(report: &Value) -> String {
    let figure = |key| total(report, key).map_or_else(|| "?".into(), |n| n.to_string());
    format!(
        "pages {}\ndetails {}\nrequests {}",
        figure("pages"),
        figure("detailsFetched"),
        report["requests"]
            .as_u64()
            .map_or_else(|| "?".into(), |n| n.to_string())
    )
}

impl Rows {
    fn push(&mut self, cells: [String; 6], checks: &Checks) {
        self.failed |= checks.failed();
        let mut row: Vec<String> = cells.into();
        row.push(checks.cell());
        self.table.add_row(row);
    }

    /// A first reconcile of `calls` into an empty store (the child's measures, its report and
    /// the calls its store held afterwards); `quarter_rss_kib`: the peak RSS of the N/4 run, to
    /// show the N run's growth over it; `spread`: its rounds, when there were several.
    fn first_run(
        &mut self,
        (run, report, stored): (&Measured, &Value, Option<u64>),
        calls: u64,
        case: &str,
        quarter_rss_kib: Option<u64>,
        spread: Option<&Spread>,
    ) {
        let mut checks = Checks::default();
        checks.exited(run, 0, Some(report));
        checks.count("listed", total(report, "listed"), calls);
        checks.count("new", total(report, "new"), calls);
        checks.count("detailsFetched", total(report, "detailsFetched"), calls);
        checks.count("failed", total(report, "failed"), 0);
        checks.count("calls in the store", stored, calls);
        let rate = calls as f64 / run.wall.as_secs_f64();
        let mut rss = rss_cell(run);
        if let (Some(quarter), Some(full)) = (quarter_rss_kib, run.peak_rss_kib) {
            let growth = full as f64 / quarter as f64;
            rss.push_str(&format!(
                "\n{}",
                against(
                    format!("{growth:.2}× the N/4 run"),
                    &format!("≤ {TARGET_RSS_GROWTH}×"),
                    growth <= TARGET_RSS_GROWTH
                )
            ));
        }
        self.push(
            [
                format!("{case}\n(empty store)"),
                calls.to_string(),
                format!(
                    "{}{}",
                    secs(run.wall),
                    spread.map_or_else(String::new, Spread::cell)
                ),
                against(
                    format!("{rate:.0} calls/s"),
                    &format!("> {TARGET_RATE:.0} calls/s"),
                    rate > TARGET_RATE,
                ),
                rss,
                reads(report),
            ],
            &checks,
        );
    }

    /// The first reconcile of N in process (into a `MemorySink`, or into svc-store's SQLite
    /// store), against the `svc-cli` run (and the store's against the `MemorySink` run).
    fn in_process(
        &mut self,
        run: &InMemory,
        calls: u64,
        first: &Measured,
        which: InProcess<'_>,
        spread: &Spread,
    ) {
        let mut checks = Checks::default();
        if let Some(error) = &run.error {
            checks.that(false, format!("the run stopped: {error}"));
        }
        checks.count("listed", total(&run.report, "listed"), calls);
        checks.count("new", total(&run.report, "new"), calls);
        checks.count(
            "detailsFetched",
            total(&run.report, "detailsFetched"),
            calls,
        );
        checks.count("calls in the sink", Some(run.held), calls);
        let rate = calls as f64 / run.wall.as_secs_f64();
        let child = run.wall.as_secs_f64() / first.wall.as_secs_f64();
        let case = match which {
            InProcess::Memory => {
                "first reconcile, N, into a MemorySink\n(svc-reconcile in process:\nno store, no child)"
            }
            InProcess::Store(_) => {
                "first reconcile, N, into svc-store\n(svc-reconcile in process:\nthe SQLite store, no child)"
            }
            InProcess::Bare(_) => {
                "ceiling of a SQLite sink:\nthe same into a bare table\n(detail per id, a tx a page)"
            }
            InProcess::BareNeverCheckpointed(_) => {
                "the same bare table, its WAL\nnever checkpointed in the sync\n(wal_autocheckpoint = 0)"
            }
        };
        let against_memory = match which {
            InProcess::Memory => String::new(),
            InProcess::Store(memory)
            | InProcess::Bare(memory)
            | InProcess::BareNeverCheckpointed(memory) => format!(
                "\nthis: {:.2}× the MemorySink run",
                memory.wall.as_secs_f64() / run.wall.as_secs_f64()
            ),
        };
        self.push(
            [
                case.into(),
                calls.to_string(),
                format!(
                    "{}{}\nthe svc-cli run: {child:.2}× this{against_memory}",
                    secs(run.wall),
                    spread.cell()
                ),
                format!("{rate:.0} calls/s"),
                "- (in process)".into(),
                reads(&run.report),
            ],
            &checks,
        );
    }

    /// The store's own work and the bare insert, against the `MemorySink` run.
    fn store_alone(&mut self, alone: &StoreAlone, calls: u64, memory: &InMemory) {
        let rows = [
            (
                "svc-store alone: the same calls\n(known_calls + store_batch per\npage of 100; no service)",
                "calls in the store",
                alone.store,
                alone.stored,
                alone.store_bytes,
            ),
            (
                "ceiling of a SQLite store:\neach detail's text inserted\nbare (id key; page per tx)",
                "rows",
                alone.bare,
                alone.bare_rows,
                alone.bare_bytes,
            ),
        ];
        for (case, held, wall, rows_held, bytes) in rows {
            let mut checks = Checks::default();
            checks.count(held, Some(rows_held), calls);
            self.push(
                [
                    case.into(),
                    calls.to_string(),
                    format!(
                        "{}\n{:.0}% of the MemorySink run",
                        secs(wall),
                        wall.as_secs_f64() / memory.wall.as_secs_f64() * 100.0
                    ),
                    format!("{:.0} calls/s", calls as f64 / wall.as_secs_f64()),
                    "- (in process)".into(),
                    format!(
                        "{:.1} µs a call\n{:.1} MB on disk",
                        wall.as_secs_f64() * 1e6 / calls as f64,
                        bytes as f64 / 1e6
                    ),
                ],
                &checks,
            );
        }
    }

    fn ceiling(
        &mut self,
        ceiling: &Ceiling,
        calls: u64,
        first: &Measured,
        report: &Value,
        memory: &InMemory,
        spread: &Spread,
    ) {
        let mut checks = Checks::default();
        checks.count("listed", Some(ceiling.listed), calls);
        let pages = total(report, "pages").unwrap_or(u64::MAX);
        checks.count("pages (as reconcile)", Some(ceiling.pages), pages);
        let rate = calls as f64 / ceiling.wall.as_secs_f64();
        let share = ceiling.wall.as_secs_f64() / first.wall.as_secs_f64();
        let memory_share = ceiling.wall.as_secs_f64() / memory.wall.as_secs_f64();
        self.push(
            [
                format!(
                    "ceiling: the service alone\n(pages listed ahead, details\n\
                     ×{CEILING_IN_FLIGHT} as ids arrive;\nreqwest, same process)"
                ),
                calls.to_string(),
                format!(
                    "{}{}\n(list {})\n{:.0}% of the first run,\n{:.0}% of the MemorySink run",
                    secs(ceiling.wall),
                    spread.cell(),
                    secs(ceiling.list),
                    share * 100.0,
                    memory_share * 100.0
                ),
                format!("{rate:.0} calls/s"),
                "- (in process)".into(),
                format!(
                    "pages {}\ndetails {}\n{:.1} MB of details",
                    ceiling.pages,
                    ceiling.listed,
                    ceiling.detail_bytes as f64 / 1e6
                ),
            ],
            &checks,
        );
    }

    /// A rerun over the same window with every call stored.
    fn rerun(&mut self, run: &Measured, report: &Value, calls: u64) {
        let mut checks = Checks::default();
        checks.exited(run, 0, Some(report));
        checks.count("listed", total(report, "listed"), calls);
        checks.count("new", total(report, "new"), 0);
        checks.count("detailsFetched", total(report, "detailsFetched"), 0);
        checks.count("changedSilently", total(report, "changedSilently"), 0);
        let rate = calls as f64 / run.wall.as_secs_f64();
        self.push(
            [
                "rerun, every call stored".into(),
                calls.to_string(),
                against(
                    secs(run.wall),
                    &format!("< {} s", TARGET_RERUN.as_secs()),
                    run.wall < TARGET_RERUN,
                ),
                format!("{rate:.0} calls/s listed"),
                rss_cell(run),
                reads(report),
            ],
            &checks,
        );
    }

    /// A rerun after `changed` real calls were re-dispositioned in the service.
    fn redispositioned(
        &mut self,
        run: &Measured,
        report: &Value,
        store: &Path,
        calls: u64,
        changed: u64,
    ) {
        let mut checks = Checks::default();
        checks.exited(run, 3, Some(report));
        checks.count("listed", total(report, "listed"), calls);
        checks.count("new", total(report, "new"), 0);
        checks.count("detailsFetched", total(report, "detailsFetched"), changed);
        checks.count("changedSilently", total(report, "changedSilently"), changed);
        checks.count("logged changes", rows_in(store, "score_changes"), changed);
        let rate = calls as f64 / run.wall.as_secs_f64();
        self.push(
            [
                format!("rerun, {changed} real calls\nre-dispositioned (1%)"),
                calls.to_string(),
                secs(run.wall),
                format!("{rate:.0} calls/s listed"),
                rss_cell(run),
                reads(report),
            ],
            &checks,
        );
    }

    /// `store export --format <format>` of the N calls.
    fn export(&mut self, run: &Measured, format: &str, calls: u64) {
        let mut checks = Checks::default();
        checks.exited(run, 0, None);
        let header = u64::from(format == "csv");
        checks.count("lines", Some(run.stdout_lines), calls + header);
        let secs_taken = run.wall.as_secs_f64();
        self.push(
            [
                format!("store export\n--format {format}"),
                calls.to_string(),
                against(
                    secs(run.wall),
                    &format!("< {} s", TARGET_EXPORT.as_secs()),
                    run.wall < TARGET_EXPORT,
                ),
                format!(
                    "{:.0} calls/s\n{:.0} MB/s",
                    calls as f64 / secs_taken,
                    run.stdout_bytes as f64 / 1e6 / secs_taken
                ),
                rss_cell(run),
                format!("{:.1} MB written", run.stdout_bytes as f64 / 1e6),
            ],
            &checks,
        );
    }
}
