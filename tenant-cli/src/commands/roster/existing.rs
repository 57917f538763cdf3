//! Telling a rerun from a clash. `AGENT_ALREADY_EXISTS` names the agent holding the first handle
//! that matched (platformAgentId, then npn, then email) and nothing about the row's other
//! handles, and handles are unique across the tenant, not per agency. So a row is that agent's
//! own registration only when every handle of the row is the agent's and the agency is the
//! row's; anything else means the file and the roster disagree.

use super::plan::{Row, npn_digits};
use svc_client::{AgencyId, Agent, AgentId};

/// What an `AGENT_ALREADY_EXISTS` means for a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The existing agent is this row's rep, in this row's agency: a rerun.
    SameRep,
    /// The existing agent is not this row's registration; the message says why.
    Conflict(String),
}

/// The row's handles as (contract field name, value), in the service's matching order.
fn handles(row: &Row) -> Vec<(&'static str, &str)> {
    [
        ("platformAgentId", &row.platform_agent_id),
        ("npn", &row.npn),
        ("email", &row.email),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.as_deref().map(|v| (name, v)))
    .collect()
}

/// Whether `matchedOn` alone proves that every handle of the row is the existing agent's: the
/// row has one handle and it is the one the service matched.
pub(super) fn settled_by_matched_on(row: &Row, matched_on: Option<&str>) -> bool {
    matches!(handles(row).as_slice(), [(name, _)] if Some(*name) == matched_on)
}

/// The handle the service matched on, as `email "ann@example.com"`, for messages.
fn matched(row: &Row, matched_on: Option<&str>) -> String {
    match handles(row)
        .into_iter()
        .find(|(name, _)| Some(*name) == matched_on)
    {
        Some((name, value)) => format!("{name} {value:?}"),
        None => matched_on.unwrap_or("a handle").to_owned(),
    }
}

/// The verdict when only the service's details are known (the row's one handle matched).
pub(super) fn by_agency(
    row: &Row,
    matched_on: Option<&str>,
    agent_id: &AgentId,
    existing_agency: Option<&AgencyId>,
    row_agency: &AgencyId,
) -> Verdict {
    if existing_agency == Some(row_agency) {
        return Verdict::SameRep;
    }
    Verdict::Conflict(format!(
        "{} already registered as {agent_id} in agency {}",
        matched(row, matched_on),
        existing_agency.map_or("?", AgencyId::as_str)
    ))
}

/// The verdict from the existing agent as the service stores it.
pub(super) fn compare(
    row: &Row,
    matched_on: Option<&str>,
    agent: &Agent,
    row_agency: &AgencyId,
) -> Verdict {
    for (name, ours) in handles(row) {
        let theirs = match name {
            "platformAgentId" => agent.platform_agent_id.as_deref(),
            "npn" => agent.npn.as_deref(),
            _ => agent.email.as_deref(),
        };
        if !same_handle(name, ours, theirs) {
            return Verdict::Conflict(format!(
                "{} already registered as {}, whose {name} is {}, not {ours:?}",
                matched(row, matched_on),
                agent.id,
                theirs.map_or_else(|| "absent".to_owned(), |t| format!("{t:?}"))
            ));
        }
    }
    by_agency(
        row,
        matched_on,
        &agent.id,
        Some(&agent.agency_id),
        row_agency,
    )
}

/// Compares handles the way the service does: NPNs by their digits, emails case-insensitively,
/// every value trimmed.
fn same_handle(name: &str, ours: &str, theirs: Option<&str>) -> bool {
    let Some(theirs) = theirs.map(str::trim) else {
        return false;
    };
    let ours = ours.trim();
    match name {
        "npn" => npn_digits(ours).is_some() && npn_digits(ours) == npn_digits(theirs),
        "email" => ours.to_lowercase() == theirs.to_lowercase(),
        _ => ours == theirs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann() -> Agent {
        Agent {
            id: AgentId::from_service("svc_agent_ann"),
            first_name: "Ann".into(),
            last_name: "Lee".into(),
            email: Some("Ann@Example.com".into()),
            npn: Some("12345".into()),
            platform_agent_id: Some("rep-1".into()),
            agency_id: AgencyId::from_service("svc_agency_1"),
            created_at: "2026-01-10T09:00:00.000Z".into(),
        }
    }

    fn row(email: Option<&str>, npn: Option<&str>, platform_agent_id: Option<&str>) -> Row {
        Row {
            email: email.map(Into::into),
            npn: npn.map(Into::into),
            platform_agent_id: platform_agent_id.map(Into::into),
            ..Row::default()
        }
    }

    #[test]
    fn handles_compare_as_the_service_stores_them() {
        let agency = AgencyId::from_service("svc_agency_1");
        let same = row(Some("ann@example.COM"), Some("123-45"), Some("rep-1"));
        assert_eq!(
            compare(&same, Some("platformAgentId"), &ann(), &agency),
            Verdict::SameRep
        );
    }

    #[test]
    fn a_handle_the_agent_lacks_is_a_conflict() {
        let mut agent = ann();
        agent.npn = None;
        let agency = AgencyId::from_service("svc_agency_1");
        let verdict = compare(
            &row(Some("ann@example.com"), Some("12345"), None),
            Some("email"),
            &agent,
            &agency,
        );
        assert_eq!(
            verdict,
            Verdict::Conflict(
                "email \"ann@example.com\" already registered as svc_agent_ann, whose npn is \
                 absent, not \"12345\""
                    .into()
            )
        );
    }

    #[test]
    fn only_a_single_matched_handle_settles_without_a_lookup() {
        let email_only = row(Some("ann@example.com"), None, None);
        assert!(settled_by_matched_on(&email_only, Some("email")));
        assert!(!settled_by_matched_on(&email_only, Some("npn")));
        assert!(!settled_by_matched_on(&email_only, None));
        let two = row(Some("ann@example.com"), None, Some("rep-4"));
        assert!(!settled_by_matched_on(&two, Some("email")));
    }
}
