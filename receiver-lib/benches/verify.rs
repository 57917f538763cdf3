//! Cost of verifying a delivery against a bare HMAC-SHA256 over the same bytes.
//!
//! Criterion measures `verify` (parse the header, check the timestamp, HMAC, constant-time
//! compare) and a bare HMAC-SHA256 of `<t>.<body>` (keyed from the secret, as a naive receiver
//! does) for a realistic ~450-byte `call.scored` body and for 100 B, 1 KiB and 16 KiB bodies.
//! Then, in the same run, an interleaved measurement prints the verify / bare-HMAC ratio per
//! size (target: at most 1.15 on the ~450-byte body).
//!
//! Run: `cargo bench -p svc-receiver --bench verify`.

use std::hint::black_box;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use svc_receiver::{Keyring, SigningSecret, Verifier, sign};

const SECRET: &str = "whsec_3kX9pQ2vR7mT1wY8zB4nL6cF0hJ5sD";
const T: i64 = 1_767_225_600;

/// A failure event with a reason message: about 450 bytes, like a real delivery.
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
    mac.update(T.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// The same HMAC from a state keyed once in advance (what the verifier does internally): the
/// strictest floor.
fn prekeyed_hmac(keyed: &Hmac<Sha256>, body: &[u8]) -> [u8; 32] {
    let mut mac = keyed.clone();
    mac.update(T.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

fn verifier() -> Verifier {
    Verifier::new(Keyring::single(SigningSecret::new(SECRET).expect("secret")))
        .with_max_body_bytes(1 << 20)
}

fn criterion_benches(c: &mut Criterion) {
    let verifier = verifier();
    let mut group = c.benchmark_group("verify_vs_bare_hmac");
    for (name, body) in bodies() {
        let header = sign(SECRET, T, &body);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::new("verify", &name), &body, |b, body| {
            b.iter(|| {
                verifier
                    .verify(black_box(header.as_bytes()), black_box(body), T)
                    .is_ok()
            })
        });
        group.bench_with_input(BenchmarkId::new("bare_hmac", &name), &body, |b, body| {
            b.iter(|| bare_hmac(black_box(body)))
        });
    }
    group.finish();
}

/// Median nanoseconds per call of `f` over `rounds` batches of `batch` calls.
fn per_call_ns(rounds: &mut Vec<f64>, batch: u32, mut f: impl FnMut()) {
    let start = Instant::now();
    for _ in 0..batch {
        f();
    }
    rounds.push(start.elapsed().as_nanos() as f64 / f64::from(batch));
}

/// The fastest batch: the one least disturbed by other work on the machine.
fn fastest(values: &mut [f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn print_ratios() {
    let verifier = verifier();
    let keyed = <Hmac<Sha256> as Mac>::new_from_slice(SECRET.as_bytes()).expect("any key length");
    println!(
        "\n{:<16} {:>11} {:>14} {:>7} {:>16} {:>7}",
        "body", "verify (ns)", "bare HMAC (ns)", "ratio", "pre-keyed (ns)", "ratio"
    );
    for (name, body) in bodies() {
        let header = sign(SECRET, T, &body);
        let batch = if body.len() > 4096 { 50 } else { 500 };
        let (mut verify_ns, mut hmac_ns, mut prekeyed_ns) = (Vec::new(), Vec::new(), Vec::new());
        // Interleave so both see the same machine conditions.
        for _ in 0..300 {
            per_call_ns(&mut verify_ns, batch, || {
                black_box(
                    verifier
                        .verify(black_box(header.as_bytes()), black_box(&body), T)
                        .is_ok(),
                );
            });
            per_call_ns(&mut hmac_ns, batch, || {
                black_box(bare_hmac(black_box(&body)));
            });
            per_call_ns(&mut prekeyed_ns, batch, || {
                black_box(prekeyed_hmac(&keyed, black_box(&body)));
            });
        }
        let (v, h) = (fastest(&mut verify_ns), fastest(&mut hmac_ns));
        let p = fastest(&mut prekeyed_ns);
        println!(
            "{name:<16} {v:>11.0} {h:>14.0} {:>7.3} {p:>16.0} {:>7.3}",
            v / h,
            v / p
        );
    }
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    criterion_benches(&mut criterion);
    criterion.final_summary();
    print_ratios();
}
