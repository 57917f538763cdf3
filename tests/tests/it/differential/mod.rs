//! The differential test of issue 18: one table of requests (valid and invalid, every
//! documented error code of every endpoint, auth failures, routing errors) sent both to the
//! `svc-fixtures` fakes and to the real `svc-service` on port 0, each side seeded with the same
//! tenant (the fixture roster and calls); the two must answer the same status, the same error
//! `code` and bodies of the same shape, each with a fresh `X-Service-Request-Id`, and both must
//! answer what the table says the contract expects.
//!
//! # Layout
//! - `table`: the rows, grouped by endpoint and by tenant condition.
//! - `targets`: the two sides, seeded alike, and how a row's placeholders, credentials and
//!   conditions are resolved on each.
//! - `shape`: the body comparison (keys and value kinds, `null` matching any kind).

mod shape;
mod table;
mod targets;

use serde_json::Value;

use targets::{Reply, Target};

/// The tenant state a row runs in; each condition gets its own pair of targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Condition {
    /// The seeded tenant as is.
    Normal,
    /// The API key was revoked.
    Revoked,
    /// The tenant was deactivated.
    Inactive,
    /// The tenant has an IP allowlist the caller is not on.
    IpNotAllowed,
    /// The monthly allowance is spent.
    QuotaSpent,
    /// A token was minted, then both clocks moved 301 s on.
    TokenExpired,
    /// Every request fails with `500 INTERNAL_ERROR` (the fixtures only).
    InternalError,
}

/// The credential a row sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// The tenant's API key.
    Key,
    /// No `Authorization` header.
    None,
    /// A well-formed key the service never issued.
    WrongKey,
    /// This bearer text as is.
    Raw(&'static str),
    /// A session token minted for `rep-1001` just before.
    FreshToken,
    /// A token minted and redeemed once already.
    SpentToken,
    /// The token minted before the clocks moved ([`Condition::TokenExpired`]).
    ExpiredToken,
    /// A token minted and sent once with this redeem body first (whatever it answered): the
    /// contract says which first answers leave it spent.
    TokenAfter(&'static str),
}

/// A request body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Body {
    None,
    /// JSON; `{placeholders}` inside strings are resolved per target.
    Json(Value),
    /// Raw text with this content type.
    Raw(&'static str, &'static str),
}

/// One request and what the contract says it answers.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) when: Condition,
    pub(crate) method: &'static str,
    /// Relative to the base URL, query included; `{placeholders}` resolved per target.
    pub(crate) path: &'static str,
    pub(crate) auth: Auth,
    pub(crate) body: Body,
    pub(crate) status: u16,
    /// The error code, `None` on success.
    pub(crate) code: Option<&'static str>,
    /// Sent from a browser page: with an `Origin` (and, on `OPTIONS`, the preflight's
    /// request headers).
    pub(crate) cross_origin: bool,
    /// Why the service is not asked (it disagrees with the contract, or cannot be made to
    /// answer this): the fixtures alone are checked against the row.
    pub(crate) skip_service: Option<&'static str>,
}

impl Row {
    fn label(&self) -> String {
        format!(
            "[{:?}] {} {} ({:?}, {:?}) → {} {}",
            self.when,
            self.method,
            self.path,
            self.auth,
            self.body,
            self.status,
            self.code.unwrap_or("")
        )
    }
}

/// What is wrong with one reply, measured against the row.
fn check_reply(row: &Row, side: &str, reply: &Reply, problems: &mut Vec<String>) {
    let label = row.label();
    let code = reply.body["error"]["code"].as_str();
    if reply.status != row.status || code != row.code {
        problems.push(format!(
            "{label}: {side} answered {} {code:?}: {}",
            reply.status, reply.body
        ));
    }
    let cors_expected = row.cross_origin && row.path == "/roleplay/session";
    if row.cross_origin && reply.allow_origin.is_some() != cors_expected {
        problems.push(format!(
            "{label}: {side}: Access-Control-Allow-Origin {:?}",
            reply.allow_origin
        ));
    }
    match &reply.request_id {
        Some(id) if id.starts_with("req_") => {
            if reply.status >= 400 && reply.body["error"]["requestId"] != id.as_str() {
                problems.push(format!("{label}: {side}: requestId is not the header {id}"));
            }
        }
        other => problems.push(format!("{label}: {side}: X-Service-Request-Id {other:?}")),
    }
}

#[tokio::test]
async fn the_fixtures_answer_every_row_of_the_table_as_the_service_does() {
    let rows = table::rows();
    let mut problems = Vec::new();
    let mut compared = 0;
    let conditions = [
        Condition::Normal,
        Condition::Revoked,
        Condition::Inactive,
        Condition::IpNotAllowed,
        Condition::QuotaSpent,
        Condition::TokenExpired,
        Condition::InternalError,
    ];
    for condition in conditions {
        let (mut fixture, mut service) = (Target::fixtures().await, Target::service().await);
        fixture.enter(condition).await;
        service.enter(condition).await;
        for row in rows.iter().filter(|r| r.when == condition) {
            let from_fixture = fixture.send(row).await;
            check_reply(row, "fixtures", &from_fixture, &mut problems);
            if row.skip_service.is_some() {
                continue;
            }
            let from_service = service.send(row).await;
            check_reply(row, "service", &from_service, &mut problems);
            for difference in shape::differences(&from_fixture.body, &from_service.body) {
                problems.push(format!("{}: shape: {difference}", row.label()));
            }
            compared += 1;
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    assert!(compared >= 170, "only {compared} rows compared");
}

#[test]
fn the_table_covers_every_documented_error_code_of_every_endpoint() {
    let rows = table::rows();
    let documented: [(&str, &str, &[&str]); 7] = [
        (
            "POST",
            "/agencies",
            &[
                "INVALID_REQUEST",
                "INVALID_API_KEY",
                "API_KEY_REVOKED",
                "TENANT_INACTIVE",
                "IP_NOT_ALLOWED",
            ],
        ),
        (
            "POST",
            "/agents",
            &[
                "INVALID_REQUEST",
                "INVALID_API_KEY",
                "API_KEY_REVOKED",
                "TENANT_INACTIVE",
                "IP_NOT_ALLOWED",
                "AGENCY_NOT_FOUND",
                "AGENT_ALREADY_EXISTS",
            ],
        ),
        (
            "GET",
            "/agents",
            &[
                "INVALID_REQUEST",
                "INVALID_API_KEY",
                "API_KEY_REVOKED",
                "TENANT_INACTIVE",
                "IP_NOT_ALLOWED",
                "AGENCY_NOT_FOUND",
            ],
        ),
        (
            "POST",
            "/session",
            &[
                "INVALID_REQUEST",
                "INVALID_API_KEY",
                "API_KEY_REVOKED",
                "TENANT_INACTIVE",
                "IP_NOT_ALLOWED",
                "TENANT_QUOTA_EXCEEDED",
                "AGENT_NOT_FOUND",
            ],
        ),
        (
            "POST",
            "/roleplay/session",
            &[
                "INVALID_REQUEST",
                "DRILL_NOT_FOUND",
                "INVALID_TOKEN",
                "TOKEN_EXPIRED",
                "TOKEN_ALREADY_USED",
                "SERVICE_UNAVAILABLE",
                "INTERNAL_ERROR",
            ],
        ),
        (
            "GET",
            "/calls?",
            &[
                "INVALID_REQUEST",
                "INVALID_API_KEY",
                "API_KEY_REVOKED",
                "TENANT_INACTIVE",
                "IP_NOT_ALLOWED",
                "AGENT_NOT_FOUND",
                "AGENCY_NOT_FOUND",
            ],
        ),
        (
            "GET",
            "/calls/",
            &[
                "INVALID_API_KEY",
                "API_KEY_REVOKED",
                "TENANT_INACTIVE",
                "IP_NOT_ALLOWED",
                "CALL_NOT_FOUND",
            ],
        ),
    ];
    let mut missing = Vec::new();
    for (method, prefix, codes) in documented {
        for code in codes {
            let covered = rows.iter().any(|r| {
                r.method == method
                    && r.code == Some(*code)
                    && (r.path == prefix.trim_end_matches('?') || r.path.starts_with(prefix))
            });
            if !covered {
                missing.push(format!("{method} {prefix} {code}"));
            }
        }
        let success = rows.iter().any(|r| {
            r.method == method
                && r.code.is_none()
                && r.path.starts_with(prefix.trim_end_matches('?'))
        });
        if !success {
            missing.push(format!("{method} {prefix} success"));
        }
    }
    assert!(missing.is_empty(), "rows missing for: {missing:?}");
}
