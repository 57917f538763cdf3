//! Benchmark: GET /v1/calls first-page and deep-page latency with 1 000 000 stored calls
//! (bulk-inserted through Db, not the API).

mod practice_common;

use std::time::Instant;

use practice_common::*;
use svc_service::db::ScoredCall;

const CALLS: usize = 1_000_000;
const BATCH: usize = 50_000;
const FIRST_PAGE_RUNS: usize = 2_000;
const DEEP_PAGES: usize = 3_000;

fn histogram_of_walk(walked: f64) -> hdrhistogram::Histogram<u64> {
    let mut h = histogram();
    let _ = h.record((walked * 1_000_000.0 / DEEP_PAGES as f64) as u64);
    h
}

#[tokio::main]
async fn main() {
    let bench = start(|_| {}).await;
    let agent = bench.get("/v1/agents?platformAgentId=rep-1").await["data"][0].clone();
    let agent_id = agent["id"].as_str().expect("agent").to_owned();
    let agency_id = agent["agencyId"].as_str().expect("agency").to_owned();
    let loading = Instant::now();
    let base = 1_767_225_600_000_i64;
    for batch in 0..CALLS / BATCH {
        let calls = (0..BATCH)
            .map(|i| {
                let n = (batch * BATCH + i) as i64;
                ScoredCall {
                    id: svc_service::ids::call_id(),
                    tenant_id: bench.tenant_id.clone(),
                    source: "roleplay".into(),
                    agent_id: agent_id.clone(),
                    agency_id: agency_id.clone(),
                    platform_agent_id: Some("rep-1".into()),
                    platform_agency_id: Some("ag-1".into()),
                    drill_key: Some("ma-full-sale".into()),
                    started_at: base + n * 1_000,
                    duration_sec: 60 + n % 600,
                    transcript: r#"[{"role":"agent","content":"hello"}]"#.into(),
                    score:
                        r#"{"overallScore":50,"summary":"s","feedback":"f","compliancePercent":40}"#
                            .into(),
                }
            })
            .collect();
        bench.db.insert_scored_calls(calls).await.expect("insert");
    }
    eprintln!(
        "inserted {CALLS} calls in {:.1}s",
        loading.elapsed().as_secs_f64()
    );

    let first = "/v1/calls?from=2026-01-01T00:00:00Z&source=roleplay";
    let mut first_h = histogram();
    for _ in 0..FIRST_PAGE_RUNS {
        let t = Instant::now();
        bench.get(first).await;
        let _ = first_h.record(micros(t.elapsed()));
    }
    let filtered = format!("{first}&agentId={agent_id}&limit=100");
    let mut filtered_h = histogram();
    for _ in 0..FIRST_PAGE_RUNS {
        let t = Instant::now();
        bench.get(&filtered).await;
        let _ = filtered_h.record(micros(t.elapsed()));
    }
    // Walk 300 000 rows deep with pages of 100, then measure default-size pages from there.
    let mut cursor: Option<String> = None;
    let started = Instant::now();
    for _ in 0..DEEP_PAGES {
        let path = match &cursor {
            Some(c) => format!("{first}&limit=100&cursor={c}"),
            None => format!("{first}&limit=100"),
        };
        cursor = bench.get(&path).await["nextCursor"]
            .as_str()
            .map(str::to_owned);
    }
    let walked = started.elapsed().as_secs_f64();
    let mut deep_h = histogram();
    for _ in 0..DEEP_PAGES {
        let path = format!("{first}&cursor={}", cursor.as_deref().expect("more pages"));
        let t = Instant::now();
        let body = bench.get(&path).await;
        let _ = deep_h.record(micros(t.elapsed()));
        cursor = body["nextCursor"].as_str().map(str::to_owned);
    }
    header();
    row("first page (limit 50)", first_h.len(), None, &first_h);
    row(
        "first page, agentId, limit 100",
        filtered_h.len(),
        None,
        &filtered_h,
    );
    row(
        "walk to 300k (limit 100), per page",
        DEEP_PAGES as u64,
        Some(DEEP_PAGES as f64 / walked),
        &histogram_of_walk(walked),
    );
    row(
        "deep pages 300k-450k (limit 50)",
        deep_h.len(),
        None,
        &deep_h,
    );
}
