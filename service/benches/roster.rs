//! Roster benchmark: GET /v1/agents lookups and pages, and POST /v1/agents, against a
//! server on loopback holding 100 000 agents. Prints a table of requests/s and p50/p99.
//!
//! Run: `cargo bench -p svc-service --bench roster` (ROSTER_SIZE overrides the roster size).
//! Target: lookup by handle p99 under 2 ms.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::Rng;
use svc_service::config::Config;
use svc_service::credentials::ApiKey;
use svc_service::db::{AgencyRef, Db, NewAgent, NewTenant, UpsertAgency};

const AGENCIES: usize = 100;
const SAMPLES: usize = 5_000;

struct Row {
    name: &'static str,
    requests: usize,
    elapsed: Duration,
    latency: Histogram<u64>,
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    let roster_size: usize = std::env::var("ROSTER_SIZE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir()?;
    let db_path = dir.path().join("bench.db");
    let db = Db::open(&db_path).await?;
    let key = ApiKey::generate();
    let tenant_id = "ten_bench".to_owned();
    db.create_tenant(NewTenant {
        id: tenant_id.clone(),
        ..NewTenant::new("bench", key.hash())
    })
    .await?;

    let seeding = Instant::now();
    let mut agency_ids = Vec::new();
    for a in 0..AGENCIES {
        let (agency, _) = db
            .upsert_agency(UpsertAgency {
                tenant_id: tenant_id.clone(),
                platform_agency_id: format!("agency-{a}"),
                name: format!("Agency {a}"),
                now_ms: 0,
            })
            .await?;
        agency_ids.push(agency.id);
    }
    for i in 0..roster_size {
        db.register_agent(NewAgent {
            tenant_id: tenant_id.clone(),
            agency: AgencyRef::Id(agency_ids[i % AGENCIES].clone()),
            first_name: "Ann".into(),
            last_name: format!("Lee{i}"),
            email: Some(format!("rep{i}@Example.com")),
            npn: Some(format!("{:08}", 10_000_000 + i)),
            platform_agent_id: Some(format!("rep-{i}")),
            now_ms: i as i64,
        })
        .await?;
    }
    eprintln!(
        "seeded {roster_size} agents in {:.1}s",
        seeding.elapsed().as_secs_f64()
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}/v1", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(svc_service::run(Config::new(&db_path), listener, async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    let key = key.expose().to_owned();
    let pick = move || rand::thread_rng().gen_range(0..roster_size);

    let mut rows = Vec::new();
    // Warm up connections and caches.
    measure("warm-up", 500, |_| {
        get(
            &client,
            &key,
            format!("{base}/agents?platformAgentId=rep-{}", pick()),
        )
    })
    .await?;
    rows.push(
        measure("GET lookup by email", SAMPLES, |_| {
            get(
                &client,
                &key,
                format!("{base}/agents?email=REP{}%40example.com", pick()),
            )
        })
        .await?,
    );
    rows.push(
        measure("GET lookup by npn", SAMPLES, |_| {
            get(
                &client,
                &key,
                format!("{base}/agents?npn={}", 10_000_000 + pick()),
            )
        })
        .await?,
    );
    rows.push(
        measure("GET lookup by platformAgentId", SAMPLES, |_| {
            get(
                &client,
                &key,
                format!("{base}/agents?platformAgentId=rep-{}", pick()),
            )
        })
        .await?,
    );

    // Whole-roster pages of 100, walking the cursor chain.
    let cursor = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    rows.push(
        measure("GET roster page (limit=100)", 1_000, |_| {
            let cursor = cursor.clone();
            let client = client.clone();
            let key = key.clone();
            let base = base.clone();
            async move {
                let current = cursor.lock().map(|c| c.clone()).unwrap_or(None);
                let url = match current {
                    Some(c) => format!("{base}/agents?limit=100&cursor={c}"),
                    None => format!("{base}/agents?limit=100"),
                };
                let body = get_json(&client, &key, url).await?;
                let next = body["nextCursor"].as_str().map(str::to_owned);
                if let Ok(mut guard) = cursor.lock() {
                    *guard = next;
                }
                Ok(())
            }
        })
        .await?,
    );
    rows.push(
        measure("GET agency page (limit=100)", 1_000, |n| {
            get(
                &client,
                &key,
                format!(
                    "{base}/agents?limit=100&agencyId={}",
                    agency_ids[n % AGENCIES]
                ),
            )
        })
        .await?,
    );
    rows.push(measure("POST /agents (register)", SAMPLES, |n| {
        let body = serde_json::json!({
            "firstName": "New", "lastName": format!("Rep{n}"), "email": format!("new{n}@example.com"),
            "npn": format!("{}", 50_000_000 + n), "platformAgentId": format!("new-{n}"),
            "agencyId": agency_ids[n % AGENCIES],
        });
        let client = client.clone();
        let key = key.clone();
        let url = format!("{base}/agents");
        async move {
            let response = client.post(url).bearer_auth(key).json(&body).send().await?;
            anyhow::ensure!(response.status().as_u16() == 201, "status {}", response.status());
            Ok(())
        }
    }).await?);

    print_table(roster_size, &rows);
    let _ = stop.send(());
    server.await??;
    Ok(())
}

async fn get(client: &reqwest::Client, key: &str, url: String) -> anyhow::Result<()> {
    get_json(client, key, url).await.map(|_| ())
}

async fn get_json(
    client: &reqwest::Client,
    key: &str,
    url: String,
) -> anyhow::Result<serde_json::Value> {
    let response = client.get(url).bearer_auth(key).send().await?;
    anyhow::ensure!(
        response.status().is_success(),
        "status {}",
        response.status()
    );
    Ok(response.json().await?)
}

/// Sends `requests` sequential requests on one keep-alive connection.
async fn measure<F, Fut>(name: &'static str, requests: usize, mut one: F) -> anyhow::Result<Row>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut latency = Histogram::<u64>::new(3)?;
    let started = Instant::now();
    for n in 0..requests {
        let sent = Instant::now();
        one(n).await?;
        latency.record(sent.elapsed().as_micros() as u64)?;
    }
    Ok(Row {
        name,
        requests,
        elapsed: started.elapsed(),
        latency,
    })
}

fn print_table(roster_size: usize, rows: &[Row]) {
    println!("\nroster of {roster_size} agents, sequential requests over loopback keep-alive\n");
    println!(
        "| {:<30} | {:>8} | {:>10} | {:>9} | {:>9} |",
        "operation", "requests", "req/s", "p50 ms", "p99 ms"
    );
    println!(
        "|{:-<32}|{:->10}|{:->12}|{:->11}|{:->11}|",
        "", "", "", "", ""
    );
    for row in rows {
        println!(
            "| {:<30} | {:>8} | {:>10.0} | {:>9.3} | {:>9.3} |",
            row.name,
            row.requests,
            row.requests as f64 / row.elapsed.as_secs_f64(),
            row.latency.value_at_quantile(0.50) as f64 / 1000.0,
            row.latency.value_at_quantile(0.99) as f64 / 1000.0,
        );
    }
}
