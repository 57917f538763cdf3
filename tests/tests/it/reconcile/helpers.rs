//! Helpers of the reconcile tests: a store beside a running service (with the webhook side
//! from [`super::webhooks`]), practice and seeded calls, re-dispositions written into the
//! service's database, and reads of both SQLite files and of the API.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use rusqlite::Connection;
use serde_json::{Value, json};
use svc_cli::reconcile::Reconciled;
use svc_client::{AgencyRef, Agent, Client, MintFor, RedeemRequest, RegisterAgent, UpsertAgency};
use svc_reconcile::Options;
use svc_service::db::ScoredCall;
use svc_store::Store;
use svc_store::export::ExportFormat;

use crate::Service;
use crate::practice::SCRIPT;

use super::webhooks::{Proxy, receiver};

/// How long anything polled for may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `probe` until it answers `Some`, failing the test after [`DEADLINE`].
pub(super) async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `query` on its own connection to the SQLite file at `path`, off the runtime (the
/// service and the store write to their files from the same runtime).
pub(super) async fn sql<T, F>(path: &Path, query: F) -> T
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
{
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let conn = Connection::open(&path).expect("open the database");
        conn.busy_timeout(DEADLINE).expect("busy timeout");
        query(&conn).expect("query")
    })
    .await
    .expect("query task")
}

/// A running service with its tenant's client and a fresh local store.
pub(super) struct Harness {
    pub(super) service: Service,
    pub(super) client: Client,
    pub(super) store: Store,
    pub(super) store_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Harness {
    /// The service (plain-HTTP webhooks, a one-second retry delay) and an empty store.
    pub(super) async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// [`Harness::start`] with `adjust` applied to the service's settings too (its clock, say).
    pub(super) async fn start_with(adjust: impl FnOnce(&mut svc_service::Config)) -> Self {
        let service = Service::start_with(|config| {
            config.allow_http_webhooks = true;
            config.webhook_retry_delay_secs = 1;
            adjust(config);
        })
        .await;
        let client = service.client();
        let dir = tempfile::tempdir().expect("temp dir");
        let store_path = dir.path().join("store.db");
        let store = Store::open_or_create(&store_path).expect("create the store");
        Self {
            service,
            client,
            store,
            store_path,
            _dir: dir,
        }
    }

    /// Starts the embedded receiver on the store with the tenant's secret, behind a proxy
    /// that becomes the tenant's webhook URL.
    pub(super) async fn webhooks(&self) -> Proxy {
        let receiver = receiver(&self.store, &self.service.signing_secret().await).await;
        let proxy = Proxy::start(receiver).await;
        self.service.set_webhook_url(&proxy.url).await;
        proxy
    }

    /// One reconcile run of the store.
    pub(super) async fn reconcile(&self, options: &Options) -> Reconciled {
        let reconciler = svc_reconcile::Reconciler::new(
            self.client.clone(),
            std::sync::Arc::new(self.store.clone()),
            options.clone(),
        );
        let guard = reconciler
            .lock(std::time::Duration::from_secs(30))
            .await
            .expect("the run lock");
        let bar = ProgressBar::hidden();
        svc_cli::reconcile::run(&reconciler, Some(&guard), &bar).await
    }
}

/// Reconcile's defaults, with no grace for webhooks still on their way: a call with no
/// delivery in the ledger was lost.
pub(super) fn options() -> Options {
    Options {
        delivery_grace: Duration::ZERO,
        ..Options::default()
    }
}

/// Registers agency `agency-1` and rep `rep-1`; returns the agent.
pub(crate) async fn register_rep(client: &Client) -> Agent {
    client
        .upsert_agency(&UpsertAgency {
            platform_agency_id: "agency-1".into(),
            name: "First Agency".into(),
        })
        .await
        .expect("agency");
    client
        .register_agent(&RegisterAgent {
            first_name: Some("Sam".into()),
            last_name: Some("Rivera".into()),
            email: Some("sam@example.com".into()),
            npn: None,
            platform_agent_id: Some("rep-1".into()),
            agency: AgencyRef::Platform("agency-1".into()),
        })
        .await
        .expect("agent")
        .agent
}

/// Makes one practice call of `rep-1` through the live transport and waits until it is
/// scored; returns its id.
pub(super) async fn practice_call(harness: &Harness) -> String {
    let client = &harness.client;
    let token = client
        .mint_session(&MintFor::PlatformAgentId("rep-1".into()))
        .await
        .expect("mint");
    let live = client
        .redeem(
            &token.token,
            &RedeemRequest {
                drill_key: "ma-full-sale".into(),
                difficulty: None,
                filters: None,
            },
        )
        .await
        .expect("redeem");
    let script: Vec<String> = SCRIPT.iter().map(|line| (*line).to_owned()).collect();
    svc_client::live::run_call(&live, &script, Duration::from_secs(10))
        .await
        .expect("practice call");
    let call_id = live.call_id.into_string();
    let db = &harness.service.db;
    let state = eventually(&format!("call {call_id} to be scored"), || async {
        let state = db.call_state(&call_id).await.expect("call state");
        state.filter(|s| s == "scored" || s == "not_scored")
    })
    .await;
    assert_eq!(state, "scored", "call {call_id}");
    call_id
}

/// Waits until the service's delivery of `call_id` is `state` after `attempts` attempts.
pub(super) async fn wait_delivery(service: &Service, call_id: &str, state: &str, attempts: usize) {
    let what = format!("the delivery of {call_id} to be {state} after {attempts} attempt(s)");
    eventually(&what, || async {
        let rows = service
            .db
            .list_deliveries(Some(service.tenant_id.clone()), 100)
            .await
            .expect("deliveries");
        rows.iter()
            .any(|d| d.call_id == call_id && d.state == state && d.attempts.len() == attempts)
            .then_some(())
    })
    .await;
}

/// A row of the store's ledger of deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LedgerRow {
    pub(super) webhook_id: String,
    pub(super) call_id: String,
    pub(super) success: bool,
    pub(super) body: String,
}

/// The store's ledger, by webhook id.
pub(super) async fn ledger(store: &Path) -> Vec<LedgerRow> {
    sql(store, |conn| {
        conn.prepare(
            "SELECT webhook_id, call_id, success, body FROM deliveries ORDER BY webhook_id",
        )?
        .query_map([], |r| {
            Ok(LedgerRow {
                webhook_id: r.get(0)?,
                call_id: r.get(1)?,
                success: r.get(2)?,
                body: r.get(3)?,
            })
        })?
        .collect()
    })
    .await
}

/// Waits until the ledger holds a successful delivery of each of `call_ids`.
pub(super) async fn wait_recorded(store: &Path, call_ids: &[String]) {
    let what = format!("the deliveries of {call_ids:?} in the ledger");
    eventually(&what, || async {
        let rows = ledger(store).await;
        call_ids
            .iter()
            .all(|id| rows.iter().any(|r| r.success && &r.call_id == id))
            .then_some(())
    })
    .await;
}

/// How many rows of the receiver's durable inbox (in the store's file) hold `webhook_id`:
/// an inbox row is committed before the `200`, so a delivery answered without one can never
/// reach the ledger.
pub(super) async fn inbox_rows(store: &Path, webhook_id: &str) -> i64 {
    let webhook_id = webhook_id.to_owned();
    sql(store, move |conn| {
        conn.query_row(
            "SELECT COUNT(*) FROM webhook_inbox WHERE id = ?1",
            [webhook_id],
            |r| r.get(0),
        )
    })
    .await
}

/// Each stored call's id and how it reached the store, by id.
pub(super) async fn stored_calls(store: &Path) -> Vec<(String, String)> {
    sql(store, |conn| {
        conn.prepare("SELECT id, delivery FROM calls ORDER BY id")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect()
    })
    .await
}

/// The score change log of `call_id`, oldest first: (before, after).
pub(super) async fn score_changes(store: &Path, call_id: &str) -> Vec<(Value, Value)> {
    let call_id = call_id.to_owned();
    let rows: Vec<(String, String)> = sql(store, move |conn| {
        conn.prepare(
            "SELECT before_json, after_json FROM score_changes WHERE call_id = ?1 ORDER BY id",
        )?
        .query_map([call_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect()
    })
    .await;
    rows.into_iter()
        .map(|(before, after)| {
            let read = |text: &str| serde_json::from_str(text).expect("a JSON change");
            (read(&before), read(&after))
        })
        .collect()
}

/// The ids `GET /calls` lists for `source`, every page, newest first.
pub(super) async fn listed_ids(service: &Service, source: &str) -> Vec<String> {
    let http = reqwest::Client::new();
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![
            ("source", source.to_owned()),
            ("from", "2020-01-01T00:00:00Z".to_owned()),
            ("limit", "100".to_owned()),
        ];
        if let Some(cursor) = cursor.take() {
            query.push(("cursor", cursor));
        }
        let page: Value = http
            .get(format!("{}/calls", service.base_url()))
            .bearer_auth(&service.key)
            .query(&query)
            .send()
            .await
            .expect("GET /calls")
            .error_for_status()
            .expect("a page")
            .json()
            .await
            .expect("a JSON page");
        for row in page["data"].as_array().expect("data") {
            ids.push(row["id"].as_str().expect("id").to_owned());
        }
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return ids,
        }
    }
}

/// The body of `GET /calls/{callId}`, as the service sends it.
pub(super) async fn detail_body(service: &Service, call_id: &str) -> String {
    reqwest::Client::new()
        .get(format!("{}/calls/{call_id}", service.base_url()))
        .bearer_auth(&service.key)
        .send()
        .await
        .expect("GET /calls/{callId}")
        .error_for_status()
        .expect("a scored call")
        .text()
        .await
        .expect("a body")
}

/// `GET /calls/{callId}` as JSON.
pub(super) async fn detail(service: &Service, call_id: &str) -> Value {
    serde_json::from_str(&detail_body(service, call_id).await).expect("a JSON detail")
}

/// Asserts that `store export` (jsonl) holds one line per call the service lists, each the
/// service's `GET /calls/{callId}` body exactly.
pub(super) async fn assert_export_matches_service(harness: &Harness) {
    let store = harness.store.clone();
    let (written, out) = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let written = store
            .export(None, None, ExportFormat::Jsonl, &mut out)
            .expect("export");
        (written, out)
    })
    .await
    .expect("export task");
    let text = String::from_utf8(out).expect("UTF-8 export");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(written, lines.len() as u64);
    let mut expected = Vec::new();
    for source in ["roleplay", "real_call"] {
        for id in listed_ids(&harness.service, source).await {
            expected.push((id.clone(), detail_body(&harness.service, &id).await));
        }
    }
    assert_eq!(lines.len(), expected.len(), "one line per listed call");
    for (id, body) in &expected {
        let line = lines
            .iter()
            .find(|line| {
                let value: Value = serde_json::from_str(line).expect("a JSON line");
                value["id"] == id.as_str()
            })
            .unwrap_or_else(|| panic!("call {id} is not exported"));
        assert_eq!(line, body, "the export of call {id}");
    }
}

/// A scored call of `agent`, stored directly in the service (no endpoint creates calls):
/// a real call (listed by its start) or a practice call (listed by its end).
pub(super) fn seeded_call(
    service: &Service,
    agent: &Agent,
    source: &str,
    started_at: i64,
    overall_score: u32,
) -> ScoredCall {
    let real = source == "real_call";
    ScoredCall {
        id: svc_service::ids::call_id(),
        tenant_id: service.tenant_id.clone(),
        source: source.into(),
        agent_id: agent.id.as_str().to_owned(),
        agency_id: agent.agency_id.as_str().to_owned(),
        platform_agent_id: agent.platform_agent_id.clone(),
        platform_agency_id: Some("agency-1".into()),
        drill_key: (!real).then(|| "ma-full-sale".into()),
        started_at,
        duration_sec: 600,
        transcript: json!([
            {"role": "agent", "content": "Thanks for calling, this is Sam.",
             "startTime": 0.0, "endTime": 2.4},
            {"role": "customer", "content": "Hi, I got a letter.",
             "startTime": 2.9, "endTime": 5.1},
        ])
        .to_string(),
        score: real_score(overall_score, 90.0).to_string(),
    }
}

/// A real call's score with a compliance scorecard.
pub(super) fn real_score(overall_score: u32, compliance_percent: f64) -> Value {
    json!({
        "overallScore": overall_score,
        "summary": "Enrollment call.",
        "feedback": "Summarise the benefits before the close.",
        "compliancePercent": compliance_percent,
        "complianceScorecard": {"recordingDisclosure": true},
    })
}

/// Re-dispositions a scored call in the service's database, as the service does: a new
/// score, `scoredAt` and `updatedAt` (unix ms), and no webhook.
pub(super) async fn redisposition(service: &Service, call_id: &str, score: &Value, at_ms: i64) {
    let (call_id, score) = (call_id.to_owned(), score.to_string());
    let changed = sql(service.db.path(), move |conn| {
        conn.execute(
            "UPDATE calls SET score = ?2, scored_at = ?3, updated_at = ?3
             WHERE id = ?1 AND state = 'scored'",
            rusqlite::params![call_id, score, at_ms],
        )
    })
    .await;
    assert_eq!(changed, 1, "one scored call re-dispositioned");
}
