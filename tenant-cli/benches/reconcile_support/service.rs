//! The compact service in this process on `127.0.0.1:0` over a temp database, its tenants
//! (an API key, two agencies, a few agents each), scored calls written straight into its
//! database (`Db::insert_scored_calls`), re-dispositions written the same way, and the
//! ceiling: how long the service alone takes to answer what a first reconcile asks.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt, stream};
use rusqlite::{Connection, params};
use serde::Deserialize;
use serde_json::{Value, json};
use svc_service::config::Config;
use svc_service::credentials::ApiKey;
use svc_service::db::{Db, NewTenant, ScoredCall};
use svc_test_support::service::Running;

use super::calls;

/// The service and its database.
pub(crate) struct Service {
    db: Db,
    db_path: PathBuf,
    /// Its address and an HTTP client, built once (the ceiling's requests use it).
    client: Lister,
    _dir: tempfile::TempDir,
    _server: Running,
}

/// A tenant of the service and the agents its calls are attributed to.
#[derive(Debug, Clone)]
pub(crate) struct Tenant {
    pub(crate) id: String,
    pub(crate) key: String,
    agents: Vec<calls::Agent>,
}

/// What the ceiling pass read, and how long it took.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ceiling {
    pub(crate) wall: Duration,
    pub(crate) list: Duration,
    pub(crate) pages: u64,
    pub(crate) listed: u64,
    pub(crate) detail_bytes: u64,
}

/// `(platformAgencyId, name)` of the agencies every tenant has.
const AGENCIES: [(&str, &str); 2] = [
    ("ag-tampa", "Gulf Coast Senior Benefits"),
    ("ag-austin", "Hill Country Insurance Group"),
];

/// `(first, last, platformAgentId, platformAgencyId)` of the agents every tenant has.
const AGENTS: [(&str, &str, &str, &str); 5] = [
    ("Maria", "Alvarez", "rep-101", "ag-tampa"),
    ("James", "Okafor", "rep-102", "ag-tampa"),
    ("Priya", "Raman", "rep-103", "ag-tampa"),
    ("Daniel", "Kowalski", "rep-201", "ag-austin"),
    ("Aisha", "Thompson", "rep-202", "ag-austin"),
];

/// Calls written per transaction while seeding.
const SEED_BATCH: usize = 5_000;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    data: Vec<PageRow>,
    next_cursor: Option<String>,
}

#[derive(Deserialize)]
struct PageRow {
    id: String,
}

impl Service {
    /// Starts the service on a fresh database; stops when dropped.
    pub(crate) async fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = Config::new(dir.path().join("service.db"));
        let db_path = config.db_path.clone();
        let db = Db::open(&db_path).await.expect("open the service database");
        let server = Running::start(config).await;
        Self {
            db,
            db_path,
            client: Lister {
                base_url: format!("http://{}/v1", server.addr),
                http: reqwest::Client::new(),
            },
            _dir: dir,
            _server: server,
        }
    }

    /// The base URL, ending in `/v1`.
    pub(crate) fn base_url(&self) -> String {
        self.client.base_url.clone()
    }

    /// Creates a tenant with its agencies and agents (through the API, as a tenant would).
    pub(crate) async fn add_tenant(&self, name: &str) -> Tenant {
        let key = ApiKey::generate();
        let tenant = NewTenant::new(name, key.hash());
        let id = tenant.id.clone();
        self.db.create_tenant(tenant).await.expect("create tenant");
        let key = key.expose().to_owned();
        for (platform_agency_id, name) in AGENCIES {
            let body = json!({ "platformAgencyId": platform_agency_id, "name": name });
            self.post(&key, "/agencies", body).await;
        }
        let mut agents = Vec::new();
        for (first, last, platform_agent_id, platform_agency_id) in AGENTS {
            let body = json!({
                "firstName": first,
                "lastName": last,
                "platformAgentId": platform_agent_id,
                "platformAgencyId": platform_agency_id,
            });
            let made = self.post(&key, "/agents", body).await;
            let text = |v: &Value| v.as_str().expect("agent field").to_owned();
            agents.push(calls::Agent {
                id: text(&made["agent"]["id"]),
                agency_id: text(&made["agent"]["agencyId"]),
                platform_agent_id: platform_agent_id.to_owned(),
                platform_agency_id: platform_agency_id.to_owned(),
            });
        }
        Tenant { id, key, agents }
    }

    async fn post(&self, key: &str, path: &str, body: Value) -> Value {
        let response = self
            .client
            .http
            .post(format!("{}{path}", self.client.base_url))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .expect("send");
        assert!(response.status().is_success(), "POST {path}: {response:?}");
        response.json().await.expect("json")
    }

    /// Writes `count` scored calls of `tenant` (see [`calls::scored`]) straight into the
    /// service's database.
    pub(crate) async fn seed(&self, tenant: &Tenant, count: usize, now_ms: i64) {
        let mut start = 0;
        while start < count {
            let end = (start + SEED_BATCH).min(count);
            let batch: Vec<ScoredCall> = (start..end)
                .map(|i| calls::scored(&tenant.id, &tenant.agents, i, count, now_ms))
                .collect();
            self.db
                .insert_scored_calls(batch)
                .await
                .expect("insert scored calls");
            start = end;
        }
    }

    /// Re-dispositions every `every`-th real call of `tenant` (in insertion order) the way
    /// the service would: a new score, `scored_at` and `updated_at`, with no webhook.
    /// Returns how many calls changed.
    pub(crate) async fn redisposition(&self, tenant: &Tenant, every: usize, now_ms: i64) -> u64 {
        let (path, tenant_id) = (self.db_path.clone(), tenant.id.clone());
        tokio::task::spawn_blocking(move || {
            let mut conn = Connection::open(&path)?;
            conn.busy_timeout(Duration::from_secs(30))?;
            let tx = conn.transaction()?;
            let chosen: Vec<(String, String)> = tx
                .prepare(
                    "SELECT id, score FROM calls
                     WHERE tenant_id = ?1 AND source = 'real_call' AND state = 'scored'
                     ORDER BY seq",
                )?
                .query_map([&tenant_id], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .skip(every - 1)
                .step_by(every)
                .collect();
            {
                let mut update = tx.prepare(
                    "UPDATE calls SET score = ?2, scored_at = ?3, updated_at = ?3 WHERE id = ?1",
                )?;
                for (n, (id, score)) in chosen.iter().enumerate() {
                    let at = now_ms - 60_000 + n as i64;
                    update.execute(params![id, calls::redispositioned(score), at])?;
                }
            }
            tx.commit()?;
            Ok::<_, rusqlite::Error>(chosen.len() as u64)
        })
        .await
        .expect("re-disposition task")
        .expect("re-disposition")
    }

    /// Lists every page of both sources over `[from, to]` (`limit=100`) while reading every
    /// listed call's detail, `in_flight` at a time, as the ids arrive: the requests of a first
    /// reconcile, overlapped as its engine overlaps them, with no store behind them.
    pub(crate) async fn ceiling(
        &self,
        tenant: &Tenant,
        from: &str,
        to: &str,
        in_flight: usize,
    ) -> Ceiling {
        let started = Instant::now();
        // The pages are listed on their own task, ahead of the details, as reconcile lists
        // them: the ids flow into the detail reads as each page arrives.
        let (ids_tx, ids_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let lister = {
            let (service, key) = (self.client.clone(), tenant.key.clone());
            let (from, to) = (from.to_owned(), to.to_owned());
            tokio::spawn(async move {
                let mut pages = 0;
                for source in ["roleplay", "real_call"] {
                    let mut cursor: Option<String> = None;
                    loop {
                        let mut query = vec![
                            ("source", source.to_owned()),
                            ("from", from.clone()),
                            ("to", to.clone()),
                            ("limit", "100".to_owned()),
                        ];
                        query.extend(cursor.take().map(|c| ("cursor", c)));
                        let page: Page = service
                            .get(&key, "/calls", &query)
                            .await
                            .json()
                            .await
                            .expect("a calls page");
                        pages += 1;
                        for row in page.data {
                            let _ = ids_tx.send(row.id);
                        }
                        match page.next_cursor {
                            Some(next) => cursor = Some(next),
                            None => break,
                        }
                    }
                }
                (pages, started.elapsed())
            })
        };
        let mut ids_rx = ids_rx;
        let ids = stream::poll_fn(move |cx| ids_rx.poll_recv(cx));
        let (listed, detail_bytes) = ids
            .map(|id| async move {
                let path = format!("/calls/{id}");
                let body = self.get(&tenant.key, &path, &[]).await.bytes().await?;
                Ok::<_, reqwest::Error>(body.len() as u64)
            })
            .buffer_unordered(in_flight)
            .try_fold(
                (0, 0),
                |(n, sum), bytes| async move { Ok((n + 1, sum + bytes)) },
            )
            .await
            .expect("a call detail");
        let (pages, list) = lister.await.expect("the lister");
        Ceiling {
            wall: started.elapsed(),
            list,
            pages,
            listed,
            detail_bytes,
        }
    }

    async fn get(&self, key: &str, path: &str, query: &[(&str, String)]) -> reqwest::Response {
        self.client.get(key, path, query).await
    }
}

/// The service's base URL and an HTTP client, cloned into the ceiling's lister task.
#[derive(Clone)]
struct Lister {
    base_url: String,
    http: reqwest::Client,
}

impl Lister {
    async fn get(&self, key: &str, path: &str, query: &[(&str, String)]) -> reqwest::Response {
        let response = self
            .http
            .get(format!("{}{path}", self.base_url))
            .bearer_auth(key)
            .query(query)
            .send()
            .await
            .expect("send");
        assert!(response.status().is_success(), "GET {path}: {response:?}");
        response
    }
}
