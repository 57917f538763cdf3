//! Load benchmark of the axum integration: 64 concurrent connections on loopback against
//!
//! 1. a verify-only server (verify + decode, answer 200: the baseline),
//! 2. inbox mode: verify, then commit to the durable SQLite inbox (WAL, `synchronous=FULL`,
//!    group commit) before the 200,
//! 3. direct mode with the durable SQLite dedup store (claim and complete, two commits),
//! 4. the inbox's storage without HTTP,
//! 5. a ceiling for any store on this machine: verify, then insert the row in the request's
//!    own task, into an in-memory database (one shared connection, committed every 64 rows).
//!    It does no I/O, is not durable and keeps no index,
//! 6. two ceilings for durable stores: verify, then hand the row to the leanest group commit
//!    there is (a mutex-guarded list, one thread, one wake-up broadcast for the whole group)
//!    and answer once it is durable, either in a log file (one `pwrite` and one `fdatasync`
//!    per group, no database at all) or in a bare SQLite table (WAL, `synchronous=FULL`, one
//!    insert per row, no index, no dedup). A durable store does all a ceiling does and more,
//!    so where the log-file row misses the target, no durable design can meet it on that
//!    machine, and where the SQLite row misses it, no design on SQLite with
//!    `synchronous=FULL` can.
//! 7. exactly-once direct mode on SQLite: the direct route with the SQLite dedup
//!    store, and the tenant's handler: one transaction of the tenant's own per delivery, in a
//!    file of its own (WAL, `synchronous=FULL`), that records the delivery
//!    (`SqliteRecorder`) and inserts one row into `effects`; the 200 goes out after its
//!    commit.
//!
//! With the feature `postgres` and `SVC_TEST_POSTGRES_URL` set (fresh schemas of that server
//! are used), more rows, through the same harness, with the server's own durable settings
//! (`synchronous_commit=on`):
//! - inbox mode and direct mode on PostgreSQL (client-side group commit: concurrent accepts,
//!   or claims and completions, are batched into one transaction);
//! - exactly-once direct mode through `tokio-postgres` (a `deadpool-postgres` pool of the
//!   tenant's) and, with the feature `sqlx-postgres` too, through `sqlx` (a `sqlx::PgPool` of
//!   the tenant's): the direct route with the PostgreSQL dedup store, and the tenant's
//!   handler: one transaction of its own per delivery that records it (`PgRecorder`) and
//!   inserts one row into the tenant's `effects`, then commits; the 200 goes out after that
//!   commit. Each driver has a tenant schema of its own (where `effects` is) with the crate's
//!   tables in a schema beside it (`PgDatabase::connect_in_schema`). And the tokio-postgres
//!   handler with an in-memory dedup store instead (the record alone deduplicates; replays
//!   are then caught per process only): what the durable store's claim and completion cost;
//! - a ceiling for exactly once on PostgreSQL: verify, then hand the delivery to one task
//!   that commits every delivery waiting in one transaction: their records in one statement
//!   (`unnest`, as the inbox's batches) and one prepared row per delivery into `effects` (the
//!   tenant's write), all pipelined, then one `COMMIT`, then the answers. No locks, no dedup
//!   check, no savepoint, no index but the effects' key: any exactly-once design on
//!   PostgreSQL writes at least this, so where this row misses 0.8 x the inbox, no design
//!   meets a target of 0.8 x on that machine;
//! - the same ceiling with the unique keys any design that deduplicates across replicas needs
//!   (the records' id and signature each unique): the least such a design writes;
//! - one transaction per delivery, the least the tenant-owned design does: verify,
//!   then on a connection of the tenant's pool `BEGIN`, the record's insert and the effect's
//!   (both prepared once per connection), `COMMIT`, then the 200; no dedup store, no claim,
//!   no task of its own. Where this row misses a target, no design with one transaction per
//!   delivery meets it on that machine;
//! - that one again with the effects run one after the other (each statement awaited before
//!   the next is sent), as the drivers' default mode and sqlx run them: the least a design
//!   that runs effects one at a time waits for.
//!
//! Every pool (the crate's, and the tenant's sqlx pool) has `SVC_BENCH_PG_CONNECTIONS`
//! connections (16 by default); they stay open for the whole run, so the server needs
//! `max_connections` of several times that.
//!
//! The servers take turns, in three rounds (`SVC_BENCH_ROUNDS` sets how many), so that a noisy
//! neighbour slows each of them alike.
//! Prints deliveries/s and latency percentiles per server, the ratio to verify-only and (column
//! `x PGin`, with PostgreSQL) to the PostgreSQL inbox row, the CPU time per delivery (the whole
//! process: server and load generator), the share of the machine's CPU time left idle and
//! stolen by the hypervisor while each server ran, the size of the inbox's files and how fast
//! inbox workers settle stored entries (the inbox rows' backlogs: a handler that returns at
//! once, 1 and 8 in hand, and each exactly-once driver in inbox mode, whose HTTP side is the
//! inbox row's). It checks that every acknowledged delivery is in the inbox afterwards (read
//! back through a fresh connection), and for every exactly-once row or worker run that each
//! acknowledged delivery or settled entry has its effect row, none twice.
//!
//! Targets: inbox mode at least 0.6 x verify-only with a p99 at most 3 x verify-only's; the
//! exactly-once configuration the README recommends (direct mode, the in-memory dedup store) at
//! least 0.9 x the ceiling of one transaction per delivery on the same database, printed as a line
//! per database after the table; and each exactly-once row's ratio to the PostgreSQL inbox. With
//! 64 connections in a closed loop the mean latency is 64 / throughput, so latency and throughput
//! move together; the ceiling rows show whether the machine can get there at all.
//!
//! Run: `cargo bench -p svc-receiver --bench load` (optionally `-- <seconds per server>`, and
//! words of the rows to run alone beside verify-only, such as `-- 3 postgres`; the inbox
//! workers' runs only without words or with `workers`); with PostgreSQL, every driver:
//! `SVC_TEST_POSTGRES_URL=… cargo bench -p svc-receiver --bench load` (`.ci/postgres start DIR`
//! starts a throwaway server and prints its URL). The crate's benches build with all its
//! features (its dev-dependency on itself turns them on).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use futures_util::StreamExt;
use hdrhistogram::Histogram;
use svc_contract::WebhookId;
use svc_contract::{Clock, Keyring, SigningSecret, SystemClock, Verifier, sign};
use svc_receiver::axum::{InboxReceiver, WebhookReceiver, inbox_route, webhook_route};
use svc_receiver::dedup::DedupPolicy;
use svc_receiver::inbox::{Inbox, InboxAdmin, InboxPolicy, run_inbox_workers};
use svc_receiver::sqlite::{SqliteDedupStore, SqliteInbox, SqliteRecorder};
use svc_receiver::{EventHandler, Received};

const SECRET: &str = "whsec_3kX9pQ2vR7mT1wY8zB4nL6cF0hJ5sD";
const CONNECTIONS: usize = 64;
/// Each server runs this many times, taking turns with the others.
const ROUNDS: u32 = 3;
/// How many acknowledged ids the durability check asks the reopened inbox for at once (the
/// writer answers up to 512 per transaction).
const READ_BACK_IN_FLIGHT: usize = 512;

/// The rounds to run: `SVC_BENCH_ROUNDS`, or [`ROUNDS`]. More rounds of shorter turns spread a
/// neighbour's slower minutes over every row alike, for ratios that vary less from run to run.
fn rounds() -> u32 {
    std::env::var("SVC_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(ROUNDS)
}

/// The exactly-once rows' tenant table: one row per event, written in the transaction that
/// records the delivery.
const SQLITE_EFFECTS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
    CREATE TABLE effects (n INTEGER PRIMARY KEY, webhook_id TEXT NOT NULL, call_id TEXT NOT NULL)";

/// A SQLite tenant for the exactly-once rows: its database at `path` with `effects` and the
/// recorded ids, and its handler: one transaction per delivery (record, one effect row,
/// commit) on a blocking thread, as the crate's example does.
fn sqlite_tenant(
    path: &std::path::Path,
    through_recorder: bool,
) -> impl Fn(Received) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
+ Send
+ Sync
+ Clone
+ 'static {
    let conn = rusqlite::Connection::open(path).expect("open");
    conn.busy_timeout(Duration::from_secs(5))
        .expect("busy timeout");
    conn.execute_batch(SQLITE_EFFECTS).expect("effects table");
    let recorder = SqliteRecorder::install(&conn).expect("recorder");
    let conn = Arc::new(std::sync::Mutex::new(conn));
    move |received: Received| {
        let (conn, recorder) = (Arc::clone(&conn), recorder.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut conn = conn
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let tx =
                    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                if recorder.record(&tx, &received)?.is_fresh() {
                    tx.prepare_cached("INSERT INTO effects (webhook_id, call_id) VALUES (?1, ?2)")?
                        .execute((received.webhook_id.as_str(), &received.event.call_id))?;
                }
                if through_recorder {
                    recorder.commit(tx, &received)
                } else {
                    tx.commit()
                }
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
        })
    }
}

/// The webhook ids of the rows of `path`'s `effects` table, read through a fresh connection.
fn sqlite_effects(path: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).expect("open");
    let mut select = conn
        .prepare("SELECT webhook_id FROM effects")
        .expect("prepare");
    select
        .query_map([], |row| row.get(0))
        .expect("select effects")
        .collect::<Result<_, _>>()
        .expect("read effects")
}

/// Prints and asserts an exactly-once row's check against the webhook ids of its `effects`
/// rows: every acknowledged delivery's effect is there, and no id's effect twice (a delivery
/// whose answer timed out may still have committed: effects without an acknowledgement are
/// allowed, duplicates are not).
fn check_effects(name: &str, acknowledged: &[String], effects: Vec<String>) {
    let rows = effects.len();
    let ids: std::collections::HashSet<String> = effects.into_iter().collect();
    let missing = acknowledged.iter().filter(|id| !ids.contains(*id)).count();
    println!(
        "{name} check: {} acknowledged, {rows} effects for {} ids, {missing} missing",
        acknowledged.len(),
        ids.len()
    );
    assert_eq!(
        missing, 0,
        "{name}: acknowledged deliveries without their effect"
    );
    assert_eq!(rows, ids.len(), "{name}: an effect applied twice");
}

/// Prints and asserts the check of exactly-once inbox workers that settled `settled` entries
/// of an inbox whose `effects` table was empty: one effect per settled entry, none twice.
fn check_settled(name: &str, settled: u64, effects: Vec<String>) {
    let rows = effects.len();
    let ids = effects
        .into_iter()
        .collect::<std::collections::HashSet<_>>()
        .len();
    println!("{name} check: {settled} entries settled, {rows} effects for {ids} ids");
    assert_eq!(
        rows as u64, settled,
        "{name}: effects and settled entries differ"
    );
    assert_eq!(rows, ids, "{name}: an effect applied twice");
}

fn verifier() -> Verifier {
    Verifier::new(Keyring::single(SigningSecret::new(SECRET).expect("secret")))
}

fn body(run: &str, n: usize) -> Vec<u8> {
    format!(
        r#"{{"event":"call.scored","success":false,"callId":"svc_call_{run}_{n:08}","source":"real_call","agentId":"svc_agent_01JGZ4A7H2C9D3E6F8G0J1K5MN","agencyId":"svc_agency_01JGZ49X0P3Q6R8S2T4U7V9WAB","platformAgentId":"rep-1042","platformAgencyId":"northwind-17","occurredAt":"2026-01-01T00:05:00Z","requestId":"req_{run}_{n:08}","reason":"SCORING_INCOMPLETE","reasonMessage":"The rep never spoke, so the call could not be scored."}}"#
    )
    .into_bytes()
}

async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    addr
}

struct RunResult {
    acknowledged: Vec<String>,
    failed: usize,
    elapsed: Duration,
    latency_us: Histogram<u64>,
    /// CPU time the whole process (server and load generator) used meanwhile.
    cpu: Duration,
    /// The machine's idle, stolen and total CPU ticks meanwhile.
    machine: [u64; 3],
}

/// CPU time this process has used so far (user + system), from `/proc/self/stat`; zero where
/// that file does not exist.
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces): utime and
    // stime are the 12th and 13th of them, in clock ticks (100 per second on Linux).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// The machine's CPU time so far, in clock ticks: (idle including I/O wait, stolen by the
/// hypervisor, total), from the first line of `/proc/stat`; zeros where it does not exist.
fn machine_cpu() -> [u64; 3] {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.parse().ok())
        .collect();
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal ...; guest time is counted in user.
    [at(3) + at(4), at(7), ticks.iter().take(8).sum()]
}

impl RunResult {
    fn empty() -> Self {
        Self {
            acknowledged: Vec::new(),
            failed: 0,
            elapsed: Duration::ZERO,
            latency_us: Histogram::new(3).expect("histogram"),
            cpu: Duration::ZERO,
            machine: [0; 3],
        }
    }

    fn absorb(&mut self, other: Self) {
        self.acknowledged.extend(other.acknowledged);
        self.failed += other.failed;
        self.elapsed += other.elapsed;
        self.latency_us.add(other.latency_us).expect("merge");
        self.cpu += other.cpu;
        for (sum, ticks) in self.machine.iter_mut().zip(other.machine) {
            *sum += ticks;
        }
    }
}

/// What a round drives: a server over HTTP, or the inbox called directly.
enum Target {
    Http(SocketAddr),
    Inbox(SqliteInbox),
}

/// One HTTP/1.1 request and response on a keep-alive connection; returns the status. A bare
/// client keeps the client's CPU cost small, so the numbers describe the server.
async fn exchange(
    stream: &mut tokio::io::BufReader<tokio::net::TcpStream>,
    request: &[u8],
) -> std::io::Result<u16> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    stream.get_mut().write_all(request).await?;
    let mut line = String::new();
    stream.read_line(&mut line).await?;
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut length = 0usize;
    loop {
        line.clear();
        stream.read_line(&mut line).await?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await?;
    Ok(status)
}

/// 64 client tasks, each on its own keep-alive connection, posting unique deliveries for
/// `duration`.
async fn drive(addr: SocketAddr, run: &str, duration: Duration) -> RunResult {
    let start = Instant::now();
    let mut tasks = Vec::new();
    let run: Arc<str> = run.into();
    for conn in 0..CONNECTIONS {
        let run = Arc::clone(&run);
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            stream.set_nodelay(true).expect("nodelay");
            let mut stream = tokio::io::BufReader::new(stream);
            let mut hist = Histogram::<u64>::new(3).expect("histogram");
            let (mut acked, mut failed) = (Vec::new(), 0usize);
            let mut n = 0;
            while start.elapsed() < duration {
                let id = format!("wh_{run}_{conn:02}_{n:07}");
                let body = body(&run, conn * 10_000_000 + n);
                n += 1;
                let header = sign(SECRET, SystemClock.now(), &body);
                let mut request = format!(
                    "POST /webhooks HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
                     x-service-signature: {header}\r\nx-service-webhook-id: {id}\r\n\
                     content-length: {}\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                request.extend_from_slice(&body);
                let sent = Instant::now();
                let status = exchange(&mut stream, &request).await.expect("HTTP exchange");
                let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                hist.record(micros.max(1)).expect("record");
                if status == 200 {
                    acked.push(id);
                } else {
                    failed += 1;
                }
            }
            (acked, failed, hist)
        }));
    }
    let mut result = RunResult::empty();
    for task in tasks {
        let (acked, failed, hist) = task.await.expect("client task");
        result.acknowledged.extend(acked);
        result.failed += failed;
        result.latency_us.add(hist).expect("merge");
    }
    result.elapsed = start.elapsed();
    result
}

/// 64 tasks calling the inbox directly: the storage ceiling without HTTP.
async fn store_only(inbox: &SqliteInbox, run: &str, duration: Duration) -> RunResult {
    let start = Instant::now();
    let mut tasks = Vec::new();
    let run: Arc<str> = run.into();
    for conn in 0..CONNECTIONS {
        let inbox = inbox.clone();
        let run = Arc::clone(&run);
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new(3).expect("histogram");
            let mut acked = Vec::new();
            let mut n = 0;
            while start.elapsed() < duration {
                let id = format!("wh_{run}_{conn:02}_{n:07}");
                let body = body(&run, conn * 10_000_000 + n);
                let mut signature = [0u8; 32];
                signature[..16].copy_from_slice(&((conn * 10_000_000 + n) as u128).to_le_bytes());
                n += 1;
                let webhook_id = WebhookId::parse(id.as_bytes()).expect("id");
                let sent = Instant::now();
                inbox
                    .accept(&webhook_id, &signature, &body, SystemClock.now())
                    .await
                    .expect("accept");
                hist.record(
                    u64::try_from(sent.elapsed().as_micros())
                        .unwrap_or(u64::MAX)
                        .max(1),
                )
                .expect("record");
                acked.push(id);
            }
            (acked, hist)
        }));
    }
    let mut result = RunResult::empty();
    for task in tasks {
        let (acked, hist) = task.await.expect("task");
        result.acknowledged.extend(acked);
        result.latency_us.add(hist).expect("merge");
    }
    result.elapsed = start.elapsed();
    result
}

/// Runs `workers` inbox workers on `inbox`'s stored entries with `handler` (`label` names
/// it) for 2 s, prints how many entries they settled per second, and returns how many. Where
/// the backlog ran out meanwhile, the rate is a lower bound, and the line says so.
async fn settle<I: InboxAdmin, H: EventHandler>(
    label: &str,
    inbox: &I,
    handler: H,
    workers: usize,
) -> u64 {
    let before = inbox.counts().await.expect("counts").1;
    let started = Instant::now();
    run_inbox_workers(
        inbox.clone(),
        handler,
        SystemClock,
        workers,
        tokio::time::sleep(Duration::from_secs(2)),
    )
    .await;
    let (pending, done, _) = inbox.counts().await.expect("counts");
    let settled = done - before;
    let note = if pending == 0 {
        " (backlog ran out: at least that)"
    } else {
        ""
    };
    println!(
        "inbox workers, {label}: {workers} in hand, {:.0} entries settled/s{note}",
        settled as f64 / started.elapsed().as_secs_f64()
    );
    settled
}

fn rate(result: &RunResult) -> f64 {
    result.acknowledged.len() as f64 / result.elapsed.as_secs_f64()
}

/// Width of the table's first column.
const NAME: usize = 40;

/// One line of the table: `baseline` is verify-only's rate, `pg_inbox` the PostgreSQL inbox
/// row's (the exactly-once target's reference) when there is one.
fn row(name: &str, result: &RunResult, baseline: f64, pg_inbox: Option<f64>) {
    let h = &result.latency_us;
    let [idle, steal, total] = result.machine;
    let share = |ticks: u64| 100.0 * ticks as f64 / total.max(1) as f64;
    let to_pg = pg_inbox.map_or_else(|| "-".to_owned(), |pg| format!("{:.2}", rate(result) / pg));
    println!(
        "{name:<NAME$} {:>9} {:>6} {:>10.0} {:>6.2} {to_pg:>6} {:>8.2} {:>8.2} {:>8.2} {:>7.1} {:>6.0} {:>6.0}",
        result.acknowledged.len(),
        result.failed,
        rate(result),
        rate(result) / baseline,
        h.value_at_quantile(0.50) as f64 / 1000.0,
        h.value_at_quantile(0.99) as f64 / 1000.0,
        h.max() as f64 / 1000.0,
        result.cpu.as_secs_f64() * 1e6 / result.acknowledged.len().max(1) as f64,
        share(idle),
        share(steal),
    );
}

/// The ceilings' checks, as the receiver makes them: the delivery verified and decoded, as
/// the record to store, or the status to answer.
fn verified(verifier: &Verifier, headers: &HeaderMap, body: Bytes) -> Result<Record, StatusCode> {
    let header = headers
        .get("x-service-signature")
        .map_or(&[][..], |h| h.as_bytes());
    let id = headers
        .get("x-service-webhook-id")
        .map(|h| Bytes::copy_from_slice(h.as_bytes()))
        .unwrap_or_default();
    let received_at = SystemClock.now();
    let delivery = verifier
        .verify(header, &body, received_at)
        .map_err(|_| StatusCode::UNAUTHORIZED)?;
    delivery.decode().map_err(|_| StatusCode::BAD_REQUEST)?;
    let signature = *delivery.signature();
    Ok(Record {
        id,
        signature,
        body,
        received_at,
    })
}

/// The ceiling server (see the module docs): verify and decode, then insert into an in-memory
/// SQLite database in the request's own task, without looking anything up.
fn ceiling() -> Router {
    let conn = rusqlite::Connection::open_in_memory().expect("open");
    conn.execute_batch(
        "CREATE TABLE rows (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, signature BLOB NOT NULL,
                            body BLOB NOT NULL, received_at INTEGER NOT NULL)",
    )
    .expect("schema");
    // The connection and the rows written since the last commit.
    let db = Arc::new(std::sync::Mutex::new((conn, 0u32)));
    let verifier = Arc::new(verifier());
    Router::new().route(
        "/webhooks",
        post(move |headers: HeaderMap, body: Bytes| async move {
            let record = match verified(&verifier, &headers, body) {
                Ok(record) => record,
                Err(status) => return status,
            };
            let mut guard = db.lock().expect("lock");
            let (conn, pending) = &mut *guard;
            let stored = (|| {
                if *pending == 0 {
                    conn.execute_batch("BEGIN")?;
                }
                conn.prepare_cached(
                    "INSERT INTO rows (id, signature, body, received_at) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(rusqlite::params![
                    &record.id[..],
                    &record.signature[..],
                    &record.body[..],
                    record.received_at
                ])?;
                *pending += 1;
                if *pending >= 64 {
                    conn.execute_batch("COMMIT")?;
                    *pending = 0;
                }
                Ok::<_, rusqlite::Error>(())
            })();
            match stored {
                Ok(()) => StatusCode::OK,
                Err(_) => StatusCode::SERVICE_UNAVAILABLE,
            }
        }),
    )
}

/// A delivery as the ceilings store it.
struct Record {
    id: Bytes,
    signature: [u8; 32],
    body: Bytes,
    received_at: i64,
}

/// Where a durable ceiling makes its records durable; one call per group of records.
enum Sink {
    /// A log file overwritten in place within a preallocated region (like a rewound WAL): one
    /// `pwrite` and one `fdatasync` per group.
    File {
        file: std::fs::File,
        offset: u64,
        buffer: Vec<u8>,
    },
    /// A SQLite table (WAL, `synchronous=FULL`) keyed by rowid only: one transaction per group.
    Sqlite(rusqlite::Connection),
}

/// Size of the file sink's region.
const LOG_REGION: u64 = 64 << 20;

impl Sink {
    fn file(path: &std::path::Path) -> Self {
        use std::io::Write;
        let mut file = std::fs::File::create(path).expect("log");
        // Written and synced once, so that later writes change no metadata.
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..(LOG_REGION >> 20) {
            file.write_all(&zeros).expect("preallocate");
        }
        file.sync_all().expect("sync");
        Self::File {
            file,
            offset: 0,
            buffer: Vec::new(),
        }
    }

    fn sqlite(path: &std::path::Path) -> Self {
        let conn = rusqlite::Connection::open(path).expect("open");
        conn.pragma_update(None, "journal_mode", "WAL")
            .expect("wal");
        conn.pragma_update(None, "synchronous", "FULL")
            .expect("synchronous");
        conn.execute_batch(
            "CREATE TABLE rows (seq INTEGER PRIMARY KEY, id BLOB NOT NULL, signature BLOB NOT NULL,
                                body BLOB NOT NULL, received_at INTEGER NOT NULL)",
        )
        .expect("schema");
        Self::Sqlite(conn)
    }

    fn store(&mut self, records: &[Record]) {
        match self {
            Self::File {
                file,
                offset,
                buffer,
            } => {
                use std::os::unix::fs::FileExt;
                buffer.clear();
                for record in records {
                    for part in [&record.id[..], &record.signature[..], &record.body[..]] {
                        buffer.extend_from_slice(&(part.len() as u32).to_le_bytes());
                        buffer.extend_from_slice(part);
                    }
                    buffer.extend_from_slice(&record.received_at.to_le_bytes());
                }
                if *offset + buffer.len() as u64 > LOG_REGION {
                    *offset = 0;
                }
                file.write_all_at(buffer, *offset).expect("write");
                *offset += buffer.len() as u64;
                file.sync_data().expect("fdatasync");
            }
            Self::Sqlite(conn) => {
                conn.execute_batch("BEGIN IMMEDIATE").expect("begin");
                let mut insert = conn
                    .prepare_cached(
                        "INSERT INTO rows (id, signature, body, received_at) VALUES (?1, ?2, ?3, ?4)",
                    )
                    .expect("prepare");
                for record in records {
                    insert
                        .execute(rusqlite::params![
                            &record.id[..],
                            &record.signature[..],
                            &record.body[..],
                            record.received_at
                        ])
                        .expect("insert");
                }
                drop(insert);
                conn.execute_batch("COMMIT").expect("commit");
            }
        }
    }
}

/// Records appended by request tasks and not yet stored, and the sequence number of the last.
#[derive(Default)]
struct Pending {
    records: Vec<Record>,
    last: u64,
}

/// The durable ceilings' group commit, as lean as it gets: a request appends its record under
/// a mutex; one thread takes every pending record, stores them in its [`Sink`] and publishes
/// the last stored sequence number on a watch channel, which wakes every request waiting.
struct GroupCommit {
    pending: std::sync::Mutex<Pending>,
    filled: std::sync::Condvar,
    durable: tokio::sync::watch::Sender<u64>,
}

impl GroupCommit {
    fn start(mut sink: Sink) -> Arc<Self> {
        let (durable, _) = tokio::sync::watch::channel(0u64);
        let group = Arc::new(Self {
            pending: std::sync::Mutex::default(),
            filled: std::sync::Condvar::new(),
            durable,
        });
        let writer = Arc::clone(&group);
        std::thread::spawn(move || {
            let mut taken = Vec::new();
            loop {
                let last = {
                    let mut pending = writer.pending.lock().expect("lock");
                    while pending.records.is_empty() {
                        pending = writer.filled.wait(pending).expect("wait");
                    }
                    std::mem::swap(&mut pending.records, &mut taken);
                    pending.last
                };
                sink.store(&taken);
                taken.clear();
                writer.durable.send_replace(last);
            }
        });
        group
    }

    /// Appends one record and returns once it is durable.
    async fn append(&self, record: Record) {
        let mut durable = self.durable.subscribe();
        let seq = {
            let mut pending = self.pending.lock().expect("lock");
            pending.records.push(record);
            pending.last += 1;
            if pending.records.len() == 1 {
                self.filled.notify_one();
            }
            pending.last
        };
        durable
            .wait_for(|last| *last >= seq)
            .await
            .expect("writer thread");
    }
}

/// A durable ceiling server (see the module docs): verify and decode, then answer once the
/// delivery is durable in `sink`, through [`GroupCommit`]. No index, no dedup, no retention.
fn durable_ceiling(sink: Sink) -> Router {
    let group = GroupCommit::start(sink);
    let verifier = Arc::new(verifier());
    Router::new().route(
        "/webhooks",
        post(move |headers: HeaderMap, body: Bytes| async move {
            match verified(&verifier, &headers, body) {
                Ok(record) => {
                    group.append(record).await;
                    StatusCode::OK
                }
                Err(status) => status,
            }
        }),
    )
}

fn main() {
    let seconds = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse::<u64>().ok())
        .unwrap_or(6);
    // Rows to run (words of their names; verify-only always runs, as the baseline): every
    // other argument that is not a number and not one of cargo's flags.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| arg.parse::<u64>().is_err() && !arg.starts_with("--"))
        .map(|arg| arg.to_lowercase())
        .collect();
    let runs = |name: &str| {
        only.is_empty()
            || name == "verify only"
            || only
                .iter()
                .any(|word| name.to_lowercase().contains(word.as_str()))
    };
    let workers = only.is_empty() || only.iter().any(|word| word == "workers");
    let duration = Duration::from_secs(seconds);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let dir = tempfile::tempdir().expect("temp dir");

        let shared = std::sync::Arc::new(verifier());
        let verify_only = Router::new().route(
            "/webhooks",
            post(move |headers: HeaderMap, body: Bytes| async move {
                let header = headers.get("x-service-signature").map(|h| h.as_bytes().to_vec());
                match shared.verify(&header.unwrap_or_default(), &body, SystemClock.now()) {
                    Ok(delivery) if delivery.decode().is_ok() => StatusCode::OK,
                    _ => StatusCode::UNAUTHORIZED,
                }
            }),
        );
        let inbox_path = dir.path().join("inbox.db");
        let inbox = SqliteInbox::open(&inbox_path, InboxPolicy::default()).expect("inbox");
        let inbox_backlog = inbox.clone();
        let store = SqliteDedupStore::open(dir.path().join("dedup.db"), DedupPolicy::default()).expect("store");
        let handler = |_: Received| async { Ok::<(), String>(()) };
        let raw = SqliteInbox::open(dir.path().join("raw.db"), InboxPolicy::default()).expect("inbox");
        // Exactly once on SQLite: the tenant's own file, and a dedup store in another.
        let effects_path = dir.path().join("effects.db");
        let exactly_once = sqlite_tenant(&effects_path, false);
        // The configuration the README recommends: the record is the durable dedup record.
        let effects_memory_path = dir.path().join("effects-memory.db");
        let exactly_once_memory = sqlite_tenant(&effects_memory_path, true);
        // Its ceiling: one transaction per delivery, committed by the driver, nothing else.
        let effects_ceiling_path = dir.path().join("effects-ceiling.db");
        let transaction_ceiling = sqlite_tenant(&effects_ceiling_path, false);
        let eo_store = SqliteDedupStore::open(dir.path().join("eo-dedup.db"), DedupPolicy::default()).expect("store");
        // Without the feature `postgres` nothing is added to it.
        #[cfg_attr(not(feature = "postgres"), allow(unused_mut, clippy::useless_vec))]
        let mut targets = vec![
            ("verify only", Target::Http(serve(verify_only).await)),
            ("inbox (SQLite FULL, group commit)", Target::Http(serve(Router::new().route("/webhooks", inbox_route(InboxReceiver::new(verifier(), inbox)))).await)),
            ("direct + SQLite dedup store", Target::Http(serve(Router::new().route("/webhooks", webhook_route(WebhookReceiver::new(verifier(), store, handler)))).await)),
            ("inbox accept only (no HTTP)", Target::Inbox(raw)),
            ("ceiling: in-memory SQLite insert", Target::Http(serve(ceiling()).await)),
            ("durable ceiling: log file", Target::Http(serve(durable_ceiling(Sink::file(&dir.path().join("ceiling.log")))).await)),
            ("durable ceiling: SQLite FULL", Target::Http(serve(durable_ceiling(Sink::sqlite(&dir.path().join("ceiling.db")))).await)),
            (EO_SQLITE, Target::Http(serve(Router::new().route("/webhooks", webhook_route(WebhookReceiver::new(verifier(), eo_store, exactly_once)))).await)),
            (EO_SQLITE_MEMORY, Target::Http(serve(Router::new().route("/webhooks", webhook_route(WebhookReceiver::new(verifier(), svc_receiver::dedup::MemoryDedupStore::default(), exactly_once_memory)))).await)),
            (EO_SQLITE_TX_CEILING, Target::Http(serve(transaction_ceiling_route(transaction_ceiling)).await)),
        ];
        #[cfg(feature = "postgres")]
        let postgres = postgres_targets().await;
        #[cfg(feature = "postgres")]
        if let Some(postgres) = &postgres {
            for (name, addr) in &postgres.servers {
                targets.push((*name, Target::Http(*addr)));
            }
        }
        let mut results: Vec<RunResult> = targets.iter().map(|_| RunResult::empty()).collect();
        let rounds = rounds();
        let per_round = duration / rounds;
        for round in 0..rounds {
            for (k, (name, target)) in targets.iter().enumerate() {
                if !runs(name) {
                    continue;
                }
                let run = format!("t{k}r{round}");
                let cpu_before = process_cpu();
                let machine_before = machine_cpu();
                let mut result = match target {
                    Target::Http(addr) => drive(*addr, &run, per_round).await,
                    Target::Inbox(inbox) => store_only(inbox, &run, per_round).await,
                };
                result.cpu = process_cpu().saturating_sub(cpu_before);
                let machine_after = machine_cpu();
                for (i, ticks) in result.machine.iter_mut().enumerate() {
                    *ticks = machine_after[i].saturating_sub(machine_before[i]);
                }
                results[k].absorb(result);
            }
        }

        println!("\n{CONNECTIONS} connections, {seconds} s per server in {rounds} rounds, loopback, {} cores", std::thread::available_parallelism().map_or(0, |n| n.get()));
        println!(
            "{:<NAME$} {:>9} {:>6} {:>10} {:>6} {:>6} {:>8} {:>8} {:>8} {:>7} {:>6} {:>6}",
            "server", "acked", "failed", "per sec", "ratio", "x PGin", "p50 ms", "p99 ms", "max ms", "cpu us", "idle%", "steal%"
        );
        let result_of = |name: &str| targets.iter().position(|(n, _)| *n == name).map(|k| &results[k]);
        let baseline = rate(&results[0]);
        let pg_inbox = result_of(PG_INBOX).map(rate);
        for ((name, _), result) in targets.iter().zip(&results) {
            if runs(name) {
                row(name, result, baseline, pg_inbox);
            }
        }
        // The configuration the README recommends for exactly once against the ceiling of one
        // transaction per delivery on the same database (target: at least 0.9x).
        for (row, ceiling) in [(EO_PG_MEMORY, EO_PG_TX_CEILING), (EO_SQLITE_MEMORY, EO_SQLITE_TX_CEILING)] {
            if let (Some(result), Some(top)) = (result_of(row).filter(|_| runs(row)), result_of(ceiling).filter(|_| runs(ceiling))) {
                println!("recommended against its ceiling: {row}: {:.2}x of {ceiling}", rate(result) / rate(top));
            }
        }
        // Each exactly-once row and ceiling against the PostgreSQL inbox of the same run.
        if let Some(pg_inbox) = pg_inbox {
            let exactly_once = [
                EO_SQLITE,
                EO_PG,
                EO_PG_MEMORY,
                EO_SQLX,
                EO_PG_CEILING,
                EO_PG_KEYED_CEILING,
                EO_PG_ONE_BY_ONE_CEILING,
                EO_PG_TX_CEILING,
            ];
            for name in exactly_once {
                let Some(result) = result_of(name).filter(|_| runs(name)) else { continue };
                let ratio = rate(result) / pg_inbox;
                let p99 = result.latency_us.value_at_quantile(0.99) as f64 / 1000.0;
                println!("exactly once against {PG_INBOX}: {name}: {ratio:.2}x, p99 {p99:.2} ms");
            }
        }
        let inboxed = &results[1];
        let mib = |path: std::path::PathBuf| std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1048576.0);
        println!(
            "\ninbox files: database {:.1} MiB, WAL {:.1} MiB",
            mib(inbox_path.clone()),
            mib(dir.path().join("inbox.db-wal")),
        );

        // How fast workers hand stored entries to a handler that returns at once.
        if workers {
        let raw = match &targets[3].1 {
            Target::Inbox(raw) => raw.clone(),
            Target::Http(_) => unreachable!("the fourth target is the bare inbox"),
        };
        let no_op = |_: Received| async { Ok::<(), String>(()) };
        for workers in [1, 8] {
            settle("no-op handler (SQLite)", &raw, no_op, workers).await;
        }
        // Exactly once in inbox mode: the inbox row's backlog, each entry recorded with its
        // effect in a transaction of the tenant's (the HTTP side is the inbox row's: accept,
        // then 200).
        let mut settled = 0;
        let inbox_effects_path = dir.path().join("inbox-effects.db");
        let handler = sqlite_tenant(&inbox_effects_path, false);
        for workers in [1, 8] {
            settled += settle("exactly once (SQLite)", &inbox_backlog, handler.clone(), workers).await;
        }
        check_settled("exactly once, inbox mode (SQLite)", settled, sqlite_effects(&inbox_effects_path));
        #[cfg(feature = "postgres")]
        if let Some(postgres) = &postgres {
            let inbox = &postgres.inbox;
            settle("no-op handler (PostgreSQL)", inbox, no_op, 8).await;
            let recorder = inbox.database().recorder();
            #[cfg_attr(not(feature = "sqlx-postgres"), allow(unused_mut))]
            let mut settled = settle("exactly once (tokio-postgres)", inbox, pg_handler(postgres.inbox_tenant_pool.clone(), recorder.clone()), 8).await;
            #[cfg(feature = "sqlx-postgres")]
            {
                settled += settle("exactly once (sqlx PostgreSQL)", inbox, sqlx_handler(postgres.inbox_pool.clone(), recorder), 8).await;
            }
            check_settled("exactly once, inbox mode (PostgreSQL)", settled, pg_effects(&postgres.inbox_effects).await);
        }
        }

        // Durability check through a fresh connection: nothing acknowledged may be missing.
        // The ids are asked for many at a time: the writer answers a batch of them per
        // transaction (one at a time, reading a 30-second run back took about 20 s).
        let reopened = SqliteInbox::open(&inbox_path, InboxPolicy::default()).expect("reopen");
        let missing = futures_util::stream::iter(&inboxed.acknowledged)
            .map(|id| {
                let reopened = &reopened;
                async move {
                    let id = WebhookId::parse(id.as_bytes()).expect("id");
                    !reopened.contains(&id).await.expect("contains")
                }
            })
            .buffer_unordered(READ_BACK_IN_FLIGHT)
            .filter(|missing| std::future::ready(*missing))
            .count()
            .await;
        let (pending, done, dead) = reopened.counts().await.expect("counts");
        println!(
            "\ninbox check: {} acknowledged, {} stored (pending {pending}, done {done}, dead {dead}), {missing} missing",
            inboxed.acknowledged.len(),
            pending + done + dead,
        );
        assert_eq!(missing, 0, "acknowledged deliveries missing from the inbox");

        // Direct mode acknowledges after completing the claim: every acknowledged id must be
        // remembered as done by a fresh store on the file (a later copy is a duplicate).
        let reopened = SqliteDedupStore::open(dir.path().join("dedup.db"), DedupPolicy::default()).expect("reopen");
        let done = reopened.completed_count().await.expect("count");
        let acked = results[2].acknowledged.len() as u64;
        println!("dedup check: {acked} acknowledged, {done} completed claims stored");
        assert!(done >= acked, "acknowledged deliveries missing from the dedup store");

        // Exactly once: every acknowledged delivery's effect, once.
        let acked = |name: &str| result_of(name).map_or(&[][..], |result| &result.acknowledged[..]);
        check_effects(EO_SQLITE, acked(EO_SQLITE), sqlite_effects(&effects_path));
        check_effects(EO_SQLITE_MEMORY, acked(EO_SQLITE_MEMORY), sqlite_effects(&effects_memory_path));
        check_effects(EO_SQLITE_TX_CEILING, acked(EO_SQLITE_TX_CEILING), sqlite_effects(&effects_ceiling_path));

        #[cfg(feature = "postgres")]
        if let Some(postgres) = &postgres {
            let (pending, done, dead) = postgres.inbox.counts().await.expect("counts");
            let acked_inbox = acked(PG_INBOX).len() as u64;
            println!("PostgreSQL inbox check: {acked_inbox} acknowledged, {} stored", pending + done + dead);
            assert!(pending + done + dead >= acked_inbox, "acknowledged deliveries missing from the PostgreSQL inbox");
            let done = postgres.store.completed_count().await.expect("count");
            let acked_direct = acked(PG_DIRECT).len() as u64;
            println!("PostgreSQL dedup check: {acked_direct} acknowledged, {done} completed claims stored");
            assert!(done >= acked_direct, "acknowledged deliveries missing from the PostgreSQL dedup store");
            for (name, tenant) in &postgres.effects {
                check_effects(name, acked(name), pg_effects(tenant).await);
            }
        }
    });
}

/// The PostgreSQL rows' names.
const PG_INBOX: &str = "inbox (PostgreSQL)";
/// The same with no batching: one statement and one commit per accept.
#[cfg(feature = "postgres")]
const PG_INBOX_UNBATCHED: &str = "inbox (PostgreSQL), unbatched: a statement per accept";
#[cfg(feature = "postgres")]
const PG_DIRECT: &str = "direct + PostgreSQL dedup store";
/// The exactly-once rows' names (direct mode: the effect commits before the 200).
const EO_SQLITE: &str = "exactly once, direct: SQLite";
const EO_SQLITE_MEMORY: &str = "exactly once, direct: SQLite, memory dedup";
/// One transaction per delivery on SQLite, the least the tenant-owned design does there.
const EO_SQLITE_TX_CEILING: &str = "exactly-once ceiling: SQLite, one transaction per delivery";
const EO_PG: &str = "exactly once, direct: tokio-postgres";
const EO_PG_MEMORY: &str = "exactly once, direct: tokio-postgres, memory dedup";
const EO_SQLX: &str = "exactly once, direct: sqlx PostgreSQL";
/// The exactly-once ceiling on PostgreSQL (see the module docs).
const EO_PG_CEILING: &str = "exactly-once ceiling: PostgreSQL";
/// The same with the records' id and signature unique (see the module docs).
const EO_PG_KEYED_CEILING: &str = "exactly-once ceiling: PostgreSQL, unique keys";
/// The same with the effects one after the other (see the module docs).
const EO_PG_ONE_BY_ONE_CEILING: &str = "exactly-once ceiling: PostgreSQL, keys, one by one";
/// One transaction per delivery, the least the tenant-owned design does (see the module docs).
const EO_PG_TX_CEILING: &str = "exactly-once ceiling: one transaction per delivery";

/// What an exactly-once ceiling on PostgreSQL leaves out (see the module docs).
#[cfg(feature = "postgres")]
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ceiling {
    /// No unique key, effects pipelined.
    Bare,
    /// The records' id and signature unique, effects pipelined.
    UniqueKeys,
    /// The records' id and signature unique, effects one after the other.
    UniqueKeysOneByOne,
}

/// The tenant's handler on PostgreSQL through tokio-postgres (its own deadpool pool): one
/// transaction per delivery that records it and inserts one row into `effects`.
#[cfg(feature = "postgres")]
fn pg_handler(
    pool: deadpool_postgres::Pool,
    recorder: svc_receiver::postgres::PgRecorder,
) -> impl EventHandler + Clone {
    move |received: Received| {
        let (pool, recorder) = (pool.clone(), recorder.clone());
        async move { pg_write(&pool, &recorder, &received, false).await }
    }
}

/// The tenant's transaction for one delivery through tokio-postgres: record it, insert one row
/// into `effects` (both prepared once per connection, by deadpool's statement cache), commit.
#[cfg(feature = "postgres")]
async fn pg_write(
    pool: &deadpool_postgres::Pool,
    recorder: &svc_receiver::postgres::PgRecorder,
    received: &Received,
    through_recorder: bool,
) -> Result<(), String> {
    let mut client = pool.get().await.map_err(|e| e.to_string())?;
    let tx = client.transaction().await.map_err(|e| e.to_string())?;
    if recorder
        .record(&tx, received)
        .await
        .map_err(|e| e.to_string())?
        .is_fresh()
    {
        let insert = tx
            .prepare_cached("INSERT INTO effects (webhook_id, call_id) VALUES ($1, $2)")
            .await
            .map_err(|e| e.to_string())?;
        tx.execute(
            &insert,
            &[&received.webhook_id.as_str(), &received.event.call_id],
        )
        .await
        .map_err(|e| e.to_string())?;
    }
    if through_recorder {
        recorder
            .commit(tx, received)
            .await
            .map_err(|e| e.to_string())
    } else {
        tx.commit().await.map_err(|e| e.to_string())
    }
}

/// The tenant's handler on PostgreSQL through sqlx (its own pool): as [`pg_handler`].
#[cfg(feature = "sqlx-postgres")]
fn sqlx_handler(
    pool: sqlx::PgPool,
    recorder: svc_receiver::postgres::PgRecorder,
) -> impl EventHandler + Clone {
    move |received: Received| {
        let (pool, recorder) = (pool.clone(), recorder.clone());
        async move {
            let mut tx = pool.begin().await.map_err(|e| e.to_string())?;
            if recorder
                .record_sqlx(&mut tx, &received)
                .await
                .map_err(|e| e.to_string())?
                .is_fresh()
            {
                sqlx::query("INSERT INTO effects (webhook_id, call_id) VALUES ($1, $2)")
                    .bind(received.webhook_id.as_str())
                    .bind(&received.event.call_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            tx.commit().await.map_err(|e| e.to_string())
        }
    }
}

/// The one-transaction-per-delivery ceiling (see the module docs): verify, then run
/// `transaction` (record and write the effect in one transaction of the tenant's, committed by
/// the driver), then answer: no dedup store, no task of its own, no check of the record.
fn transaction_ceiling_route(transaction: impl EventHandler) -> Router {
    let (verifier, transaction) = (Arc::new(verifier()), Arc::new(transaction));
    Router::new().route(
        "/webhooks",
        post(move |headers: HeaderMap, body: Bytes| {
            let (verifier, transaction) = (Arc::clone(&verifier), Arc::clone(&transaction));
            async move {
                let record = match verified(&verifier, &headers, body) {
                    Ok(record) => record,
                    Err(status) => return status,
                };
                let Ok(id) = WebhookId::parse(&record.id) else {
                    return StatusCode::BAD_REQUEST;
                };
                let Ok(event) = serde_json::from_slice(&record.body) else {
                    return StatusCode::BAD_REQUEST;
                };
                let received = Received::new(id, event, &record.body[..], record.received_at)
                    .with_signature(record.signature);
                match transaction.handle(received).await {
                    Ok(()) => StatusCode::OK,
                    Err(_) => StatusCode::SERVICE_UNAVAILABLE,
                }
            }
        }),
    )
}

/// The simplest PostgreSQL inbox route (see [`PG_INBOX_UNBATCHED`]): verify, then run `accept`
/// (one call of the crate's per-row accept function) alone on a pooled connection, then answer.
#[cfg(feature = "postgres")]
fn unbatched_inbox(pool: deadpool_postgres::Pool, accept: String) -> Router {
    let (verifier, accept) = (Arc::new(verifier()), Arc::<str>::from(accept));
    Router::new().route(
        "/webhooks",
        post(move |headers: HeaderMap, body: Bytes| {
            let (pool, verifier, accept) =
                (pool.clone(), Arc::clone(&verifier), Arc::clone(&accept));
            async move {
                let record = match verified(&verifier, &headers, body) {
                    Ok(record) => record,
                    Err(status) => return status,
                };
                let Ok(client) = pool.get().await else {
                    return StatusCode::SERVICE_UNAVAILABLE;
                };
                let Ok(statement) = client.prepare_cached(&accept).await else {
                    return StatusCode::SERVICE_UNAVAILABLE;
                };
                let id = String::from_utf8_lossy(&record.id).into_owned();
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] = [
                    &id,
                    &&record.signature[..],
                    &&record.body[..],
                    &record.received_at,
                ];
                match client.query_one(&statement, &params).await {
                    Ok(row) => match row.get::<_, &str>(0) {
                        "stored" | "duplicate" => StatusCode::OK,
                        _ => StatusCode::UNAUTHORIZED,
                    },
                    Err(_) => StatusCode::SERVICE_UNAVAILABLE,
                }
            }
        }),
    )
}

/// The tenant's own deadpool pool on `url`, of `connections` connections.
#[cfg(feature = "postgres")]
fn tenant_pool(url: &str, connections: usize) -> deadpool_postgres::Pool {
    let config: tokio_postgres::Config = url.parse().expect("url");
    deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(
        config,
        tokio_postgres::NoTls,
    ))
    .max_size(connections)
    .build()
    .expect("pool")
}

/// A delivery waiting for the PostgreSQL ceiling's next group, and who waits for it.
#[cfg(feature = "postgres")]
type Waiting = (Record, tokio::sync::oneshot::Sender<()>);

/// The exactly-once ceiling on PostgreSQL (see the module docs), on the `search_path` schema
/// of `url`, where `effects` is: verify and decode, then answer once the delivery's group
/// committed. One group at a time, on one connection; one by one, four at once (as the
/// drivers' batches), each on its own connection, since a group then mostly waits.
#[cfg(feature = "postgres")]
async fn pg_exactly_once_ceiling(url: &str, kind: Ceiling) -> Router {
    let keys = if kind == Ceiling::Bare { "" } else { "UNIQUE" };
    svc_test_support::postgres::connect(url)
        .await
        .batch_execute(&format!(
            "CREATE TABLE ceiling_rows (id BYTEA NOT NULL {keys}, signature BYTEA NOT NULL {keys},
                                        body BYTEA NOT NULL, received_at BIGINT NOT NULL)"
        ))
        .await
        .expect("ceiling table");
    let (queue, waiting) = tokio::sync::mpsc::unbounded_channel::<Waiting>();
    let waiting = Arc::new(tokio::sync::Mutex::new(waiting));
    let groups_at_once = if kind == Ceiling::UniqueKeysOneByOne {
        4
    } else {
        1
    };
    for _ in 0..groups_at_once {
        tokio::spawn(pg_ceiling_groups(
            svc_test_support::postgres::connect(url).await,
            Arc::clone(&waiting),
            kind,
        ));
    }
    let verifier = Arc::new(verifier());
    Router::new().route(
        "/webhooks",
        post(move |headers: HeaderMap, body: Bytes| {
            let (verifier, queue) = (Arc::clone(&verifier), queue.clone());
            async move {
                match verified(&verifier, &headers, body) {
                    Ok(record) => {
                        let (done, committed) = tokio::sync::oneshot::channel();
                        if queue.send((record, done)).is_err() {
                            return StatusCode::SERVICE_UNAVAILABLE;
                        }
                        match committed.await {
                            Ok(()) => StatusCode::OK,
                            Err(_) => StatusCode::SERVICE_UNAVAILABLE,
                        }
                    }
                    Err(status) => status,
                }
            }
        }),
    )
}

/// One connection's turn at the exactly-once ceiling's groups: takes every delivery waiting
/// (the first one waited for) and commits them as one group, until the queue closes.
#[cfg(feature = "postgres")]
async fn pg_ceiling_groups(
    mut client: tokio_postgres::Client,
    waiting: Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<Waiting>>>,
    kind: Ceiling,
) {
    let records = client
        .prepare(
            "INSERT INTO ceiling_rows
             SELECT * FROM unnest($1::BYTEA[], $2::BYTEA[], $3::BYTEA[], $4::BIGINT[])",
        )
        .await
        .expect("prepare");
    let effect = client
        .prepare("INSERT INTO effects (webhook_id, call_id) VALUES ($1, $2)")
        .await
        .expect("prepare");
    let mut group: Vec<Waiting> = Vec::new();
    loop {
        {
            let mut waiting = waiting.lock().await;
            let Some(first) = waiting.recv().await else {
                return;
            };
            group.push(first);
            while let Ok(next) = waiting.try_recv() {
                group.push(next);
            }
        }
        let ids: Vec<&[u8]> = group.iter().map(|(r, _)| &r.id[..]).collect();
        let signatures: Vec<&[u8]> = group.iter().map(|(r, _)| &r.signature[..]).collect();
        let bodies: Vec<&[u8]> = group.iter().map(|(r, _)| &r.body[..]).collect();
        let at: Vec<i64> = group.iter().map(|(r, _)| r.received_at).collect();
        let webhook_ids: Vec<String> = group
            .iter()
            .map(|(r, _)| String::from_utf8_lossy(&r.id).into_owned())
            .collect();
        let tx = client.transaction().await.expect("begin");
        let row_params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&ids, &signatures, &bodies, &at];
        let effect_params: Vec<[&(dyn tokio_postgres::types::ToSql + Sync); 2]> =
            webhook_ids.iter().map(|id| [id as _, id as _]).collect();
        if kind == Ceiling::UniqueKeysOneByOne {
            tx.execute(&records, &row_params)
                .await
                .expect("the records");
            for params in &effect_params {
                tx.execute(&effect, params).await.expect("an effect");
            }
        } else {
            let rows = tx.execute(&records, &row_params);
            let effects = futures_util::future::try_join_all(
                effect_params
                    .iter()
                    .map(|params| tx.execute(&effect, params)),
            );
            futures_util::future::try_join(rows, effects)
                .await
                .expect("the group's writes");
        }
        tx.commit().await.expect("commit");
        for (_, done) in group.drain(..) {
            let _ = done.send(());
        }
    }
}

/// The webhook ids of the rows of the `effects` table `tenant` sees.
#[cfg(feature = "postgres")]
async fn pg_effects(tenant: &tokio_postgres::Client) -> Vec<String> {
    tenant
        .query("SELECT webhook_id FROM effects", &[])
        .await
        .expect("read effects")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// The PostgreSQL rows' servers, and what their checks read.
#[cfg(feature = "postgres")]
struct Postgres {
    /// The servers, by row name, in the table's order.
    servers: Vec<(&'static str, SocketAddr)>,
    /// The plain inbox row's inbox (its backlog then goes to the inbox workers).
    inbox: svc_receiver::postgres::PgInbox,
    /// A connection to the plain inbox's schema, whose `effects` the exactly-once inbox workers
    /// fill.
    inbox_effects: tokio_postgres::Client,
    /// A sqlx pool on that schema, for the sqlx driver's inbox workers.
    #[cfg(feature = "sqlx-postgres")]
    inbox_pool: sqlx::PgPool,
    /// A deadpool pool on that schema, for the tokio-postgres inbox workers.
    inbox_tenant_pool: deadpool_postgres::Pool,
    /// The plain direct row's dedup store.
    store: svc_receiver::postgres::PgDedupStore,
    /// Per exactly-once row, a connection to its tenant's schema (where `effects` is).
    effects: Vec<(&'static str, tokio_postgres::Client)>,
}

/// A tenant for an exactly-once row: a fresh schema of the test server holding the `effects`
/// table, the URL whose `search_path` is it, the name of the crate's schema beside it, and a
/// connection to read the effects back.
#[cfg(feature = "postgres")]
async fn pg_tenant(label: &str) -> Option<(String, String, tokio_postgres::Client)> {
    let url = svc_test_support::postgres::fresh_schema_url(label).await?;
    let tenant_schema = url.rsplit("search_path%3D").next()?.to_owned();
    let client = effects_table(&url).await;
    Some((url, format!("{tenant_schema}_svc"), client))
}

/// Creates the tenant's `effects` table in the `search_path` schema of `url`; a connection
/// there.
#[cfg(feature = "postgres")]
async fn effects_table(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .batch_execute(
            "CREATE TABLE effects (n BIGSERIAL PRIMARY KEY, webhook_id TEXT NOT NULL,
                                   call_id TEXT NOT NULL)",
        )
        .await
        .expect("effects table");
    client
}

/// The tenant's own sqlx pool on `url`, of `connections` connections.
#[cfg(feature = "sqlx-postgres")]
async fn sqlx_pool(url: &str, connections: usize) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(u32::try_from(connections).unwrap_or(u32::MAX))
        .connect(url)
        .await
        .expect("sqlx pool")
}

/// The PostgreSQL servers on fresh schemas of the server `SVC_TEST_POSTGRES_URL` names: inbox
/// mode and direct mode, and exactly-once direct mode per driver (each in a tenant schema of
/// its own with the crate's tables in a schema beside it, as
/// `PgDatabase::connect_in_schema` sets up); `None` without it.
#[cfg(feature = "postgres")]
async fn postgres_targets() -> Option<Postgres> {
    use svc_receiver::dedup::{DEFAULT_CAPACITY, MemoryDedupStore};
    use svc_receiver::postgres::{DEFAULT_MAX_CONNECTIONS, PgDatabase, PgDedupStore, PgInbox};
    std::env::var(svc_test_support::postgres::URL_VAR).ok()?;
    let url = svc_test_support::postgres::fresh_schema_url("load_bench").await?;
    let inbox_effects = effects_table(&url).await;
    let connections = std::env::var("SVC_BENCH_PG_CONNECTIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_MAX_CONNECTIONS);
    println!("PostgreSQL: {connections} connections per store");
    let database = PgDatabase::connect_with(&url, connections)
        .await
        .expect("connect");
    let inbox = PgInbox::new(database, InboxPolicy::default());
    let database = PgDatabase::connect_with(&url, connections)
        .await
        .expect("connect");
    let store = PgDedupStore::new(database, DedupPolicy::default());
    let handler = |_: Received| async { Ok::<(), String>(()) };
    let inbox_server = serve(Router::new().route(
        "/webhooks",
        inbox_route(InboxReceiver::new(verifier(), inbox.clone())),
    ))
    .await;
    let direct_server = serve(Router::new().route(
        "/webhooks",
        webhook_route(WebhookReceiver::new(verifier(), store.clone(), handler)),
    ))
    .await;
    // The simplest PostgreSQL inbox, for what the batching earns: each accept one statement
    // (the same function per delivery) on a pooled connection of its own, committed alone.
    let unbatched_url =
        svc_test_support::postgres::fresh_schema_url("load_bench_unbatched").await?;
    let unbatched = PgDatabase::connect_with(&unbatched_url, connections)
        .await
        .expect("connect");
    let accept_sql = format!(
        "SELECT {}.svc_receiver_inbox_accept($1::TEXT, $2::BYTEA, $3::BYTEA, $4::BIGINT)",
        unbatched.schema()
    );
    let unbatched_server = serve(unbatched_inbox(
        tenant_pool(&unbatched_url, connections),
        accept_sql,
    ))
    .await;
    #[cfg(feature = "sqlx-postgres")]
    let inbox_pool = sqlx_pool(&url, connections).await;
    let inbox_tenant_pool = tenant_pool(&url, connections);
    let mut servers = vec![
        (PG_INBOX, inbox_server),
        (PG_INBOX_UNBATCHED, unbatched_server),
        (PG_DIRECT, direct_server),
    ];
    let mut effects = Vec::new();

    let (url, schema, tenant) = pg_tenant("load_bench_eo_pg").await?;
    let database = PgDatabase::connect_in_schema(&url, &schema, connections)
        .await
        .expect("connect");
    let handler = pg_handler(tenant_pool(&url, connections), database.recorder());
    let eo_store = PgDedupStore::new(database, DedupPolicy::default());
    let server = serve(Router::new().route(
        "/webhooks",
        webhook_route(WebhookReceiver::new(verifier(), eo_store, handler)),
    ))
    .await;
    servers.push((EO_PG, server));
    effects.push((EO_PG, tenant));

    let (url, schema, tenant) = pg_tenant("load_bench_eo_pg_memory").await?;
    let database = PgDatabase::connect_in_schema(&url, &schema, connections)
        .await
        .expect("connect");
    let handler = pg_handler(tenant_pool(&url, connections), database.recorder());
    let eo_store = MemoryDedupStore::new(DedupPolicy::default(), DEFAULT_CAPACITY);
    let server = serve(Router::new().route(
        "/webhooks",
        webhook_route(WebhookReceiver::new(verifier(), eo_store, handler)),
    ))
    .await;
    servers.push((EO_PG_MEMORY, server));
    effects.push((EO_PG_MEMORY, tenant));

    let (url, schema, tenant) = pg_tenant("load_bench_eo_tx_ceiling").await?;
    let database = PgDatabase::connect_in_schema(&url, &schema, connections)
        .await
        .expect("connect");
    let (pool, recorder) = (tenant_pool(&url, connections), database.recorder());
    let ceiling = transaction_ceiling_route(move |received: Received| {
        let (pool, recorder) = (pool.clone(), recorder.clone());
        async move { pg_write(&pool, &recorder, &received, false).await }
    });
    servers.push((EO_PG_TX_CEILING, serve(ceiling).await));
    effects.push((EO_PG_TX_CEILING, tenant));

    let (url, _, tenant) = pg_tenant("load_bench_eo_ceiling").await?;
    servers.push((
        EO_PG_CEILING,
        serve(pg_exactly_once_ceiling(&url, Ceiling::Bare).await).await,
    ));
    effects.push((EO_PG_CEILING, tenant));
    let (url, _, tenant) = pg_tenant("load_bench_eo_keyed_ceiling").await?;
    servers.push((
        EO_PG_KEYED_CEILING,
        serve(pg_exactly_once_ceiling(&url, Ceiling::UniqueKeys).await).await,
    ));
    effects.push((EO_PG_KEYED_CEILING, tenant));
    let (url, _, tenant) = pg_tenant("load_bench_eo_one_by_one_ceiling").await?;
    servers.push((
        EO_PG_ONE_BY_ONE_CEILING,
        serve(pg_exactly_once_ceiling(&url, Ceiling::UniqueKeysOneByOne).await).await,
    ));
    effects.push((EO_PG_ONE_BY_ONE_CEILING, tenant));

    #[cfg(feature = "sqlx-postgres")]
    {
        let (url, schema, tenant) = pg_tenant("load_bench_eo_sqlx").await?;
        let database = PgDatabase::connect_in_schema(&url, &schema, connections)
            .await
            .expect("connect");
        let pool = sqlx_pool(&url, connections).await;
        let handler = sqlx_handler(pool, database.recorder());
        let eo_store = PgDedupStore::new(database, DedupPolicy::default());
        let server = serve(Router::new().route(
            "/webhooks",
            webhook_route(WebhookReceiver::new(verifier(), eo_store, handler)),
        ))
        .await;
        servers.push((EO_SQLX, server));
        effects.push((EO_SQLX, tenant));
    }
    Some(Postgres {
        servers,
        inbox,
        inbox_effects,
        #[cfg(feature = "sqlx-postgres")]
        inbox_pool,
        inbox_tenant_pool,
        store,
        effects,
    })
}
