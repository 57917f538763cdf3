//! What the real-call tests share: a running service whose manual clock stands mid-month, a
//! tenant with a webhook sink and one agency switched on (`ag-1`, rep `rep-1`), recordings in a
//! temp dir, dialer records built from one template, ingestion through the library, and reads
//! through the API.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;
use svc_service::config::Config;
use svc_service::credentials::SigningSecret;
use svc_service::db::{DeliveryRow, Rubric, TenantChange};
use svc_service::realcall::audio::Archive;
use svc_service::realcall::ingest::{Disposal, Dropped, Ingest, RecordOutcome};
use svc_service::webhook::client::WebhookClient;
use svc_service::webhook::outbox::Outbox;
use tempfile::TempDir;

use crate::helpers::{Reply, TestApp, TestTenant};
use crate::practice_helpers::{Received, WebhookSink, mint, practice_app};

/// When every test's manual clock stands: mid-month, so that the calls below (started the same
/// morning) fall in the month the allowance counts.
pub(super) fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 15, 12, 0, 0).unwrap()
}

/// [`now`] as the API writes it.
pub(super) const NOW: &str = "2026-01-15T12:00:00.000Z";
/// A `from` that holds every call the records below start.
pub(super) const MORNING: &str = "2026-01-15T00:00:00.000Z";
/// The bytes of the template's recording (`call.wav`): a few bytes are enough.
pub(super) const AUDIO: &[u8] = b"RIFF\x1c\x00\x00\x00WAVEfmt fake-pcm";

/// A sale on a health plan, with turn indexes the scorecard's evidence names: the recording
/// notice and licence in 1, permission and doctors in 3, a prohibited claim in 5, the close in
/// 6; no disclaimer and no prescriptions.
pub(super) const SALE: &[(&str, &str)] = &[
    ("customer", "Hello?"),
    (
        "agent",
        "Hi, my name is Ada, I'm a licensed insurance agent. This call is recorded.",
    ),
    ("customer", "Okay."),
    ("agent", "May I ask which doctors you see?"),
    ("customer", "Dr. Lee."),
    ("agent", "I guarantee this plan has a zero premium."),
    ("agent", "Would you like to enroll today?"),
];
/// The rep spoke once: too little for a headline score.
pub(super) const ONE_REP_TURN: &[(&str, &str)] = &[
    ("customer", "Hello?"),
    ("agent", "Hi, my name is Ada. This call is recorded."),
    ("customer", "Not interested, bye."),
];
/// Only the customer spoke: the call cannot be scored.
pub(super) const NO_REP_TURN: &[(&str, &str)] = &[
    ("customer", "Hello?"),
    ("customer", "Hello? Is anyone there?"),
];

/// A transcript as the dialer sends it: each turn timed (4.5 s apart, 3.25 s long).
pub(super) fn turns(lines: &[(&str, &str)]) -> Value {
    let turns = lines.iter().enumerate().map(|(i, (role, content))| {
        let start = 4.5 * i as f64;
        json!({ "role": role, "content": content, "startTime": start, "endTime": start + 3.25 })
    });
    Value::Array(turns.collect())
}

/// A dialer record that is stored and scored: a 312 s health-plan sale by `rep-1` of
/// `agency_id` that started at 10:00, recorded in `call.wav`.
pub(super) fn record(dialer_call_id: &str, agency_id: &str) -> Value {
    json!({
        "dialerCallId": dialer_call_id,
        "agencyId": agency_id,
        "rep": { "agentId": "rep-1", "name": "Ann Lee" },
        "startedAt": "2026-01-15T10:00:00.000Z",
        "durationSec": 312,
        "recording": "call.wav",
        "transcript": turns(SALE),
        "disposition": "sale",
        "productLine": "health_plan_enrollment",
    })
}

/// `record` with the keys of `changes` replaced.
pub(super) fn with(mut record: Value, changes: Value) -> Value {
    for (key, value) in changes.as_object().expect("changes are an object") {
        record[key] = value.clone();
    }
    record
}

/// A running service with a tenant ready for real calls.
pub(super) struct World {
    pub(super) app: TestApp,
    pub(super) tenant: TestTenant,
    /// The tenant's signing secret.
    pub(super) secret: String,
    pub(super) sink: WebhookSink,
    /// Where the dialer's recordings are (relative recording paths are read from here).
    pub(super) dir: TempDir,
    /// `ag-1`, switched on with the default rubric; its rep `rep-1` is Ann Lee.
    pub(super) agency: String,
    /// `rep-1`.
    pub(super) agent: Value,
}

impl World {
    pub(super) async fn new() -> World {
        World::with_config(|_| {}).await
    }

    /// A world whose server settings `adjust` changes (a manual clock is still set to [`now`]).
    pub(super) async fn with_config(adjust: impl FnOnce(&mut Config)) -> World {
        let app = practice_app(adjust).await;
        app.clock.set(now());
        let tenant = app.tenant().await;
        let sink = WebhookSink::start().await;
        app.change(&tenant, TenantChange::WebhookUrl(Some(sink.url.clone())))
            .await;
        let secret = SigningSecret::generate();
        app.change(&tenant, TenantChange::SigningSecret(secret.clone()))
            .await;
        let dir = tempfile::tempdir().expect("recordings dir");
        std::fs::write(dir.path().join("call.wav"), AUDIO).expect("recording");
        let mut world = World {
            app,
            tenant,
            secret: secret.expose().to_owned(),
            sink,
            dir,
            agency: String::new(),
            agent: Value::Null,
        };
        world.agency = world.agency("ag-1", Some((false, Rubric::Default))).await;
        world.agent = world
            .agent(
                "ag-1",
                json!({ "platformAgentId": "rep-1", "email": "ann@example.com" }),
            )
            .await;
        world
    }

    /// Creates the agency `platform_id` and, with `Some((third_party_dialer, rubric))`,
    /// switches it on for real calls as the operator does; returns its service id.
    pub(super) async fn agency(&self, platform_id: &str, on: Option<(bool, Rubric)>) -> String {
        let agency = self.app.agency(&self.tenant, platform_id).await;
        let id = agency["id"].as_str().expect("agency id").to_owned();
        if let Some(settings) = on {
            self.app
                .db
                .set_real_calls(&self.tenant.id, &id, Some(settings))
                .await
                .expect("switch on")
                .expect("the tenant's agency");
        }
        id
    }

    /// Registers an agent (`body` over firstName Ann, lastName Lee) into `platform_agency_id`.
    pub(super) async fn agent(&self, platform_agency_id: &str, body: Value) -> Value {
        self.app.agent(&self.tenant, platform_agency_id, body).await
    }

    /// Writes a recording into the recordings dir; returns its absolute path.
    pub(super) fn recording(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).expect("recording");
        path.to_string_lossy().into_owned()
    }

    /// The service's archive of recordings.
    pub(super) fn archive(&self) -> Archive {
        Archive::new(self.app.config.audio_dir())
    }

    /// The files in the archive.
    pub(super) fn archived_files(&self) -> Vec<PathBuf> {
        archived_files(&self.app.config.audio_dir())
    }

    /// Ingests `records` for the tenant through the library, with the service's clock.
    pub(super) async fn ingest(&self, records: Vec<Value>) -> Vec<RecordOutcome> {
        self.ingest_results(records.into_iter().map(Ok).collect())
            .await
    }

    /// Ingests records (or why they did not read) for the tenant through the library.
    pub(super) async fn ingest_results(
        &self,
        records: Vec<Result<Value, String>>,
    ) -> Vec<RecordOutcome> {
        Ingest::new(
            self.app.db.clone(),
            self.archive(),
            self.app.clock.clone(),
            self.dir.path(),
        )
        .ingest(&self.tenant.id, records)
        .await
        .expect("ingest")
    }

    /// Ingests one record that must be stored; returns its call id.
    pub(super) async fn stored(&self, record: Value) -> String {
        let outcomes = self.ingest(vec![record]).await;
        stored_id(&outcomes[0])
    }

    /// `GET /v1/calls/{callId}`.
    pub(super) async fn detail(&self, call_id: &str) -> Reply {
        self.app
            .get(&self.tenant, &format!("/v1/calls/{call_id}"))
            .await
    }

    /// `GET /v1/calls?source=real_call&from=…` plus `more` (`&to=…`); returns the rows.
    pub(super) async fn list(&self, from: &str, more: &str) -> Vec<Value> {
        let path = format!("/v1/calls?source=real_call&from={from}{more}");
        let page = self.app.get(&self.tenant, &path).await.expect(200);
        page["data"].as_array().expect("rows").clone()
    }

    /// The ids of the real calls listed from [`MORNING`], in order.
    pub(super) async fn listed_ids(&self) -> Vec<String> {
        let rows = self.list(MORNING, "").await;
        rows.iter()
            .map(|row| row["id"].as_str().expect("id").to_owned())
            .collect()
    }

    /// The tenant's webhook deliveries, newest first.
    pub(super) async fn deliveries(&self) -> Vec<DeliveryRow> {
        self.app
            .db
            .list_deliveries(Some(self.tenant.id.clone()), 100)
            .await
            .expect("deliveries")
    }

    /// Attempts every delivery due now (instead of waiting for the server's worker); returns
    /// how many attempts this made.
    pub(super) async fn deliver_due(&self) -> usize {
        let client = WebhookClient::new(true).expect("webhook client");
        let outbox = Outbox::new(
            self.app.db.clone(),
            client,
            self.app.clock.clone(),
            Duration::from_secs(1),
        );
        outbox.drain().await.expect("drain the outbox").len()
    }

    /// Delivers what is due and returns the next `count` deliveries the sink receives, after
    /// checking that their signatures verify with the tenant's secret at the service's time.
    pub(super) async fn received(&mut self, count: usize) -> Vec<Received> {
        self.deliver_due().await;
        let mut received = Vec::with_capacity(count);
        for _ in 0..count {
            let delivery = self.sink.next().await;
            assert_signed(&delivery, &self.secret, self.app.clock.now().timestamp());
            received.push(delivery);
        }
        received
    }

    /// `POST /v1/session` for `rep-1`: 200 while the monthly allowance is not spent.
    pub(super) async fn mint_status(&self) -> Reply {
        mint(
            &self.app,
            &self.tenant,
            json!({ "platformAgentId": "rep-1" }),
        )
        .await
    }

    /// Sends a request without an API key (an audio link is its own credential).
    pub(super) async fn fetch(&self, url: &str, range: Option<&str>) -> reqwest::Response {
        let mut request = self.app.client.request(Method::GET, url);
        if let Some(range) = range {
            request = request.header("range", range);
        }
        request.send().await.expect("request sent")
    }
}

/// The files in an archive directory (none when it was never created).
pub(super) fn archived_files(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// The call id of an outcome that must be a call stored now.
#[track_caller]
pub(super) fn stored_id(outcome: &RecordOutcome) -> String {
    match &outcome.disposal {
        Disposal::Stored { call_id, .. } => call_id.clone(),
        other => panic!("record {} was not stored: {other:?}", outcome.index),
    }
}

/// The drop reason of an outcome that must be a dropped record.
#[track_caller]
pub(super) fn dropped(outcome: &RecordOutcome) -> Dropped {
    match &outcome.disposal {
        Disposal::Dropped(reason) => *reason,
        other => panic!("record {} was not dropped: {other:?}", outcome.index),
    }
}

/// Asserts `X-Service-Signature` is `t=<now>,v1=<hex>` with `v1` the HMAC-SHA256 of
/// `<t>.<raw body>` under the whole `whsec_` secret (contract section 6).
#[track_caller]
pub(super) fn assert_signed(received: &Received, secret: &str, now: i64) {
    let header = received.signature();
    let (t, v1) = header
        .split_once(",v1=")
        .and_then(|(t, v1)| Some((t.strip_prefix("t=")?, v1)))
        .unwrap_or_else(|| panic!("malformed signature header {header:?}"));
    assert_eq!(t, now.to_string(), "signed at the service's time");
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(t.as_bytes());
    mac.update(b".");
    mac.update(&received.body);
    assert_eq!(v1, hex::encode(mac.finalize().into_bytes()), "v1 verifies");
}

/// The sorted keys of a JSON object.
pub(super) fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect();
    keys.sort_unstable();
    keys
}
