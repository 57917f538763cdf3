//! Real-call attribution (contract section 2): the call is given to a registered agent of the
//! record's agency (a rep of another agency is never found), trying the handles in order:
//! 1. NPN, compared by digits;
//! 2. `platformAgentId`, the dialer's `agentId`, unless the agency dials through a third-party
//!    platform (its agent ids are outside the tenant's namespace);
//! 3. email (case-insensitive), only when the registered first or last name appears, as whole
//!    words, in the name the dialer sends;
//! 4. full name ("first last", case and spacing ignored), only when exactly one agent of the
//!    agency has it.

use crate::db::Candidate;

use super::record::Rep;

/// The handle a call was attributed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchedOn {
    /// NPN.
    Npn,
    /// The tenant's agent id.
    PlatformAgentId,
    /// Email, with the name check.
    Email,
    /// Full name.
    FullName,
}

/// The agent of `candidates` (the agency's agents) the call belongs to, and on which handle.
pub fn attribute<'a>(
    rep: &Rep,
    candidates: &'a [Candidate],
    third_party_dialer: bool,
) -> Option<(&'a Candidate, MatchedOn)> {
    let npn = rep.npn.as_deref().map(digits).filter(|d| !d.is_empty());
    if let Some(npn) = npn
        && let Some(found) = candidates.iter().find(|c| c.npn.as_deref() == Some(&npn))
    {
        return Some((found, MatchedOn::Npn));
    }
    let agent_id = rep
        .agent_id
        .as_deref()
        .map(str::trim)
        .filter(|id| !id.is_empty());
    if !third_party_dialer
        && let Some(agent_id) = agent_id
        && let Some(found) = candidates
            .iter()
            .find(|c| c.platform_agent_id.as_deref() == Some(agent_id))
    {
        return Some((found, MatchedOn::PlatformAgentId));
    }
    let name = rep.name.as_deref().map(words).unwrap_or_default();
    let email = rep.email.as_deref().map(|e| e.trim().to_lowercase());
    if let Some(email) = email.filter(|e| !e.is_empty())
        && let Some(found) = candidates
            .iter()
            .find(|c| c.email_lower.as_deref() == Some(email.as_str()))
        && (contains_words(&name, &words(&found.first_name))
            || contains_words(&name, &words(&found.last_name)))
    {
        return Some((found, MatchedOn::Email));
    }
    if name.is_empty() {
        return None;
    }
    let mut same_name = candidates
        .iter()
        .filter(|c| words(&format!("{} {}", c.first_name, c.last_name)) == name);
    match (same_name.next(), same_name.next()) {
        (Some(found), None) => Some((found, MatchedOn::FullName)),
        _ => None,
    }
}

fn digits(text: &str) -> String {
    text.chars().filter(char::is_ascii_digit).collect()
}

/// The lowercase words of a name.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `needle` (non-empty) appears as consecutive words of `haystack`.
fn contains_words(haystack: &[String], needle: &[String]) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(
        id: &str,
        first: &str,
        last: &str,
        email: &str,
        npn: &str,
        platform: &str,
    ) -> Candidate {
        let some = |v: &str| (!v.is_empty()).then(|| v.to_owned());
        Candidate {
            id: id.into(),
            first_name: first.into(),
            last_name: last.into(),
            email_lower: some(&email.to_lowercase()),
            npn: some(npn),
            platform_agent_id: some(platform),
        }
    }

    fn roster() -> Vec<Candidate> {
        vec![
            agent(
                "a1",
                "Ada",
                "Lovelace",
                "ada@example.com",
                "1234567",
                "rep-ada",
            ),
            agent(
                "a2",
                "Grace",
                "Hopper",
                "grace@example.com",
                "",
                "rep-grace",
            ),
            agent("a3", "Alan", "Turing", "", "7654321", ""),
            agent("a4", "Kim", "Lee", "", "", ""),
            agent("a5", "Kim", "Lee", "", "", ""),
        ]
    }

    fn rep(npn: &str, agent_id: &str, email: &str, name: &str) -> Rep {
        let some = |v: &str| (!v.is_empty()).then(|| v.to_owned());
        Rep {
            npn: some(npn),
            agent_id: some(agent_id),
            email: some(email),
            name: some(name),
        }
    }

    fn found(rep: &Rep, third_party: bool) -> Option<(String, MatchedOn)> {
        let roster = roster();
        attribute(rep, &roster, third_party).map(|(c, on)| (c.id.clone(), on))
    }

    #[test]
    fn handles_are_tried_in_the_contracts_order() {
        assert_eq!(
            found(&rep("123-4567", "rep-grace", "", ""), false),
            Some(("a1".into(), MatchedOn::Npn))
        );
        assert_eq!(
            found(&rep("", "rep-grace", "ada@example.com", "Ada"), false),
            Some(("a2".into(), MatchedOn::PlatformAgentId))
        );
        assert_eq!(
            found(&rep("", "", "ADA@example.com", "Ada X"), false),
            Some(("a1".into(), MatchedOn::Email))
        );
        assert_eq!(
            found(&rep("", "", "", "  alan   TURING "), false),
            Some(("a3".into(), MatchedOn::FullName))
        );
    }

    #[test]
    fn an_email_match_needs_a_registered_name_in_the_dialers_name() {
        assert_eq!(
            found(&rep("", "", "grace@example.com", "G. Smith"), false),
            None
        );
        assert_eq!(
            found(&rep("", "", "grace@example.com", "Hopper"), false),
            Some(("a2".into(), MatchedOn::Email))
        );
        assert_eq!(
            found(&rep("", "", "ada@example.com", "Adaline Smith"), false),
            None,
            "whole words"
        );
    }

    #[test]
    fn a_third_party_dialers_agent_ids_are_never_tried() {
        assert_eq!(found(&rep("", "rep-ada", "", ""), true), None);
        assert_eq!(
            found(&rep("", "rep-ada", "", "Ada Lovelace"), true),
            Some(("a1".into(), MatchedOn::FullName))
        );
    }

    #[test]
    fn unknown_and_ambiguous_reps_are_not_found() {
        assert_eq!(
            found(&rep("999", "nobody", "x@example.com", "Nobody Here"), false),
            None
        );
        assert_eq!(
            found(&rep("", "", "", "Kim Lee"), false),
            None,
            "two agents share the name"
        );
        assert_eq!(found(&Rep::default(), false), None);
    }
}
