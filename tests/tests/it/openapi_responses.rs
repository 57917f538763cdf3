//! The service's own responses checked against the document it serves, so the service cannot
//! drift from what it publishes: roster writes and reads, mint, redeem, a real practice call
//! scored and read back, real calls ingested from dialer records (scored with a scorecard and an
//! audio link, and not scored), the error envelopes, and the `call.scored` webhook bodies queued
//! for both sources and outcomes, each body checked as the document declares it for its endpoint
//! and status (every object closed except the contract's open ones).

use std::time::Duration;

use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};
use svc_client::LiveSession;
use svc_service::clock::Clock;
use svc_service::config::default_audio_dir;
use svc_service::db::Rubric;
use svc_service::realcall::audio::Archive;
use svc_service::realcall::ingest::{Disposal, Ingest};

use crate::Service;
use crate::openapi_check::{ApiDoc, Body, CONTRACT_OPEN, served_document};
use crate::practice::SCRIPT;

const AGENCY_CREATED: Body = Body::of("POST", "/agencies", 201);
const AGENCY_RENAMED: Body = Body::of("POST", "/agencies", 200);
const AGENT_CREATED: Body = Body::of("POST", "/agents", 201);
const AGENT_PAGE: Body = Body::of("GET", "/agents", 200);
const SESSION: Body = Body::of("POST", "/session", 200);
const REDEEM: Body = Body::of("POST", "/roleplay/session", 200);
const CALLS: Body = Body::of("GET", "/calls", 200);
const CALL: Body = Body::of("GET", "/calls/{callId}", 200);

/// A running service, its document, and the problems found in its responses so far.
struct Conformance {
    service: Service,
    http: reqwest::Client,
    doc: ApiDoc,
    problems: Vec<String>,
}

impl Conformance {
    async fn start() -> Self {
        let service = Service::start().await;
        let doc = ApiDoc::new(served_document(&service).await, CONTRACT_OPEN);
        Self {
            service,
            http: reqwest::Client::new(),
            doc,
            problems: Vec::new(),
        }
    }

    /// A request to `path` (under `/v1`) with the tenant's API key.
    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.service.base_url()))
            .bearer_auth(&self.service.key)
    }

    fn get(&self, path: &str) -> RequestBuilder {
        self.request(Method::GET, path)
    }

    fn post(&self, path: &str, body: Value) -> RequestBuilder {
        self.request(Method::POST, path).json(&body)
    }

    /// Sends `request`: its label (method, path and query), status and JSON body.
    async fn send(&self, request: RequestBuilder) -> (String, u16, Value) {
        let request = request.build().expect("request");
        let url = request.url();
        let label = match url.query() {
            Some(query) => format!("{} {}?{query}", request.method(), url.path()),
            None => format!("{} {}", request.method(), url.path()),
        };
        let response = self.http.execute(request).await.expect("send");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{label}: the body is not JSON ({e}): {text}"));
        (label, status, body)
    }

    /// Sends `request`, which must answer `expected`'s status, and records every way its body
    /// differs from what the document declares for `expected`. Returns the body.
    async fn exchange(&mut self, expected: Body, request: RequestBuilder) -> Value {
        let (label, status, body) = self.send(request).await;
        assert_eq!(status, expected.status, "{label}: {body}");
        self.problems
            .extend(self.doc.check(&label, expected, &body));
        body
    }

    /// [`Self::exchange`] for an error response, which must carry `code`.
    async fn expect_error(&mut self, expected: Body, code: &str, request: RequestBuilder) -> Value {
        let body = self.exchange(expected, request).await;
        assert_eq!(body["error"]["code"], code, "{body}");
        body
    }

    /// The detail of practice call `call_id` once it is scored; every `CALL_NOT_FOUND` answered
    /// while it scores is checked too.
    async fn scored_call(&mut self, call_id: &str) -> Value {
        let path = format!("/calls/{call_id}");
        for _ in 0..100 {
            let (label, status, body) = self.send(self.get(&path)).await;
            let answered = Body::of("GET", "/calls/{callId}", status);
            self.problems
                .extend(self.doc.check(&label, answered, &body));
            if status == 200 {
                return body;
            }
            assert_eq!(body["error"]["code"], "CALL_NOT_FOUND", "{label}: {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{call_id} was not scored within 10 s");
    }
}

/// Roster writes and reads, with their errors. Returns the registered agent.
async fn roster(api: &mut Conformance) -> Value {
    let agency = json!({"platformAgencyId": "agency-1", "name": "First Agency"});
    api.exchange(AGENCY_CREATED, api.post("/agencies", agency))
        .await;
    let renamed = json!({"platformAgencyId": "agency-1", "name": "Agency One"});
    api.exchange(AGENCY_RENAMED, api.post("/agencies", renamed))
        .await;

    let sam = json!({"firstName": "Sam", "lastName": "Rivera", "email": "sam@example.com",
        "npn": "1234567", "platformAgentId": "rep-1", "platformAgencyId": "agency-1"});
    let agent = api.exchange(AGENT_CREATED, api.post("/agents", sam)).await["agent"].clone();
    let again = json!({"firstName": "Sam", "lastName": "R", "npn": "1234567",
        "platformAgencyId": "agency-1"});
    let conflict = Body::of("POST", "/agents", 409);
    let conflict = api
        .expect_error(conflict, "AGENT_ALREADY_EXISTS", api.post("/agents", again))
        .await;
    assert_eq!(conflict["error"]["details"]["agentId"], agent["id"]);
    let elsewhere = json!({"firstName": "Al", "lastName": "B", "npn": "7654321",
        "platformAgencyId": "no-such-agency"});
    let unknown_agency = Body::of("POST", "/agents", 404);
    api.expect_error(
        unknown_agency,
        "AGENCY_NOT_FOUND",
        api.post("/agents", elsewhere),
    )
    .await;

    let roster = api.exchange(AGENT_PAGE, api.get("/agents?limit=1")).await;
    assert_eq!(roster["data"][0], agent);
    let by_id = format!("/agents?agentId={}", agent["id"].as_str().expect("id"));
    let found = api.exchange(AGENT_PAGE, api.get(&by_id)).await;
    assert_eq!(found["data"][0], agent);
    let bad_limit = Body::of("GET", "/agents", 400);
    api.expect_error(bad_limit, "INVALID_REQUEST", api.get("/agents?limit=0"))
        .await;
    agent
}

/// Mint, redeem (and its refusals), a scripted practice call and its scored detail. Returns the
/// call's id.
async fn practice_call(api: &mut Conformance) -> String {
    let mint = json!({"platformAgentId": "rep-1", "externalAgencyId": "acme-1"});
    let minted = api.exchange(SESSION, api.post("/session", mint)).await;
    let token = minted["token"].as_str().expect("token").to_owned();
    let nobody = json!({"platformAgentId": "nobody"});
    let unknown_agent = Body::of("POST", "/session", 404);
    api.expect_error(
        unknown_agent,
        "AGENT_NOT_FOUND",
        api.post("/session", nobody),
    )
    .await;

    let redeem = |token: &str| {
        api.http
            .post(format!("{}/roleplay/session", api.service.base_url()))
            .bearer_auth(token)
            .json(&json!({"drillKey": "ma-full-sale"}))
    };
    let (first, replay, forged) = (redeem(&token), redeem(&token), redeem("not-a-jwt"));
    let live = api.exchange(REDEEM, first).await;
    let refused = Body::of("POST", "/roleplay/session", 401);
    api.expect_error(refused, "TOKEN_ALREADY_USED", replay)
        .await;
    api.expect_error(refused, "INVALID_TOKEN", forged).await;

    let live: LiveSession = serde_json::from_value(live).expect("live session");
    let script: Vec<String> = SCRIPT.iter().map(|line| (*line).to_owned()).collect();
    svc_client::live::run_call(&live, &script, Duration::from_secs(10))
        .await
        .expect("practice call");
    let detail = api.scored_call(live.call_id.as_str()).await;
    let turns = detail["transcript"].as_array().map_or(0, Vec::len);
    assert!(turns > SCRIPT.len(), "{detail}");
    // Practice scores stay whole numbers on the wire.
    assert!(detail["score"]["compliancePercent"].is_u64(), "{detail}");
    live.call_id.into_string()
}

/// Ingests two real calls of `agent` through the operator's ingestion, as a dialer would
/// send them: one scored, a default-rubric health-plan sale (so its score carries the
/// compliance scorecard, and its detail an audio link), and one whose transcript has no rep
/// turn (not scored: its webhook is the only trace). Returns the scored call's id.
async fn real_calls(service: &Service, agent: &Value) -> String {
    let agency_id = agent["agencyId"].as_str().expect("agencyId");
    service
        .db
        .set_real_calls(
            &service.tenant_id,
            agency_id,
            Some((false, Rubric::Default)),
        )
        .await
        .expect("enable real calls")
        .expect("the agency exists");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("call.wav"), b"RIFF conformance").expect("recording");
    let record = |id: &str, transcript: Value| {
        Ok(json!({
            "dialerCallId": id, "agencyId": agency_id,
            "rep": {"agentId": agent["platformAgentId"]},
            "startedAt": "2026-01-16T14:00:00.000Z", "durationSec": 1300,
            "recording": "call.wav", "transcript": transcript,
            "disposition": "sale", "productLine": "health_plan_enrollment",
        }))
    };
    let scored = json!([
        {"role": "agent", "content": "Thanks for calling, this is Sam, a licensed agent. This call is recorded.",
         "startTime": 0.0, "endTime": 2.4},
        {"role": "customer", "content": "Hi, I got a letter.", "startTime": 2.9, "endTime": 5.1},
        {"role": "agent", "content": "Would you like to enroll today?", "startTime": 5.5, "endTime": 7.0},
    ]);
    let silent =
        json!([{"role": "customer", "content": "Hello?", "startTime": 0.0, "endTime": 1.0}]);
    let archive = Archive::new(default_audio_dir(service.db.path()));
    let outcomes = Ingest::new(service.db.clone(), archive, Clock::System, dir.path())
        .ingest(
            &service.tenant_id,
            vec![record("d-scored", scored), record("d-silent", silent)],
        )
        .await
        .expect("ingest");
    match &outcomes[0].disposal {
        Disposal::Stored {
            call_id,
            scored: true,
        } => call_id.clone(),
        other => panic!("the first record was not stored scored: {other:?}"),
    }
}

/// The `call.scored` bodies the service queued for delivery (the tenant has an endpoint that
/// answers nothing: the bodies are what would be signed and sent).
fn queued_webhooks(service: &Service) -> Vec<Value> {
    let conn = rusqlite::Connection::open(service.db.path()).expect("open the service's database");
    let mut stmt = conn
        .prepare("SELECT body FROM webhook_deliveries ORDER BY created_at")
        .expect("query");
    stmt.query_map([], |r| r.get::<_, String>(0))
        .expect("rows")
        .map(|body| serde_json::from_str(&body.expect("body")).expect("JSON body"))
        .collect()
}

/// The call reads of both sources, with their errors.
async fn call_reads(api: &mut Conformance, agent: &Value, practice_id: &str) {
    let real_id = real_calls(&api.service, agent).await;
    for (source, id) in [("roleplay", practice_id), ("real_call", &real_id)] {
        let path = format!("/calls?from=2020-01-01T00:00:00Z&source={source}");
        let page = api.exchange(CALLS, api.get(&path)).await;
        assert_eq!(page["data"][0]["id"], id, "{source}");
    }
    let real_path = format!("/calls/{real_id}");
    let detail = api.exchange(CALL, api.get(&real_path)).await;
    assert!(
        detail["score"]["complianceScorecard"]["checks"].is_array(),
        "{detail}"
    );
    assert_eq!(detail["transcript"][0]["endTime"], 2.4);
    assert!(detail["audioUrl"].is_string(), "{detail}");

    let unknown_call = Body::of("GET", "/calls/{callId}", 404);
    let unknown_path = "/calls/svc_call_nosuchcall";
    api.expect_error(unknown_call, "CALL_NOT_FOUND", api.get(unknown_path))
        .await;
    let wrong_key = api
        .http
        .get(format!("{}{real_path}", api.service.base_url()))
        .bearer_auth("svc_live_not-a-key");
    let refused = Body::of("GET", "/calls/{callId}", 401);
    api.expect_error(refused, "INVALID_API_KEY", wrong_key)
        .await;
    let no_source = Body::of("GET", "/calls", 400);
    let path = "/calls?from=2020-01-01T00:00:00Z";
    api.expect_error(no_source, "INVALID_REQUEST", api.get(path))
        .await;
}

#[tokio::test]
async fn every_response_of_the_service_matches_the_document_it_serves() {
    let mut api = Conformance::start().await;
    // An endpoint nothing listens on: deliveries are queued (and fail), their bodies kept.
    api.service
        .set_webhook_url("https://127.0.0.1:9/hook")
        .await;
    let agent = roster(&mut api).await;
    let practice_id = practice_call(&mut api).await;
    call_reads(&mut api, &agent, &practice_id).await;
    let webhooks = queued_webhooks(&api.service);
    let outcomes: Vec<(&Value, &Value)> = webhooks
        .iter()
        .map(|body| (&body["source"], &body["success"]))
        .collect();
    for expected in [
        (&json!("roleplay"), &json!(true)),
        (&json!("real_call"), &json!(true)),
        (&json!("real_call"), &json!(false)),
    ] {
        assert!(
            outcomes.contains(&expected),
            "no {expected:?} webhook in {webhooks:?}"
        );
    }
    for (i, body) in webhooks.iter().enumerate() {
        let label = format!("webhook {i}");
        let problems = api.doc.check(&label, Body::webhook("call.scored"), body);
        api.problems.extend(problems);
    }
    assert!(api.problems.is_empty(), "\n{}", api.problems.join("\n"));
}
