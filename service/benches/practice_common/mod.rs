//! Shared setup of the practice benchmarks: a server on loopback over a temp database, one
//! tenant with an agency and a rep, and latency tables.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use hdrhistogram::Histogram;
use svc_service::config::Config;
use svc_service::credentials::ApiKey;
use svc_service::db::{Db, NewTenant};

pub(crate) struct Bench {
    pub(crate) addr: SocketAddr,
    pub(crate) db: Db,
    pub(crate) tenant_id: String,
    pub(crate) key: String,
    pub(crate) client: reqwest::Client,
    _dir: tempfile::TempDir,
}

pub(crate) async fn start(adjust: impl FnOnce(&mut Config)) -> Bench {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.db");
    let db = Db::open(&path).await.expect("open");
    let key = ApiKey::generate();
    let tenant = NewTenant::new("bench", key.hash());
    let tenant_id = tenant.id.clone();
    db.create_tenant(tenant).await.expect("tenant");
    let mut config = Config::new(&path);
    adjust(&mut config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(svc_service::run(config, listener, std::future::pending()));
    let client = reqwest::Client::new();
    let bench = Bench {
        addr,
        db,
        tenant_id,
        key: key.expose().to_owned(),
        client,
        _dir: dir,
    };
    bench
        .post(
            "/v1/agencies",
            serde_json::json!({ "platformAgencyId": "ag-1", "name": "Agency" }),
        )
        .await;
    bench
        .post(
            "/v1/agents",
            serde_json::json!({ "firstName": "A", "lastName": "B", "platformAgentId": "rep-1", "platformAgencyId": "ag-1" }),
        )
        .await;
    bench
}

impl Bench {
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub(crate) async fn post(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        let response = self
            .client
            .post(self.url(path))
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
            .expect("send");
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        response.json().await.expect("json")
    }

    pub(crate) async fn get(&self, path: &str) -> serde_json::Value {
        let response = self
            .client
            .get(self.url(path))
            .bearer_auth(&self.key)
            .send()
            .await
            .expect("send");
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        response.json().await.expect("json")
    }
}

pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram")
}

pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

pub(crate) fn row(name: &str, count: u64, per_sec: Option<f64>, h: &Histogram<u64>) {
    let rate = per_sec.map_or_else(|| "-".to_string(), |r| format!("{r:.0}"));
    println!(
        "| {name:<34} | {count:>8} | {rate:>9} | {:>9.3} | {:>9.3} | {:>9.3} |",
        h.value_at_quantile(0.5) as f64 / 1000.0,
        h.value_at_quantile(0.99) as f64 / 1000.0,
        h.max() as f64 / 1000.0
    );
}

pub(crate) fn header() {
    println!(
        "| {:<34} | {:>8} | {:>9} | {:>9} | {:>9} | {:>9} |",
        "case", "count", "per sec", "p50 ms", "p99 ms", "max ms"
    );
    println!(
        "|{:-<36}|{:->10}|{:->11}|{:->11}|{:->11}|{:->11}|",
        "", "", "", "", "", ""
    );
}
