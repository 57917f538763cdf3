//! The two sides of the differential test, seeded with the same tenant: the fixture agency
//! `acme-1` with reps `rep-1001` (Dana Reyes) and NPN `87654321` (Sam Okafor), the fixture
//! practice and real calls and one more practice call. On the fixtures that is
//! `happy::mount` (plus one added call); on the service the same roster registered through
//! the API and the same calls stored in its database, the real call scored by the service's own
//! scoring (so its `complianceScorecard` is the service's, not a copy of the fixture's). Service
//! ids differ from fixture ids: rows name them by placeholder (`{agencyId}`, `{agentId}`,
//! `{roleplayCallId}`, `{realCallId}`, `{agentsCursor}`, `{callsCursor}`), each side's
//! [`Target`] resolves them.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};
use svc_fixtures::differential::{Probe, Target};
use svc_fixtures::{API_KEY, bodies, faults, happy};
use svc_service::clock::Clock;
use svc_service::db::{Rubric, ScoredCall, TenantChange};
use svc_service::faults::Faults;
use svc_service::practice::transcript::Turn;
use svc_service::scoring::real_call::{self, Disposition, ProductLine, RealCall};
use wiremock::MockServer;

use super::Condition;
use crate::Service;

/// When the extra practice call of both sides ended.
fn extra_call_end() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 20, 9, 0, 0)
        .single()
        .expect("date")
}

/// The placeholder of a token minted before a lockout ([`Condition::Revoked`],
/// [`Condition::Inactive`]) or before the clocks moved ([`Condition::TokenExpired`]).
pub(crate) const TOKEN_BEFORE: &str = "tokenBefore";

enum State {
    Fixtures {
        server: MockServer,
        happy: happy::Happy,
    },
    Service {
        service: Service,
        clock: Clock,
    },
}

/// One side: its harness target and what puts it in a tenant condition.
pub(crate) struct Side {
    state: State,
    pub(crate) target: Target,
}

impl Side {
    /// The fixture side: the happy path plus one more practice call.
    pub(crate) async fn fixtures() -> Self {
        let server = MockServer::start().await;
        let happy = happy::mount(&server).await;
        happy
            .calls()
            .add(svc_fixtures::calls::ROLEPLAY, extra_call_end());
        let target = cursors(
            Target::new("fixtures", svc_fixtures::base_url(&server), API_KEY)
                .placeholder("agencyId", "svc_agency_fx0001")
                .placeholder("agentId", "svc_agent_fx0001")
                .placeholder("roleplayCallId", bodies::ROLEPLAY_CALL_ID)
                .placeholder("realCallId", bodies::REAL_CALL_ID),
        );
        Self {
            state: State::Fixtures { server, happy },
            target,
        }
    }

    /// The service side: the same roster through the API, the same calls in its database.
    pub(crate) async fn service() -> Self {
        let clock = Clock::manual(Utc::now());
        let service = Service::start_with(|config| config.clock = clock.clone()).await;
        let target = Target::new("service", service.base_url(), service.key.clone());
        let target = seed_service(&service, target).await;
        Self {
            state: State::Service { service, clock },
            target,
        }
    }

    /// Puts the tenant in `condition`: the service's own state changed, or on the fixtures the
    /// fault helper that plays it. Before a lockout or the clocks moving, a token is minted
    /// for `{tokenBefore}`.
    pub(crate) async fn enter(&mut self, condition: Condition) {
        if matches!(
            condition,
            Condition::Revoked | Condition::Inactive | Condition::TokenExpired
        ) {
            let token = self.target.mint().await.expect("a token before the change");
            self.target.set_placeholder(TOKEN_BEFORE, token);
        }
        match (&self.state, condition) {
            (_, Condition::Normal) => {}
            (State::Fixtures { happy, .. }, Condition::TokenExpired) => {
                happy.advance_clock(Duration::seconds(301));
            }
            (State::Service { clock, .. }, Condition::TokenExpired) => {
                clock.advance(Duration::seconds(301));
            }
            (State::Fixtures { server, .. }, condition) => {
                let fault = match condition {
                    Condition::Revoked => faults::key_revoked(server),
                    Condition::Inactive => faults::tenant_inactive(server),
                    Condition::IpNotAllowed => faults::ip_not_allowed(server),
                    Condition::QuotaSpent => faults::quota_exceeded(server),
                    Condition::RateLimited => faults::error(server, "RATE_LIMITED"),
                    _ => faults::error(server, "INTERNAL_ERROR"),
                };
                fault.mount().await;
            }
            (State::Service { service, .. }, condition) => {
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
                    // The operator's fault injection, on every request.
                    Condition::RateLimited => TenantChange::Faults(Faults {
                        api_429: 1.0,
                        ..Faults::default()
                    }),
                    _ => TenantChange::Faults(Faults {
                        api_500: 1.0,
                        ..Faults::default()
                    }),
                };
                db.update_tenant(tenant, change)
                    .await
                    .expect("update the tenant")
                    .expect("the tenant exists");
            }
        }
    }
}

/// The cursor placeholders, read from a first page on each side.
fn cursors(target: Target) -> Target {
    target
        .cursor_placeholder("agentsCursor", "/agents?limit=1")
        .cursor_placeholder(
            "callsCursor",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&limit=1",
        )
}

/// Registers the fixture roster through the API, stores the fixture calls (the real call
/// scored by the service) and returns `target` with the service's ids as placeholders.
async fn seed_service(service: &Service, target: Target) -> Target {
    let send = |probe: Probe| {
        let target = target.clone();
        async move { target.send(&probe).await.expect("a response") }
    };
    let agency = send(
        Probe::post("/agencies")
            .json(json!({ "platformAgencyId": "acme-1", "name": "Acme Insurance" })),
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
        let registered = send(Probe::post("/agents").json(body)).await;
        assert_eq!(registered.status, 201, "{}", registered.body);
        agent_ids.push(
            registered.body["agent"]["id"]
                .as_str()
                .expect("id")
                .to_owned(),
        );
    }
    let agency_id = agency.body["id"].as_str().expect("id").to_owned();
    let seeded = |detail: &Value, started: DateTime<Utc>, score: String| ScoredCall {
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
        score,
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
        seeded(&practice, started(&practice), practice["score"].to_string()),
        seeded(&real, started(&real), service_score(&real)),
        seeded(
            &practice,
            extra_call_end() - duration,
            practice["score"].to_string(),
        ),
    ];
    let target = cursors(
        target
            .placeholder("agencyId", agency_id.clone())
            .placeholder("agentId", agent_ids[0].clone())
            .placeholder("roleplayCallId", calls[0].id.clone())
            .placeholder("realCallId", calls[1].id.clone()),
    );
    service
        .db
        .insert_scored_calls(calls)
        .await
        .expect("seed the calls");
    target
}

/// The score the service gives the fixture real call's transcript as a health-plan sale on the
/// default rubric (the case with a `complianceScorecard`), as stored JSON text.
pub(crate) fn service_score(real: &Value) -> String {
    let turns: Vec<Turn> = real["transcript"]
        .as_array()
        .expect("transcript")
        .iter()
        .map(|turn| {
            let content = turn["content"].as_str().expect("content");
            match turn["role"].as_str() {
                Some("agent") => Turn::agent(content),
                _ => Turn::customer(content),
            }
        })
        .collect();
    let score = real_call::score(RealCall {
        turns: &turns,
        disposition: Disposition::Sale,
        product_line: ProductLine::HealthPlanEnrollment,
        rubric: Rubric::Default,
    })
    .expect("the fixture real call scores");
    serde_json::to_string(&score).expect("a score serialises")
}
