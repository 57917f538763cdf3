//! Benchmark: session-token mints per second (POST /v1/session over loopback, 8 clients).

mod practice_common;

use std::sync::Arc;
use std::time::Instant;

use practice_common::*;

const MINTS: usize = 4_000;
const CLIENTS: usize = 8;

#[tokio::main]
async fn main() {
    let bench = Arc::new(start(|_| {}).await);
    for _ in 0..100 {
        bench
            .post(
                "/v1/session",
                serde_json::json!({ "platformAgentId": "rep-1" }),
            )
            .await;
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let bench = bench.clone();
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
            for _ in 0..MINTS / CLIENTS {
                let t = Instant::now();
                bench
                    .post(
                        "/v1/session",
                        serde_json::json!({ "platformAgentId": "rep-1" }),
                    )
                    .await;
                let _ = h.record(micros(t.elapsed()));
            }
            h
        }));
    }
    let mut all = histogram();
    for task in tasks {
        all.add(task.await.expect("client")).expect("merge");
    }
    let elapsed = started.elapsed().as_secs_f64();
    header();
    row(
        "POST /session (8 clients)",
        all.len(),
        Some(MINTS as f64 / elapsed),
        &all,
    );
}
