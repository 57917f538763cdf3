//! Cost of verifying a delivery against the HMAC-SHA256 it cannot avoid.
//!
//! Three cases per body (a realistic 453-byte `call.scored` body, and 100 B, 1 KiB, 16 KiB):
//! - `verify`: [`Verifier::verify`] (parse the header, check the timestamp, HMAC, constant-time
//!   compare);
//! - `prekeyed_hmac`: HMAC-SHA256 of `<t>.<body>` from a state keyed once in advance, with the
//!   timestamp text ready: the floor, what verifying costs at the very least;
//! - `bare_hmac`: the same HMAC keyed from the secret on every call, as a naive receiver does.
//!
//! Criterion measures each case, then an interleaved run prints both ratios side by side per
//! body: verify / pre-keyed (target: verify at most 25 ns over the pre-keyed HMAC at 453 B and at
//! 100 B) and verify / bare.
//!
//! Run: `cargo bench -p svc-contract --bench verify` (or `-- ratios` for the table alone).
//!
//! Timings move with whatever else the machine runs; instruction counts do not. With
//! `SVC_VERIFY_ONLY=<case>/<body>` (e.g. `verify/100B`) and `SVC_VERIFY_ITERS=<n>` the binary
//! runs that one case `n` times and exits, for `valgrind --tool=callgrind`:
//! `contract-lib/benches/verify-instructions.sh` counts each case and prints the same ratios.
//! Under valgrind SHA-256 runs its portable code (valgrind does not emulate the SHA
//! extensions), so the HMAC floor is several times the instructions it takes natively and the
//! ratios there are lower than the native ones for the same code.

use std::hint::black_box;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use svc_contract::{Keyring, SigningSecret, Verifier, sign};

const SECRET: &str = "whsec_3kX9pQ2vR7mT1wY8zB4nL6cF0hJ5sD";
const T: i64 = 1_767_225_600;
/// `T` as the header carries it (what the HMAC covers).
const T_TEXT: &[u8] = b"1767225600";

/// A failure event with a reason message: 453 bytes, like a real delivery.
fn realistic_body() -> Vec<u8> {
    br#"{"event":"call.scored","success":false,"callId":"svc_call_01JGZ7C3D5E7F9G1H3J5K7M9NQ","source":"real_call","agentId":"svc_agent_01JGZ4A7H2C9D3E6F8G0J1K5MN","agencyId":"svc_agency_01JGZ49X0P3Q6R8S2T4U7V9WAB","platformAgentId":"rep-1042","platformAgencyId":"northwind-17","occurredAt":"2026-01-01T00:05:00Z","requestId":"req_01JGZ7C4M1N2P3Q4R5S6T7U8VW","reason":"SCORING_INCOMPLETE","reasonMessage":"The rep never spoke, so the call could not be scored."}"#.to_vec()
}

fn padded(len: usize) -> Vec<u8> {
    let mut body = realistic_body();
    body.resize(len, b' ');
    body
}

fn bodies() -> Vec<(String, Vec<u8>)> {
    let real = realistic_body();
    vec![
        (format!("realistic_{}B", real.len()), real),
        ("100B".to_owned(), padded(100)),
        ("1KiB".to_owned(), padded(1024)),
        ("16KiB".to_owned(), padded(16 * 1024)),
    ]
}

fn bare_hmac(body: &[u8]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(SECRET.as_bytes()).expect("any key length");
    mac.update(T_TEXT);
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// The same HMAC from a state keyed once in advance: the floor.
fn prekeyed_hmac(keyed: &Hmac<Sha256>, body: &[u8]) -> [u8; 32] {
    let mut mac = keyed.clone();
    mac.update(T_TEXT);
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// One body's three cases, ready to run.
struct Cases {
    verifier: Verifier,
    keyed: Hmac<Sha256>,
    header: String,
    body: Vec<u8>,
}

impl Cases {
    fn new(body: Vec<u8>) -> Self {
        Self {
            verifier: Verifier::new(Keyring::single(SigningSecret::new(SECRET).expect("secret")))
                .with_max_body_bytes(1 << 20),
            keyed: <Hmac<Sha256> as Mac>::new_from_slice(SECRET.as_bytes())
                .expect("any key length"),
            header: sign(SECRET, T, &body),
            body,
        }
    }

    fn verify(&self) -> bool {
        self.verifier
            .verify(black_box(self.header.as_bytes()), black_box(&self.body), T)
            .is_ok()
    }

    fn prekeyed(&self) -> [u8; 32] {
        prekeyed_hmac(&self.keyed, black_box(&self.body))
    }

    fn bare(&self) -> [u8; 32] {
        bare_hmac(black_box(&self.body))
    }
}

fn criterion_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("verify_vs_hmac");
    for (name, body) in bodies() {
        let cases = Cases::new(body);
        group.throughput(Throughput::Bytes(cases.body.len() as u64));
        group.bench_function(BenchmarkId::new("verify", &name), |b| {
            b.iter(|| cases.verify())
        });
        group.bench_function(BenchmarkId::new("prekeyed_hmac", &name), |b| {
            b.iter(|| cases.prekeyed())
        });
        group.bench_function(BenchmarkId::new("bare_hmac", &name), |b| {
            b.iter(|| cases.bare())
        });
    }
    group.finish();
}

/// Nanoseconds per call of `f` over one batch of `batch` calls, appended to `rounds`.
fn per_call_ns(rounds: &mut Vec<f64>, batch: u32, mut f: impl FnMut()) {
    let start = Instant::now();
    for _ in 0..batch {
        f();
    }
    rounds.push(start.elapsed().as_nanos() as f64 / f64::from(batch));
}

/// The fastest batch: the one least disturbed by other work on the machine.
fn fastest(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn print_ratios() {
    println!(
        "\n{:<16} {:>11} {:>16} {:>14} {:>16} {:>14}",
        "body", "verify (ns)", "pre-keyed (ns)", "verify/pre-k.", "bare HMAC (ns)", "verify/bare"
    );
    for (name, body) in bodies() {
        let cases = Cases::new(body);
        let batch = if cases.body.len() > 4096 { 50 } else { 500 };
        let (mut verify_ns, mut prekeyed_ns, mut bare_ns) = (Vec::new(), Vec::new(), Vec::new());
        // Interleaved, so that all three see the same machine conditions.
        for _ in 0..300 {
            per_call_ns(&mut verify_ns, batch, || {
                black_box(cases.verify());
            });
            per_call_ns(&mut prekeyed_ns, batch, || {
                black_box(cases.prekeyed());
            });
            per_call_ns(&mut bare_ns, batch, || {
                black_box(cases.bare());
            });
        }
        let (v, p, b) = (
            fastest(&verify_ns),
            fastest(&prekeyed_ns),
            fastest(&bare_ns),
        );
        println!(
            "{name:<16} {v:>11.0} {p:>16.0} {:>14.3} {b:>16.0} {:>14.3}",
            v / p,
            v / b
        );
    }
}

/// `SVC_VERIFY_ONLY=<case>/<body>` with `SVC_VERIFY_ITERS=<n>`: runs that case `n` times (for an
/// instruction count) and says so; false when the variable is not set.
fn run_one_case() -> bool {
    let Ok(spec) = std::env::var("SVC_VERIFY_ONLY") else {
        return false;
    };
    let iterations: u32 = std::env::var("SVC_VERIFY_ITERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let (case, wanted) = spec
        .split_once('/')
        .expect("SVC_VERIFY_ONLY is <case>/<body>");
    let (_, body) = bodies()
        .into_iter()
        .find(|(name, _)| name == wanted)
        .expect("a body name of the table");
    let cases = Cases::new(body);
    for _ in 0..iterations {
        match case {
            "verify" => {
                black_box(cases.verify());
            }
            "prekeyed" => {
                black_box(cases.prekeyed());
            }
            "bare" => {
                black_box(cases.bare());
            }
            other => panic!("unknown case {other}: verify, prekeyed or bare"),
        }
    }
    true
}

fn main() {
    if run_one_case() {
        return;
    }
    let mut criterion = Criterion::default().configure_from_args();
    criterion_benches(&mut criterion);
    criterion.final_summary();
    print_ratios();
}
