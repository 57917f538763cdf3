//! Executing a validated roster plan: each agency upserted once, then each agent registered with
//! bounded concurrency. Idempotent: `AGENT_ALREADY_EXISTS` whose details name the same agency is
//! "already registered"; naming another agency is a conflict. A failing row never stops others.

use std::collections::HashMap;

use futures_util::{StreamExt, stream};
use indicatif::ProgressBar;
use serde::Serialize;

use super::plan::{Plan, Row};
use crate::client::{
    AgencyId, AgencyRef, AgentId, Client, ClientError, ErrorClass, RegisterAgent, UpsertAgency,
};

/// What happened to one row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Registered now.
    Registered,
    /// Already registered in the same agency (a rerun).
    AlreadyRegistered,
    /// A handle belongs to an agent of another agency.
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
            let existing_agency = e.detail("agencyId").map(AgencyId::from_service);
            let agent_id = e.detail("agentId").map(AgentId::from_service);
            let matched_on = e.detail("matchedOn").unwrap_or("a handle").to_owned();
            if existing_agency.as_ref() == Some(&agency_id) {
                RowResult {
                    agent_id,
                    agency_id: existing_agency,
                    ..RowResult::new(row, Outcome::AlreadyRegistered, None)
                }
            } else {
                let message = format!(
                    "{matched_on} already registered as {} in agency {}",
                    agent_id.as_ref().map_or("?", AgentId::as_str),
                    existing_agency.as_ref().map_or("?", AgencyId::as_str)
                );
                RowResult {
                    agent_id,
                    agency_id: existing_agency,
                    ..RowResult::new(row, Outcome::Conflict, Some(message))
                }
            }
        }
        Err(e) => RowResult {
            agency_id: Some(agency_id),
            ..RowResult::new(row, Outcome::Failed, Some(e.to_string()))
        },
    }
}
