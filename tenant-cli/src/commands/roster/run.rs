//! Executing a validated roster plan: each agency upserted once, then each agent registered with
//! bounded concurrency. Idempotent: `AGENT_ALREADY_EXISTS` for an agent that is the row's rep,
//! every handle and the agency alike, is "already registered"; any other agent holding one of the
//! row's handles is a conflict (see `existing.rs`). A failing row never stops others;
//! a refused key stops the import (see `refusal.rs`).

use std::collections::HashMap;

use futures_util::{StreamExt, stream};
use indicatif::ProgressBar;
use serde::Serialize;

use super::existing::{self, Verdict};
use super::plan::{Plan, Row};
use super::refusal::Refusal;
use svc_client::{
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
    /// Valid but not sent: the import stopped when the key was refused.
    NotSent,
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
            Self::NotSent => "not_sent",
            Self::WouldRegister => "would_register",
        }
    }

    /// Whether the row counts as a failure for the exit code.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            Self::Conflict | Self::Invalid | Self::Failed | Self::NotSent
        )
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
    /// For a row failed by a request: how that error is classed ([`ErrorClass::Temporary`] is
    /// worth a rerun later).
    pub error_class: Option<ErrorClass>,
}

impl RowResult {
    pub(super) fn new(row: Row, outcome: Outcome, message: Option<String>) -> Self {
        Self {
            row,
            outcome,
            agent_id: None,
            agency_id: None,
            message,
            error_class: None,
        }
    }

    /// Whether the row failed only for a reason a later rerun can clear.
    pub fn failed_temporarily(&self) -> bool {
        self.outcome == Outcome::Failed && self.error_class == Some(ErrorClass::Temporary)
    }
}

/// An import stopped by the key being refused: the refusal, and every row's result (rows not sent
/// are [`Outcome::NotSent`]).
#[derive(Debug)]
pub struct Stopped {
    /// The first authentication or authorisation error.
    pub cause: ClientError,
    /// Every valid row's result.
    pub results: Vec<RowResult>,
}

/// Upserts the agencies, then registers the rows. A failing row never stops the others, but a
/// refused key (401/403) stops the import: nothing more is sent once a request is refused.
///
/// # Errors
/// [`Stopped`] when the key was refused, with the results so far.
pub async fn execute(
    client: &Client,
    plan: Plan,
    jobs: usize,
    bar: &ProgressBar,
) -> Result<Vec<RowResult>, Stopped> {
    let refusal = &Refusal::default();
    let agencies = &upsert_agencies(client, plan.agencies, jobs, refusal).await;
    let results = stream::iter(plan.valid)
        .map(|row| async move {
            let agency = row
                .platform_agency_id
                .as_ref()
                .and_then(|p| agencies.get(p))
                .cloned();
            let result = match agency {
                _ if refusal.happened() => not_sent(row),
                Some(Ok(agency_id)) => register(client, row, agency_id, refusal).await,
                Some(Err((e, class))) => RowResult {
                    error_class: Some(class),
                    ..RowResult::new(
                        row,
                        Outcome::Failed,
                        Some(format!("agency not upserted: {e}")),
                    )
                },
                None => RowResult::new(row, Outcome::Failed, Some("agency not upserted".into())),
            };
            bar.inc(1);
            result
        })
        .buffer_unordered(jobs)
        .collect::<Vec<_>>()
        .await;
    match refusal.take() {
        None => Ok(results),
        Some(cause) => Err(Stopped { cause, results }),
    }
}

/// Creates or renames each agency once: its service id, or why it failed and how that error is
/// classed. Nothing is sent once the key is refused.
async fn upsert_agencies(
    client: &Client,
    agencies: Vec<(String, String)>,
    jobs: usize,
    refusal: &Refusal,
) -> HashMap<String, Result<AgencyId, (String, ErrorClass)>> {
    stream::iter(agencies)
        .map(|(platform_agency_id, name)| async move {
            if refusal.happened() {
                let not_sent = ("not sent".to_owned(), ErrorClass::Auth);
                return (platform_agency_id, Err(not_sent));
            }
            let body = UpsertAgency {
                platform_agency_id: platform_agency_id.clone(),
                name,
            };
            let result = client.upsert_agency(&body).await.map_or_else(
                |e| {
                    let failure = (e.to_string(), e.class());
                    refusal.note(e);
                    Err(failure)
                },
                |upserted| Ok(upserted.agency.id),
            );
            (platform_agency_id, result)
        })
        .buffer_unordered(jobs)
        .collect()
        .await
}

/// A row left unsent because the key was refused.
fn not_sent(row: Row) -> RowResult {
    let message = "not sent: the import stopped when the API key was refused";
    RowResult::new(row, Outcome::NotSent, Some(message.into()))
}

async fn register(client: &Client, row: Row, agency_id: AgencyId, refusal: &Refusal) -> RowResult {
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
            already_exists(client, row, agency_id, &e, refusal).await
        }
        Err(e) => failed_by(row, agency_id, e.to_string(), e, refusal),
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
    refusal: &Refusal,
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
            Ok(Some(agent)) => (
                existing::compare(&row, matched_on, &agent, &agency_id),
                Some(agent.agency_id),
            ),
            Ok(None) => {
                let message = format!(
                    "the service names {agent_id} as holding a handle of this row but does not \
                     list it"
                );
                return failed(row, agency_id, message);
            }
            Err(e) => {
                let message =
                    format!("cannot look up {agent_id}, which holds a handle of this row: {e}");
                return failed_by(row, agency_id, message, e, refusal);
            }
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
async fn existing_agent(client: &Client, agent_id: &AgentId) -> Result<Option<Agent>, ClientError> {
    let query = AgentQuery {
        handle: Some(AgentHandle::AgentId(agent_id.clone())),
        ..AgentQuery::default()
    };
    let page = client.agents_page(&query, None).await?;
    Ok(page.data.into_iter().find(|a| &a.id == agent_id))
}

/// A row that was sent and failed with `error`, which the import stops at if it is a refusal.
fn failed_by(
    row: Row,
    agency_id: AgencyId,
    message: String,
    error: ClientError,
    refusal: &Refusal,
) -> RowResult {
    let error_class = Some(error.class());
    refusal.note(error);
    RowResult {
        error_class,
        ..failed(row, agency_id, message)
    }
}

/// A row that was sent and failed.
fn failed(row: Row, agency_id: AgencyId, message: String) -> RowResult {
    RowResult {
        agency_id: Some(agency_id),
        ..RowResult::new(row, Outcome::Failed, Some(message))
    }
}
