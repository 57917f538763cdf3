//! The differential test of issues 18 and 26: one table of requests (valid and invalid, every
//! documented error code of every endpoint, auth failures, routing errors, `HEAD`, the tenant
//! conditions) sent both to the `svc-fixtures` fakes and to the real `svc-service` on port 0,
//! each side seeded with the same tenant (the fixture roster and calls). It runs on the
//! harness `svc-fixtures` offers tenants (`svc_fixtures::differential`): the two must answer
//! what the table says the contract expects, with bodies of the same shape, a fresh
//! `X-Service-Request-Id`, the same `Allow` on a 405 and `Retry-After` on a 429.
//!
//! # Layout
//! - `table`: the rows, grouped by endpoint and by tenant condition.
//! - `targets`: the two sides, seeded alike, and how each enters a tenant condition.

mod table;
mod targets;

use svc_fixtures::differential::{Differential, Probe, Report};

use targets::Side;

/// The tenant state a row runs in; each condition gets its own pair of sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Condition {
    /// The seeded tenant as is.
    Normal,
    /// The API key was revoked (after a token was minted).
    Revoked,
    /// The tenant was deactivated (after a token was minted).
    Inactive,
    /// The tenant has an IP allowlist the caller is not on.
    IpNotAllowed,
    /// The monthly allowance is spent.
    QuotaSpent,
    /// A token was minted, then both clocks moved 301 s on.
    TokenExpired,
    /// Every API-key request is answered `429 RATE_LIMITED` (the service's fault injection).
    RateLimited,
    /// Every API-key request fails with `500 INTERNAL_ERROR` (the service's fault injection).
    InternalError,
}

/// One request of the table, in the condition it runs in.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) when: Condition,
    pub(crate) probe: Probe,
}

#[tokio::test]
async fn the_fixtures_answer_every_row_of_the_table_as_the_service_does() {
    let rows = table::rows();
    let mut report = Report::default();
    let conditions = [
        Condition::Normal,
        Condition::Revoked,
        Condition::Inactive,
        Condition::IpNotAllowed,
        Condition::QuotaSpent,
        Condition::TokenExpired,
        Condition::RateLimited,
        Condition::InternalError,
    ];
    for condition in conditions {
        let (mut fixtures, mut service) = (Side::fixtures().await, Side::service().await);
        fixtures.enter(condition).await;
        service.enter(condition).await;
        let probes: Vec<Probe> = rows
            .iter()
            .filter(|r| r.when == condition)
            .map(|r| r.probe.clone())
            .collect();
        let mut run = Differential::new(fixtures.target, service.target)
            .run(&probes)
            .await;
        for problem in &mut run.problems {
            problem.probe = format!("[{condition:?}] {}", problem.probe);
        }
        report.merge(run);
    }
    assert!(report.is_clean(), "\n{report}");
    assert!(
        report.compared >= 200,
        "only {} rows compared",
        report.compared
    );
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
            let covered = rows.iter().map(|r| &r.probe).any(|r| {
                r.method() == method
                    && r.expected().and_then(|(_, code)| code) == Some(*code)
                    && (r.path() == prefix.trim_end_matches('?') || r.path().starts_with(prefix))
            });
            if !covered {
                missing.push(format!("{method} {prefix} {code}"));
            }
        }
        let success = rows.iter().map(|r| &r.probe).any(|r| {
            r.method() == method
                && r.expected().is_some_and(|(_, code)| code.is_none())
                && r.path().starts_with(prefix.trim_end_matches('?'))
        });
        if !success {
            missing.push(format!("{method} {prefix} success"));
        }
    }
    assert!(missing.is_empty(), "rows missing for: {missing:?}");
}
