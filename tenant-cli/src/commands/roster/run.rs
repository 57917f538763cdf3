//! Executing a validated roster plan: each agency upserted once, then each agent registered with
//! bounded concurrency. Idempotent: `AGENT_ALREADY_EXISTS` for an agent that is the row's rep,
//! every handle and the agency alike, is "already registered"; any other agent holding one of the
//! row's handles is a conflict ([`existing`](super::existing)). A failing row never stops others.

use std::collections::HashMap;

use futures_util::{StreamExt, stream};
use indicatif::ProgressBar;
use serde::Serialize;

use super::existing::{self, Verdict};
use super::plan::{Plan, Row};
use crate::client::{
    AgencyId, AgencyRef, Agent, AgentHandle, AgentId, AgentQuery, ApiError, Client, ClientError,
    ErrorClass, RegisterAgent, UpsertAgency,
};

/// What happened to one row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Registered now.
    Registered,
    /// Already registered, every handle of the row, in the same agency (a rerun).
    AlreadyRegistered,
    /// A handle of the row belongs to another agent, or to this rep in another agency.
    Conflict,
    /// Not sent: the row failed validation.
    Invalid,
    /// Sent and rejected, or the agency could not be upserted.
    Failed,
    /// `--dry-run`: valid and would be sent.
    WouldRegister,
}

impl Outcome {
    /// The report's spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Registered => "registered",
            Self::AlreadyRegistered => "already_registered",
            Self::Conflict => "conflict",
            Self::Invalid => "invalid",
            Self::Failed => "failed",
            Self::WouldRegister => "would_register",
        }
    }

    /// Whether the row counts as a failure for the exit code.
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Conflict | Self::Invalid | Self::Failed)
    }
}

/// One row's result.
#[derive(Debug, Clone)]
pub struct RowResult {
    /// The row.
    pub row: Row,
    /// What happened.
    pub outcome: Outcome,
    /// The agent's service id, when known.
    pub agent_id: Option<AgentId>,
    /// The agency's service id, when known.
    pub agency_id: Option<AgencyId>,
    /// Why, for anything but success.
    pub message: Option<String>,
}

impl RowResult {
    pub(super) fn new(row: Row, outcome: Outcome, message: Option<String>) -> Self {
        Self {
            row,
            outcome,
            agent_id: None,
            agency_id: None,
            message,
        }
    }
}

/// Upserts the agencies, then registers the rows. An authentication error on the agencies
/// aborts the import (nothing else can succeed with that credential).
///
/// # Errors
/// The first authentication/authorisation error.
pub async fn execute(
    client: &Client,
    plan: Plan,
    jobs: usize,
    bar: &ProgressBar,
) -> Result<Vec<RowResult>, ClientError> {
    let upserts = stream::iter(plan.agencies.clone())
        .map(|(platform_agency_id, name)| async move {
            let result = client
                .upsert_agency(&UpsertAgency {
                    platform_agency_id: platform_agency_id.clone(),
                    name,
                })
                .await;
            (platform_agency_id, result)
        })
        .buffer_unordered(jobs)
        .collect::<Vec<_>>()
        .await;
    let mut agencies: HashMap<String, Result<AgencyId, String>> = HashMap::new();
    for (platform_agency_id, result) in upserts {
        match result {
            Ok(upserted) => agencies.insert(platform_agency_id, Ok(upserted.agency.id)),
            Err(e) if e.class() == ErrorClass::Auth => return Err(e),
            Err(e) => agencies.insert(platform_agency_id, Err(e.to_string())),
        };
    }
    let agencies = &agencies;
    let results = stream::iter(plan.valid)
        .map(|row| async move {
            let agency = row
                .platform_agency_id
                .as_ref()
                .and_then(|p| agencies.get(p))
                .cloned();
            let result = match agency {
                Some(Ok(agency_id)) => register(client, row, agency_id).await,
                Some(Err(e)) => RowResult::new(
                    row,
                    Outcome::Failed,
                    Some(format!("agency not upserted: {e}")),
                ),
                None => RowResult::new(row, Outcome::Failed, Some("agency not upserted".into())),
            };
            bar.inc(1);
            result
        })
        .buffer_unordered(jobs)
        .collect::<Vec<_>>()
        .await;
    Ok(results)
}

async fn register(client: &Client, row: Row, agency_id: AgencyId) -> RowResult {
    let body = RegisterAgent {
        first_name: row.first_name.clone(),
        last_name: row.last_name.clone(),
        email: row.email.clone(),
        npn: row.npn.clone(),
        platform_agent_id: row.platform_agent_id.clone(),
        agency: AgencyRef::Service(agency_id.clone()),
    };
    match client.register_agent(&body).await {
        Ok(registered) => RowResult {
            agent_id: Some(registered.agent.id),
            agency_id: Some(agency_id),
            ..RowResult::new(row, Outcome::Registered, None)
        },
        Err(ClientError::Api(e)) if e.code == "AGENT_ALREADY_EXISTS" => {
            already_exists(client, row, agency_id, &e).await
        }
        Err(e) => failed(row, agency_id, e.to_string()),
    }
}

/// A row the service already holds a handle of: `already_registered` when the agent holding it
/// is the row's rep, else a conflict naming that agent. The 409 names only the first handle that
/// matched, so the agent is looked up unless the row has no other handle.
async fn already_exists(
    client: &Client,
    row: Row,
    agency_id: AgencyId,
    error: &ApiError,
) -> RowResult {
    let matched_on = error.detail("matchedOn");
    let Some(agent_id) = error.detail("agentId").map(AgentId::from_service) else {
        let message = "AGENT_ALREADY_EXISTS without details.agentId: cannot tell whether it is \
                       this rep";
        return failed(row, agency_id, message.into());
    };
    let (verdict, existing_agency) = if existing::settled_by_matched_on(&row, matched_on) {
        let existing_agency = error.detail("agencyId").map(AgencyId::from_service);
        let verdict = existing::by_agency(
            &row,
            matched_on,
            &agent_id,
            existing_agency.as_ref(),
            &agency_id,
        );
        (verdict, existing_agency)
    } else {
        match existing_agent(client, &agent_id).await {
            Ok(agent) => (
                existing::compare(&row, matched_on, &agent, &agency_id),
                Some(agent.agency_id),
            ),
            Err(message) => return failed(row, agency_id, message),
        }
    };
    let (outcome, message) = match verdict {
        Verdict::SameRep => (Outcome::AlreadyRegistered, None),
        Verdict::Conflict(message) => (Outcome::Conflict, Some(message)),
    };
    RowResult {
        agent_id: Some(agent_id),
        agency_id: existing_agency,
        ..RowResult::new(row, outcome, message)
    }
}

/// The agent an `AGENT_ALREADY_EXISTS` named, as the service stores it (`GET /agents?agentId=`).
async fn existing_agent(client: &Client, agent_id: &AgentId) -> Result<Agent, String> {
    let query = AgentQuery {
        handle: Some(AgentHandle::AgentId(agent_id.clone())),
        ..AgentQuery::default()
    };
    let page = client
        .agents_page(&query, None)
        .await
        .map_err(|e| format!("cannot look up {agent_id}, which holds a handle of this row: {e}"))?;
    page.data
        .into_iter()
        .find(|a| &a.id == agent_id)
        .ok_or_else(|| {
            format!(
                "the service names {agent_id} as holding a handle of this row but does not list it"
            )
        })
}

/// A row that was sent and failed.
fn failed(row: Row, agency_id: AgencyId, message: String) -> RowResult {
    RowResult {
        agency_id: Some(agency_id),
        ..RowResult::new(row, Outcome::Failed, Some(message))
    }
}
