//! The rows: per endpoint, its successes, every request rule, every documented error code and
//! the auth failures; the routing errors (`404`, `405` with its `Allow`, `HEAD` on the `GET`
//! routes); then the tenant conditions (revoked key, inactive tenant, IP allowlist, spent
//! allowance, expired token, rate limit, internal errors) over every endpoint they apply to,
//! with the tokens a lockout voids.
//!
//! Rows run in order on each side, so a row may rely on the ones before it (an agency created
//! once answers 201, then 200).

use serde_json::{Value, json};
use svc_fixtures::differential::{Credential, Probe};

use super::targets::TOKEN_BEFORE;
use super::{Condition, Row};

fn row(method: &'static str, path: &'static str, status: u16, code: Option<&'static str>) -> Row {
    Row {
        when: Condition::Normal,
        probe: Probe::new(method, path).expect(status, code),
    }
}

fn ok(method: &'static str, path: &'static str, status: u16) -> Row {
    row(method, path, status, None)
}

fn err(method: &'static str, path: &'static str, status: u16, code: &'static str) -> Row {
    row(method, path, status, Some(code))
}

fn bad(method: &'static str, path: &'static str) -> Row {
    err(method, path, 400, "INVALID_REQUEST")
}

/// The token minted before the condition was entered.
fn token_before() -> Credential {
    Credential::Bearer(format!("{{{TOKEN_BEFORE}}}"))
}

impl Row {
    fn auth(mut self, auth: Credential) -> Self {
        self.probe = self.probe.credential(auth);
        self
    }

    fn json(mut self, body: Value) -> Self {
        self.probe = self.probe.json(body);
        self
    }

    fn raw(mut self, text: &'static str, content_type: &'static str) -> Self {
        self.probe = self.probe.raw(text, content_type);
        self
    }

    fn cross_origin(mut self) -> Self {
        self.probe = self.probe.cross_origin();
        self
    }

    fn when(mut self, condition: Condition) -> Self {
        self.when = condition;
        self
    }

    fn expect(mut self, status: u16, code: Option<&'static str>) -> Self {
        self.probe = self.probe.expect(status, code);
        self
    }

    fn skip_service(mut self, why: &'static str) -> Self {
        self.probe = self.probe.mock_only(why);
        self
    }
}

const CALLS: &str = "/calls?source=roleplay&from=2026-01-01T00:00:00Z";

/// Every row, in the order each side runs them.
pub(crate) fn rows() -> Vec<Row> {
    [
        routing(),
        cors(),
        agencies(),
        agents(),
        lookups(),
        mint(),
        redeem(),
        token_spending(),
        calls(),
        conditions(),
    ]
    .concat()
}

/// Only the redeem route accepts cross-origin requests (contract section 5).
fn cors() -> Vec<Row> {
    vec![
        ok("OPTIONS", "/roleplay/session", 200)
            .auth(Credential::None)
            .cross_origin(),
        ok("POST", "/roleplay/session", 200)
            .auth(Credential::FreshToken)
            .json(json!({ "drillKey": "ma-full-sale" }))
            .cross_origin(),
        err("POST", "/roleplay/session", 401, "INVALID_TOKEN")
            .auth(Credential::None)
            .json(json!({ "drillKey": "ma-full-sale" }))
            .cross_origin(),
        err("OPTIONS", "/agents", 405, "METHOD_NOT_ALLOWED")
            .auth(Credential::None)
            .cross_origin(),
        err("OPTIONS", "/calls", 405, "METHOD_NOT_ALLOWED")
            .auth(Credential::None)
            .cross_origin(),
        ok("GET", "/agents", 200).cross_origin(),
        err("GET", "/agents", 401, "INVALID_API_KEY")
            .auth(Credential::WrongKey)
            .cross_origin(),
    ]
}

/// Unknown paths, wrong methods (each 405 with the same `Allow` on both sides) and `HEAD` on
/// the `GET` routes (answered as the `GET`, without a body).
fn routing() -> Vec<Row> {
    vec![
        err("GET", "/nowhere", 404, "NOT_FOUND"),
        err("DELETE", "/agents", 405, "METHOD_NOT_ALLOWED"),
        err("GET", "/nowhere", 404, "NOT_FOUND").auth(Credential::None),
        err("POST", "/calls", 405, "METHOD_NOT_ALLOWED"),
        err("PUT", "/calls/{roleplayCallId}", 405, "METHOD_NOT_ALLOWED"),
        err("GET", "/agencies", 405, "METHOD_NOT_ALLOWED"),
        err("GET", "/session", 405, "METHOD_NOT_ALLOWED"),
        err("GET", "/roleplay/session", 405, "METHOD_NOT_ALLOWED"),
        err("HEAD", "/agencies", 405, "METHOD_NOT_ALLOWED"),
        ok("HEAD", "/agents", 200),
        ok("HEAD", "/agents?platformAgentId=rep-1001", 200),
        ok("HEAD", CALLS, 200),
        ok("HEAD", "/calls/{roleplayCallId}", 200),
        ok("HEAD", "/calls/{realCallId}", 200),
        err("HEAD", "/calls/svc_call_unknown", 404, "CALL_NOT_FOUND"),
        bad("HEAD", "/calls?source=bogus&from=2026-01-01T00:00:00Z"),
        err("HEAD", "/agents", 401, "INVALID_API_KEY").auth(Credential::WrongKey),
        err("HEAD", "/nowhere", 404, "NOT_FOUND"),
    ]
}

fn agencies() -> Vec<Row> {
    let acme2 = json!({ "platformAgencyId": "acme-2", "name": "Acme Two" });
    vec![
        err("POST", "/agencies", 401, "INVALID_API_KEY")
            .auth(Credential::None)
            .json(acme2.clone()),
        err("POST", "/agencies", 401, "INVALID_API_KEY")
            .auth(Credential::WrongKey)
            .json(acme2.clone()),
        err("POST", "/agencies", 401, "INVALID_API_KEY")
            .auth(Credential::Bearer("Basic abc".into()))
            .json(acme2.clone()),
        ok("POST", "/agencies", 201).json(acme2),
        ok("POST", "/agencies", 200)
            .json(json!({ "platformAgencyId": " acme-2 ", "name": "Acme 2" })),
        ok("POST", "/agencies", 200)
            .json(json!({ "platformAgencyId": "acme-1", "name": "Acme Insurance" })),
        bad("POST", "/agencies").json(json!({})),
        bad("POST", "/agencies").json(json!({ "platformAgencyId": null, "name": "A" })),
        bad("POST", "/agencies").json(json!({ "platformAgencyId": "acme-3" })),
        bad("POST", "/agencies").json(json!({ "platformAgencyId": "svc_agency_x", "name": "A" })),
        bad("POST", "/agencies").json(json!({ "platformAgencyId": "svc_agent_x", "name": "A" })),
        bad("POST", "/agencies").json(json!({ "platformAgencyId": "acme-3", "name": "   " })),
        bad("POST", "/agencies")
            .json(json!({ "platformAgencyId": "acme-3", "name": "A", "extra": 1 })),
        bad("POST", "/agencies").json(json!({ "platformAgencyId": 3, "name": "A" })),
        bad("POST", "/agencies").json(json!([])),
        bad("POST", "/agencies").raw("{not json", "application/json"),
        bad("POST", "/agencies").raw(r#"{"platformAgencyId":"acme-3","name":"A"}"#, "text/plain"),
        bad("POST", "/agencies"),
    ]
}

fn agents() -> Vec<Row> {
    let new = |handle: &str, value: &str| {
        let mut body =
            json!({ "firstName": "Lee", "lastName": "Park", "platformAgencyId": "acme-1" });
        body[handle] = json!(value);
        body
    };
    vec![
        err("POST", "/agents", 401, "INVALID_API_KEY").auth(Credential::WrongKey).json(new("npn", "55501234")),
        bad("POST", "/agents").json(json!({})),
        ok("POST", "/agents", 201).json(new("platformAgentId", "rep-2001")),
        ok("POST", "/agents", 201).json(json!({ "firstName": "Kim", "lastName": "Lo", "npn": "555-0199", "agencyId": "{agencyId}" })),
        err("POST", "/agents", 409, "AGENT_ALREADY_EXISTS").json(new("platformAgentId", "rep-1001")),
        err("POST", "/agents", 409, "AGENT_ALREADY_EXISTS").json(new("email", "DANA.REYES@acme.example")),
        err("POST", "/agents", 409, "AGENT_ALREADY_EXISTS").json(new("npn", "8765-4321")),
        // Emails fold case with Unicode's lowercase mapping, not ASCII's only.
        ok("POST", "/agents", 201).json(new("email", "äda@x.example")),
        err("POST", "/agents", 409, "AGENT_ALREADY_EXISTS").json(new("email", "ÄDA@X.EXAMPLE")),
        ok("GET", "/agents?email=ÄDA@X.EXAMPLE", 200),
        err("POST", "/agents", 404, "AGENCY_NOT_FOUND").json(json!({ "firstName": "A", "lastName": "B", "npn": "4444", "platformAgencyId": "never-created" })),
        err("POST", "/agents", 404, "AGENCY_NOT_FOUND").json(json!({ "firstName": "A", "lastName": "B", "npn": "4444", "agencyId": "svc_agency_of_another_tenant" })),
        bad("POST", "/agents").json(new("platformAgentId", "svc_agent_x")),
        bad("POST", "/agents").json(json!({ "firstName": "A", "lastName": "B", "platformAgencyId": "acme-1" })),
        bad("POST", "/agents").json(json!({ "firstName": "A", "lastName": "B", "npn": "4444" })),
        bad("POST", "/agents").json(json!({ "firstName": "A", "lastName": "B", "npn": "4444", "platformAgencyId": "acme-1", "agencyId": "{agencyId}" })),
        bad("POST", "/agents").json(json!({ "firstName": "A", "lastName": "B", "npn": 4444, "platformAgencyId": "acme-1" })),
        bad("POST", "/agents").json(new("npn", "12")),
        bad("POST", "/agents").json(new("email", "not-an-email")),
        bad("POST", "/agents").json(new("platformAgentId", "  ")),
        bad("POST", "/agents").json(json!({ "lastName": "B", "npn": "4444", "platformAgencyId": "acme-1" })),
        bad("POST", "/agents").json(json!({ "firstName": "A", "lastName": "B", "npn": "4444", "platformAgencyId": "acme-1", "phone": "1" })),
    ]
}

fn lookups() -> Vec<Row> {
    vec![
        err("GET", "/agents", 401, "INVALID_API_KEY").auth(Credential::WrongKey),
        err("GET", "/agents", 401, "INVALID_API_KEY").auth(Credential::None),
        ok("GET", "/agents", 200),
        ok("GET", "/agents?npn=12-345-678", 200),
        ok("GET", "/agents?email=Dana.Reyes@ACME.example", 200),
        ok("GET", "/agents?platformAgentId=rep-1001", 200),
        ok("GET", "/agents?agentId={agentId}", 200),
        ok("GET", "/agents?agencyId={agencyId}", 200),
        ok("GET", "/agents?agencyId={agencyId}&npn=12345678", 200),
        ok("GET", "/agents?platformAgentId=nobody", 200),
        ok("GET", "/agents?agentId=svc_agent_unknown", 200),
        ok("GET", "/agents?limit=1", 200),
        ok("GET", "/agents?limit=100", 200),
        ok("GET", "/agents?limit=1&cursor={agentsCursor}", 200),
        err(
            "GET",
            "/agents?agencyId=svc_agency_of_another_tenant",
            404,
            "AGENCY_NOT_FOUND",
        ),
        bad("GET", "/agents?npn=12345678&email=dana.reyes@acme.example"),
        bad("GET", "/agents?agentId={agentId}&platformAgentId=rep-1001"),
        bad("GET", "/agents?npn=12"),
        bad("GET", "/agents?npn=12345678901"),
        bad("GET", "/agents?platformAgentId=svc_agent_x"),
        bad("GET", "/agents?limit=0"),
        bad("GET", "/agents?limit=101"),
        bad("GET", "/agents?limit=ten"),
        bad("GET", "/agents?cursor=zzz"),
        bad("GET", "/agents?agencyId={agencyId}&cursor={agentsCursor}"),
        bad("GET", "/agents?page=2"),
    ]
}

fn mint() -> Vec<Row> {
    vec![
        err("POST", "/session", 401, "INVALID_API_KEY")
            .auth(Credential::WrongKey)
            .json(json!({ "platformAgentId": "rep-1001" })),
        ok("POST", "/session", 200).json(json!({ "platformAgentId": "rep-1001" })),
        ok("POST", "/session", 200).json(json!({ "agentId": "{agentId}" })),
        ok("POST", "/session", 200)
            .json(json!({ "externalUserId": "rep-1001", "externalAgencyId": "acme-1" })),
        ok("POST", "/session", 200)
            .json(json!({ "platformAgentId": " rep-1001 ", "externalAgencyId": "acme-1" })),
        err("POST", "/session", 404, "AGENT_NOT_FOUND")
            .json(json!({ "email": "dana.reyes@acme.example" })),
        err("POST", "/session", 404, "AGENT_NOT_FOUND").json(json!({ "npn": "12345678" })),
        err("POST", "/session", 404, "AGENT_NOT_FOUND")
            .json(json!({ "platformAgentId": "nobody" })),
        err("POST", "/session", 404, "AGENT_NOT_FOUND")
            .json(json!({ "agentId": "svc_agent_unknown" })),
        bad("POST", "/session").json(json!({})),
        bad("POST", "/session")
            .json(json!({ "platformAgentId": "rep-1001", "agentId": "{agentId}" })),
        bad("POST", "/session").json(json!({ "platformAgentId": "svc_agent_x" })),
        bad("POST", "/session").json(json!({ "platformAgentId": "rep-1001", "role": "admin" })),
        bad("POST", "/session").json(json!({ "externalUserId": "" })),
    ]
}

fn redeem() -> Vec<Row> {
    let drill = json!({ "drillKey": "ma-full-sale" });
    vec![
        err("POST", "/roleplay/session", 401, "INVALID_TOKEN").auth(Credential::None).json(drill.clone()),
        err("POST", "/roleplay/session", 401, "INVALID_TOKEN").auth(Credential::Bearer("not.a.token".into())).json(drill.clone()),
        err("POST", "/roleplay/session", 401, "INVALID_TOKEN").auth(Credential::Key).json(drill.clone()),
        ok("POST", "/roleplay/session", 200).auth(Credential::FreshToken).json(drill.clone()),
        ok("POST", "/roleplay/session", 200).auth(Credential::FreshToken).json(json!({ "drillKey": "ma-full-sale", "difficulty": "Elite", "filters": { "state": "TX", "category": null } })),
        err("POST", "/roleplay/session", 401, "TOKEN_ALREADY_USED").auth(Credential::SpentToken).json(drill.clone()),
        err("POST", "/roleplay/session", 400, "DRILL_NOT_FOUND").auth(Credential::FreshToken).json(json!({ "drillKey": "no-such-drill" })),
        err("POST", "/roleplay/session", 503, "SERVICE_UNAVAILABLE").auth(Credential::FreshToken).json(json!({ "drillKey": "fe-closing" })),
        bad("POST", "/roleplay/session").auth(Credential::FreshToken).json(json!({})),
        bad("POST", "/roleplay/session").auth(Credential::FreshToken).json(json!({ "drillKey": "ma-full-sale", "difficulty": "Hard" })),
        bad("POST", "/roleplay/session").auth(Credential::FreshToken).json(json!({ "drillKey": "ma-full-sale", "filters": { "zip": "73301" } })),
        bad("POST", "/roleplay/session").auth(Credential::FreshToken).json(json!({ "drillKey": "ma-full-sale", "filters": "TX" })),
        bad("POST", "/roleplay/session").auth(Credential::FreshToken).raw("drillKey=ma-full-sale", "application/x-www-form-urlencoded"),
    ]
}

/// Section 7: a token refused before redemption (`INVALID_REQUEST`) stays unspent; one that
/// reached redemption (`DRILL_NOT_FOUND`, `SERVICE_UNAVAILABLE`) is spent.
fn token_spending() -> Vec<Row> {
    let drill = json!({ "drillKey": "ma-full-sale" });
    vec![
        ok("POST", "/roleplay/session", 200)
            .auth(Credential::TokenAfter("{}".into()))
            .json(drill.clone()),
        ok("POST", "/roleplay/session", 200)
            .auth(Credential::TokenAfter(
                r#"{"drillKey":"ma-full-sale","difficulty":"Hard"}"#.into(),
            ))
            .json(drill.clone()),
        err("POST", "/roleplay/session", 401, "TOKEN_ALREADY_USED")
            .auth(Credential::TokenAfter(
                r#"{"drillKey":"no-such-drill"}"#.into(),
            ))
            .json(drill.clone()),
        err("POST", "/roleplay/session", 401, "TOKEN_ALREADY_USED")
            .auth(Credential::TokenAfter(
                r#"{"drillKey":"hi-crosssell"}"#.into(),
            ))
            .json(drill),
    ]
}

fn calls() -> Vec<Row> {
    vec![
        err("GET", CALLS, 401, "INVALID_API_KEY").auth(Credential::WrongKey),
        err("GET", "/calls/{roleplayCallId}", 401, "INVALID_API_KEY").auth(Credential::None),
        ok("GET", CALLS, 200),
        ok(
            "GET",
            "/calls?source=real_call&from=2026-01-01T00:00:00Z",
            200,
        ),
        ok(
            "GET",
            "/calls?source=roleplay&from=2026-01-15T10:12:30Z&to=2026-01-15T10:12:30Z",
            200,
        ),
        ok(
            "GET",
            "/calls?source=real_call&from=2026-01-16T14:00:01Z",
            200,
        ),
        ok(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T01:00:00%2B01:00",
            200,
        ),
        ok(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&limit=1",
            200,
        ),
        ok(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&limit=1&cursor={callsCursor}",
            200,
        ),
        ok(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&agentId={agentId}",
            200,
        ),
        ok(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&agencyId={agencyId}",
            200,
        ),
        ok(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&platformAgentId=rep-1001",
            200,
        ),
        ok(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&platformAgentId=nobody",
            200,
        ),
        ok(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&platformAgencyId=nowhere",
            200,
        ),
        err(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&agentId=svc_agent_unknown",
            404,
            "AGENT_NOT_FOUND",
        ),
        err(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&agencyId=svc_agency_unknown",
            404,
            "AGENCY_NOT_FOUND",
        ),
        bad("GET", "/calls?source=bogus&from=2026-01-01T00:00:00Z"),
        bad("GET", "/calls?from=2026-01-01T00:00:00Z"),
        bad("GET", "/calls?source=roleplay"),
        bad("GET", "/calls?source=roleplay&from=yesterday"),
        bad("GET", "/calls?source=roleplay&from=2026-01-01"),
        bad(
            "GET",
            "/calls?source=roleplay&from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z",
        ),
        bad(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&limit=0",
        ),
        bad(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&limit=500",
        ),
        bad(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&limit=1.5",
        ),
        bad(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&cursor=zzz",
        ),
        bad(
            "GET",
            "/calls?source=real_call&from=2026-01-01T00:00:00Z&cursor={callsCursor}",
        ),
        bad(
            "GET",
            "/calls?source=roleplay&from=2026-01-02T00:00:00Z&cursor={callsCursor}",
        ),
        bad(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&agentId={agentId}&platformAgentId=rep-1001",
        ),
        bad(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&agencyId={agencyId}&platformAgencyId=acme-1",
        ),
        bad(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&platformAgentId=svc_agent_x",
        ),
        bad(
            "GET",
            "/calls?source=roleplay&from=2026-01-01T00:00:00Z&page=2",
        ),
        ok("GET", "/calls/{roleplayCallId}", 200),
        ok("GET", "/calls/{realCallId}", 200),
        err("GET", "/calls/svc_call_unknown", 404, "CALL_NOT_FOUND"),
        err("GET", "/calls/svc_call_unknown", 401, "INVALID_API_KEY").auth(Credential::WrongKey),
    ]
}

/// Every API-key route, with a body that would succeed in the normal tenant.
fn api_key_routes() -> Vec<Row> {
    vec![
        ok("POST", "/agencies", 200).json(json!({ "platformAgencyId": "acme-1", "name": "Acme Insurance" })),
        ok("POST", "/agents", 201).json(json!({ "firstName": "Al", "lastName": "Vo", "npn": "77770000", "platformAgencyId": "acme-1" })),
        ok("GET", "/agents", 200),
        ok("POST", "/session", 200).json(json!({ "platformAgentId": "rep-1001" })),
        ok("GET", CALLS, 200),
        ok("GET", "/calls/{roleplayCallId}", 200),
    ]
}

fn conditions() -> Vec<Row> {
    let mut rows = Vec::new();
    for (condition, status, code) in [
        (Condition::Revoked, 401, "API_KEY_REVOKED"),
        (Condition::Inactive, 403, "TENANT_INACTIVE"),
        (Condition::IpNotAllowed, 403, "IP_NOT_ALLOWED"),
    ] {
        for route in api_key_routes() {
            let refused = route.clone().expect(status, Some(code)).when(condition);
            let wrong_key = route
                .expect(401, Some("INVALID_API_KEY"))
                .auth(Credential::WrongKey)
                .when(condition);
            rows.extend([refused, wrong_key]);
        }
    }
    let quota = Condition::QuotaSpent;
    rows.extend([
        err("POST", "/session", 403, "TENANT_QUOTA_EXCEEDED")
            .json(json!({ "platformAgentId": "rep-1001" }))
            .when(quota),
        ok("GET", "/agents", 200).when(quota),
        ok("GET", CALLS, 200).when(quota),
    ]);
    let expired = Condition::TokenExpired;
    rows.extend([
        err("POST", "/roleplay/session", 401, "TOKEN_EXPIRED")
            .auth(token_before())
            .json(json!({ "drillKey": "ma-full-sale" }))
            .when(expired),
        err("POST", "/roleplay/session", 401, "TOKEN_EXPIRED")
            .auth(token_before())
            .json(json!({}))
            .when(expired),
        ok("POST", "/roleplay/session", 200)
            .auth(Credential::FreshToken)
            .json(json!({ "drillKey": "ma-full-sale" }))
            .when(expired),
    ]);
    // A lockout voids the tokens minted before it (`service/DESIGN.md`, "Lockout").
    for condition in [Condition::Revoked, Condition::Inactive] {
        rows.push(
            err("POST", "/roleplay/session", 401, "INVALID_TOKEN")
                .auth(token_before())
                .json(json!({ "drillKey": "ma-full-sale" }))
                .when(condition),
        );
    }
    // Both sides answer every API-key request 429 (the fixtures' fault, the service's fault
    // injection), with the envelope and Retry-After; a wrong key is still refused first.
    for route in api_key_routes() {
        rows.extend([
            route
                .clone()
                .expect(429, Some("RATE_LIMITED"))
                .when(Condition::RateLimited),
            route
                .expect(401, Some("INVALID_API_KEY"))
                .auth(Credential::WrongKey)
                .when(Condition::RateLimited),
        ]);
    }
    let failing = Condition::InternalError;
    for route in api_key_routes() {
        rows.push(route.expect(500, Some("INTERNAL_ERROR")).when(failing));
    }
    rows.push(
        err("POST", "/roleplay/session", 500, "INTERNAL_ERROR")
            .auth(Credential::Bearer("any".into()))
            .json(json!({ "drillKey": "ma-full-sale" }))
            .when(failing)
            .skip_service(
                "the service's fault injection takes the API-key routes only; the fixture side is faults::error(server, \"INTERNAL_ERROR\")",
            ),
    );
    rows
}
