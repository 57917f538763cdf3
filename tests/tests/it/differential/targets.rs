//! The two sides of the differential test, seeded with the same tenant: the fixture agency
//! `acme-1` with reps `rep-1001` (Dana Reyes) and NPN `87654321` (Sam Okafor), the fixture
//! practice and real calls and one more practice call. On the fixtures that is
//! `happy::mount` (plus one added call); on the service the same roster registered through
//! the API and the same calls stored in its database. Service ids differ from fixture ids:
//! rows name them by placeholder (`{agencyId}`, `{agentId}`, `{roleplayCallId}`,
//! `{realCallId}`, `{agentsCursor}`, `{callsCursor}`), resolved here per side.

use std::collections::HashMap;

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};
use svc_fixtures::{API_KEY, bodies, faults, happy};
use svc_service::clock::Clock;
use svc_service::db::{ScoredCall, TenantChange};
use wiremock::MockServer;

use super::{Auth, Body, Condition, Row};
use crate::Service;

/// When the extra practice call of both sides ended.
fn extra_call_end() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 20, 9, 0, 0)
        .single()
        .expect("date")
}

/// What came back.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: Value,
    pub(crate) request_id: Option<String>,
    pub(crate) allow_origin: Option<String>,
}

enum Side {
    Fixtures {
        server: MockServer,
        happy: happy::Happy,
    },
    Service {
        service: Service,
        clock: Clock,
    },
}

/// One side, with its key and the values of the placeholders.
pub(crate) struct Target {
    side: Side,
    base: String,
    key: String,
    ids: HashMap<&'static str, String>,
    /// The token minted before the clocks moved ([`Condition::TokenExpired`]).
    expired_token: Option<String>,
    http: reqwest::Client,
}

impl Target {
    /// The fixture side: the happy path plus one more practice call.
    pub(crate) async fn fixtures() -> Self {
        let server = MockServer::start().await;
        let happy = happy::mount(&server).await;
        happy
            .calls()
            .add(svc_fixtures::calls::ROLEPLAY, extra_call_end());
        let ids = HashMap::from([
            ("agencyId", "svc_agency_fx0001".to_owned()),
            ("agentId", "svc_agent_fx0001".to_owned()),
            ("roleplayCallId", bodies::ROLEPLAY_CALL_ID.to_owned()),
            ("realCallId", bodies::REAL_CALL_ID.to_owned()),
        ]);
        Self {
            base: svc_fixtures::base_url(&server),
            side: Side::Fixtures { server, happy },
            key: API_KEY.to_owned(),
            ids,
            expired_token: None,
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client"),
        }
    }

    /// The service side: the same roster through the API, the same calls in its database.
    pub(crate) async fn service() -> Self {
        let clock = Clock::manual(Utc::now());
        let service = Service::start_with(|config| config.clock = clock.clone()).await;
        let mut target = Self {
            base: service.base_url(),
            key: service.key.clone(),
            side: Side::Service {
                service,
                clock: clock.clone(),
            },
            ids: HashMap::new(),
            expired_token: None,
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client"),
        };
        target.seed_service().await;
        target
    }

    async fn seed_service(&mut self) {
        let agency = self
            .call(
                "POST",
                "/agencies",
                Some(json!({ "platformAgencyId": "acme-1", "name": "Acme Insurance" })),
            )
            .await;
        assert_eq!(agency.status, 201, "{}", agency.body);
        let mut agent_ids = Vec::new();
        for agent in bodies::agents_page()["data"].as_array().expect("agents") {
            let mut body = json!({ "platformAgencyId": "acme-1" });
            for key in ["firstName", "lastName", "email", "npn", "platformAgentId"] {
                if !agent[key].is_null() {
                    body[key] = agent[key].clone();
                }
            }
            let registered = self.call("POST", "/agents", Some(body)).await;
            assert_eq!(registered.status, 201, "{}", registered.body);
            agent_ids.push(
                registered.body["agent"]["id"]
                    .as_str()
                    .expect("id")
                    .to_owned(),
            );
        }
        let agency_id = agency.body["id"].as_str().expect("id").to_owned();
        let Side::Service { service, .. } = &self.side else {
            unreachable!("the service side")
        };
        let seeded = |detail: &Value, started: DateTime<Utc>| ScoredCall {
            id: svc_service::ids::call_id(),
            tenant_id: service.tenant_id.clone(),
            source: detail["source"].as_str().expect("source").to_owned(),
            agent_id: agent_ids[0].clone(),
            agency_id: agency_id.clone(),
            platform_agent_id: Some("rep-1001".into()),
            platform_agency_id: Some("acme-1".into()),
            drill_key: detail["drillKey"].as_str().map(str::to_owned),
            started_at: started.timestamp_millis(),
            duration_sec: detail["durationSec"].as_i64().expect("durationSec"),
            transcript: detail["transcript"].to_string(),
            score: detail["score"].to_string(),
        };
        let started = |detail: &Value| -> DateTime<Utc> {
            detail["startedAt"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .expect("startedAt")
        };
        let practice = bodies::call_roleplay();
        let real = bodies::call_real_call();
        let duration = Duration::seconds(practice["durationSec"].as_i64().expect("duration"));
        let calls = vec![
            seeded(&practice, started(&practice)),
            seeded(&real, started(&real)),
            seeded(&practice, extra_call_end() - duration),
        ];
        self.ids = HashMap::from([
            ("agencyId", agency_id.clone()),
            ("agentId", agent_ids[0].clone()),
            ("roleplayCallId", calls[0].id.clone()),
            ("realCallId", calls[1].id.clone()),
        ]);
        service
            .db
            .insert_scored_calls(calls)
            .await
            .expect("seed the calls");
    }

    /// Puts the tenant in `condition`: the service's own state changed, or on the fixtures the
    /// fault helper that plays it.
    pub(crate) async fn enter(&mut self, condition: Condition) {
        match (&self.side, condition) {
            (_, Condition::Normal) => {}
            (_, Condition::TokenExpired) => {
                self.expired_token = Some(self.mint().await);
                match &self.side {
                    Side::Fixtures { happy, .. } => happy.advance_clock(Duration::seconds(301)),
                    Side::Service { clock, .. } => clock.advance(Duration::seconds(301)),
                }
            }
            (Side::Fixtures { server, .. }, condition) => {
                let fault = match condition {
                    Condition::Revoked => faults::key_revoked(server),
                    Condition::Inactive => faults::tenant_inactive(server),
                    Condition::IpNotAllowed => faults::ip_not_allowed(server),
                    Condition::QuotaSpent => faults::quota_exceeded(server),
                    _ => faults::error(server, "INTERNAL_ERROR"),
                };
                fault.mount().await;
            }
            (Side::Service { service, .. }, condition) => {
                let tenant = service.tenant_id.as_str();
                let db = &service.db;
                let change = match condition {
                    Condition::Revoked => {
                        db.revoke_api_keys(tenant, Utc::now().timestamp_millis())
                            .await
                            .expect("revoke");
                        return;
                    }
                    Condition::Inactive => TenantChange::Active(false),
                    Condition::IpNotAllowed => {
                        TenantChange::IpAllowlist(vec!["10.0.0.0/8".parse().expect("a network")])
                    }
                    Condition::QuotaSpent => TenantChange::MonthlyAllowanceMinutes(Some(0)),
                    // No request makes the service fail on purpose; those rows skip it.
                    _ => return,
                };
                db.update_tenant(tenant, change)
                    .await
                    .expect("update the tenant")
                    .expect("the tenant exists");
            }
        }
    }

    /// Sends `row` with its placeholders, credential and body resolved on this side.
    pub(crate) async fn send(&mut self, row: &Row) -> Reply {
        let path = self.resolve(row.path).await;
        let credential = match row.auth {
            Auth::Key => Some(self.key.clone()),
            Auth::None => None,
            Auth::WrongKey => Some("svc_live_not_a_key_of_this_tenant_0000".to_owned()),
            Auth::Raw(text) => Some(text.to_owned()),
            Auth::FreshToken => Some(self.mint().await),
            Auth::SpentToken => {
                let token = self.mint().await;
                let spent = self
                    .request("POST", "/roleplay/session", Some(&token), redeem_body())
                    .await;
                assert_eq!(spent.status, 200, "spending a token: {}", spent.body);
                Some(token)
            }
            Auth::ExpiredToken => self.expired_token.clone(),
            Auth::TokenAfter(first) => {
                let token = self.mint().await;
                let body = Some((first.to_owned(), "application/json"));
                self.request("POST", "/roleplay/session", Some(&token), body)
                    .await;
                Some(token)
            }
        };
        let body = match &row.body {
            Body::None => None,
            Body::Json(value) => {
                let text = self.resolve(&value.to_string()).await;
                Some((text, "application/json"))
            }
            Body::Raw(text, content_type) => Some(((*text).to_owned(), *content_type)),
        };
        self.request(row.method, &path, credential.as_deref(), body)
            .await
    }

    /// A token for `rep-1001`, minted with the key.
    async fn mint(&self) -> String {
        let minted = self
            .call(
                "POST",
                "/session",
                Some(json!({ "platformAgentId": "rep-1001" })),
            )
            .await;
        assert_eq!(minted.status, 200, "minting: {}", minted.body);
        minted.body["token"].as_str().expect("token").to_owned()
    }

    /// `text` with every `{placeholder}` replaced by this side's value; the cursors are
    /// fetched from a first page (`GET /agents?limit=1`, `GET /calls?…&limit=1`).
    async fn resolve(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (name, value) in &self.ids {
            out = out.replace(&format!("{{{name}}}"), value);
        }
        for (name, first_page) in [
            ("agentsCursor", "/agents?limit=1"),
            (
                "callsCursor",
                "/calls?source=roleplay&from=2026-01-01T00:00:00Z&limit=1",
            ),
        ] {
            let placeholder = format!("{{{name}}}");
            if out.contains(&placeholder) {
                let page = self.call("GET", first_page, None).await;
                let cursor = page.body["nextCursor"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{first_page} has a next page: {}", page.body));
                out = out.replace(&placeholder, cursor);
            }
        }
        out
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Reply {
        let body = body.map(|b| (b.to_string(), "application/json"));
        self.request(method, path, Some(&self.key), body).await
    }

    async fn request(
        &self,
        method: &str,
        path: &str,
        credential: Option<&str>,
        body: Option<(String, &str)>,
    ) -> Reply {
        self.request_from(method, path, credential, body, false)
            .await
    }

    async fn request_from(
        &self,
        method: &str,
        path: &str,
        credential: Option<&str>,
        body: Option<(String, &str)>,
        cross_origin: bool,
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let preflight = method == reqwest::Method::OPTIONS;
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if cross_origin {
            request = request.header("origin", "https://app.example");
        }
        if cross_origin && preflight {
            request = request
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "authorization,content-type",
                );
        }
        if let Some(credential) = credential {
            request = request.bearer_auth(credential);
        }
        if let Some((text, content_type)) = body {
            request = request.header("content-type", content_type).body(text);
        }
        let response = request.send().await.expect("a response");
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let request_id = header("x-service-request-id");
        let allow_origin = header("access-control-allow-origin");
        let text = response.text().await.expect("a body");
        Reply {
            status,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
            request_id,
            allow_origin,
        }
    }
}

fn redeem_body() -> Option<(String, &'static str)> {
    Some((
        json!({ "drillKey": "ma-full-sale" }).to_string(),
        "application/json",
    ))
}
