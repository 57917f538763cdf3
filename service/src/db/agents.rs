//! Agents: registration with tenant-wide unique handles, lookups and roster pages.

use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};

use super::agencies::{AgencyRecord, agency_by_id, agency_by_platform_id};
use super::{Db, DbError, UniqueKey, unique_violation};
use crate::ids;

/// How a registration names its agency.
#[derive(Clone, Debug)]
pub enum AgencyRef {
    /// By service id.
    Id(String),
    /// By the tenant's id.
    PlatformId(String),
}

/// A registration, already validated (trimmed, normalised, not reserved).
#[derive(Clone, Debug)]
pub struct NewAgent {
    /// Owning tenant.
    pub tenant_id: String,
    /// The agency to register into.
    pub agency: AgencyRef,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: String,
    /// Email as sent (trimmed).
    pub email: Option<String>,
    /// NPN, digits only.
    pub npn: Option<String>,
    /// The tenant's id for the agent.
    pub platform_agent_id: Option<String>,
    /// Time of the request, Unix milliseconds.
    pub now_ms: i64,
}

/// A handle an agent can be matched on; serialised as the contract's field name (`matchedOn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum Handle {
    /// `platformAgentId`.
    PlatformAgentId,
    /// `npn`.
    Npn,
    /// `email` (case-insensitive).
    Email,
}

impl Handle {
    /// The contract's field name, as used in `matchedOn`.
    pub fn as_str(self) -> &'static str {
        match self {
            Handle::PlatformAgentId => "platformAgentId",
            Handle::Npn => "npn",
            Handle::Email => "email",
        }
    }
}

/// The outcome of a registration.
#[derive(Clone, Debug)]
pub enum RegisterAgent {
    /// Registered.
    Created {
        /// The new agent.
        agent: AgentRecord,
        /// Its agency.
        agency: AgencyRecord,
    },
    /// The named agency is not the tenant's.
    AgencyNotFound,
    /// A rep of the tenant already holds a sent handle.
    AlreadyExists {
        /// The existing agent.
        agent: AgentRecord,
        /// The handle that matched (first of platformAgentId, npn, email).
        matched_on: Handle,
    },
}

/// A stored agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentRecord {
    /// Insertion order within the database (pagination key; never exposed).
    pub seq: i64,
    /// Service agent id.
    pub id: String,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: String,
    /// Email as registered.
    pub email: Option<String>,
    /// NPN, digits only.
    pub npn: Option<String>,
    /// The tenant's id for the agent.
    pub platform_agent_id: Option<String>,
    /// Service agency id.
    pub agency_id: String,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: i64,
}

/// One way to pick agents out (at most one per query).
#[derive(Clone, Debug)]
pub enum AgentLookup {
    /// By service id.
    Id(String),
    /// By the tenant's id.
    PlatformAgentId(String),
    /// By NPN (digits only).
    Npn(String),
    /// By email (compared case-insensitively).
    Email(String),
}

/// A roster query.
#[derive(Clone, Debug)]
pub struct AgentFilter {
    /// Owning tenant.
    pub tenant_id: String,
    /// At most one handle.
    pub lookup: Option<AgentLookup>,
    /// Restrict to one of the tenant's agencies.
    pub agency_id: Option<String>,
    /// Only agents after this pagination key.
    pub after_seq: Option<i64>,
    /// Page size.
    pub limit: u32,
}

/// One page of agents and the key to continue after, if there is more.
#[derive(Clone, Debug)]
pub struct AgentPage {
    /// The agents, in registration order.
    pub agents: Vec<AgentRecord>,
    /// The pagination key of the last agent when another page exists.
    pub next_after_seq: Option<i64>,
}

const AGENT_COLUMNS: &str =
    "seq, id, first_name, last_name, email, npn, platform_agent_id, agency_id, created_at";

fn agent_from_row(row: &Row<'_>) -> rusqlite::Result<AgentRecord> {
    Ok(AgentRecord {
        seq: row.get(0)?,
        id: row.get(1)?,
        first_name: row.get(2)?,
        last_name: row.get(3)?,
        email: row.get(4)?,
        npn: row.get(5)?,
        platform_agent_id: row.get(6)?,
        agency_id: row.get(7)?,
        created_at_ms: row.get(8)?,
    })
}

fn agent_by_handle(
    conn: &Connection,
    tenant_id: &str,
    handle: Handle,
    value: &str,
) -> Result<Option<AgentRecord>, DbError> {
    let column = match handle {
        Handle::PlatformAgentId => "platform_agent_id",
        Handle::Npn => "npn",
        Handle::Email => "email_lower",
    };
    let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE tenant_id = ?1 AND {column} = ?2");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([tenant_id, value], agent_from_row)
        .optional()?)
}

/// The sent handles in `matchedOn` priority order, emails lowercased for comparison.
fn sent_handles(agent: &NewAgent) -> Vec<(Handle, String)> {
    let mut handles = Vec::with_capacity(3);
    if let Some(id) = &agent.platform_agent_id {
        handles.push((Handle::PlatformAgentId, id.clone()));
    }
    if let Some(npn) = &agent.npn {
        handles.push((Handle::Npn, npn.clone()));
    }
    if let Some(email) = &agent.email {
        handles.push((Handle::Email, email.to_lowercase()));
    }
    handles
}

fn find_conflict(
    conn: &Connection,
    agent: &NewAgent,
) -> Result<Option<(AgentRecord, Handle)>, DbError> {
    for (handle, value) in sent_handles(agent) {
        if let Some(existing) = agent_by_handle(conn, &agent.tenant_id, handle, &value)? {
            return Ok(Some((existing, handle)));
        }
    }
    Ok(None)
}

fn register(tx: &Transaction<'_>, new: NewAgent) -> Result<RegisterAgent, DbError> {
    let agency = match &new.agency {
        AgencyRef::Id(id) => agency_by_id(tx, &new.tenant_id, id)?,
        AgencyRef::PlatformId(id) => agency_by_platform_id(tx, &new.tenant_id, id)?,
    };
    let Some(agency) = agency else {
        return Ok(RegisterAgent::AgencyNotFound);
    };
    if let Some((agent, matched_on)) = find_conflict(tx, &new)? {
        return Ok(RegisterAgent::AlreadyExists { agent, matched_on });
    }
    let id = ids::agent_id();
    let inserted = tx.execute(
        "INSERT INTO agents (id, tenant_id, agency_id, first_name, last_name, email, email_lower,
             npn, platform_agent_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            id,
            new.tenant_id,
            agency.id,
            new.first_name,
            new.last_name,
            new.email,
            new.email.as_deref().map(str::to_lowercase),
            new.npn,
            new.platform_agent_id,
            new.now_ms
        ],
    );
    if let Err(error) = inserted {
        // Unreachable while writes are serialised, kept as the backstop: name the handle
        // the database rejected and report the agent holding it.
        let handle = match unique_violation(&error) {
            Some(UniqueKey::AgentPlatformId) => Handle::PlatformAgentId,
            Some(UniqueKey::AgentNpn) => Handle::Npn,
            Some(UniqueKey::AgentEmail) => Handle::Email,
            _ => return Err(DbError::Sqlite(error)),
        };
        return match find_conflict(tx, &new)? {
            Some((agent, _)) => Ok(RegisterAgent::AlreadyExists {
                agent,
                matched_on: handle,
            }),
            None => Err(DbError::Sqlite(error)),
        };
    }
    let agent = AgentRecord {
        seq: tx.last_insert_rowid(),
        id,
        first_name: new.first_name,
        last_name: new.last_name,
        email: new.email,
        npn: new.npn,
        platform_agent_id: new.platform_agent_id,
        agency_id: agency.id.clone(),
        created_at_ms: new.now_ms,
    };
    Ok(RegisterAgent::Created { agent, agency })
}

fn list(conn: &Connection, filter: &AgentFilter) -> Result<Option<AgentPage>, DbError> {
    if let Some(agency_id) = &filter.agency_id
        && agency_by_id(conn, &filter.tenant_id, agency_id)?.is_none()
    {
        return Ok(None);
    }
    let (lookup_sql, lookup_value) = match &filter.lookup {
        None => ("", None),
        Some(AgentLookup::Id(id)) => (" AND id = ?2", Some(id.clone())),
        Some(AgentLookup::PlatformAgentId(id)) => (" AND platform_agent_id = ?2", Some(id.clone())),
        Some(AgentLookup::Npn(npn)) => (" AND npn = ?2", Some(npn.clone())),
        Some(AgentLookup::Email(email)) => (" AND email_lower = ?2", Some(email.to_lowercase())),
    };
    let agency_sql = if filter.agency_id.is_some() {
        " AND agency_id = ?3"
    } else {
        ""
    };
    let sql = format!(
        "SELECT {AGENT_COLUMNS} FROM agents WHERE tenant_id = ?1{lookup_sql}{agency_sql}
         AND seq > ?4 ORDER BY seq LIMIT ?5"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let fetch = i64::from(filter.limit) + 1;
    let rows = stmt.query_map(
        params![
            filter.tenant_id,
            lookup_value,
            filter.agency_id,
            filter.after_seq.unwrap_or(0),
            fetch
        ],
        agent_from_row,
    )?;
    let mut agents = rows.collect::<Result<Vec<_>, _>>()?;
    let next_after_seq = if agents.len() > filter.limit as usize {
        agents.truncate(filter.limit as usize);
        agents.last().map(|agent| agent.seq)
    } else {
        None
    };
    Ok(Some(AgentPage {
        agents,
        next_after_seq,
    }))
}

impl Db {
    /// Registers an agent into an existing agency of the tenant. Writes are serialised, so
    /// of concurrent registrations sharing a handle exactly one is `Created`.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn register_agent(&self, agent: NewAgent) -> Result<RegisterAgent, DbError> {
        self.write(move |tx| register(tx, agent)).await
    }

    /// A page of the tenant's agents matching `filter`, or `None` when `filter.agency_id`
    /// is not one of the tenant's agencies.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn list_agents(&self, filter: AgentFilter) -> Result<Option<AgentPage>, DbError> {
        self.read(move |conn| list(conn, &filter)).await
    }

    /// The tenant's agent found by `lookup` (another tenant's agent is `None`).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn agent(
        &self,
        tenant_id: &str,
        lookup: AgentLookup,
    ) -> Result<Option<AgentRecord>, DbError> {
        let filter = AgentFilter {
            tenant_id: tenant_id.to_owned(),
            lookup: Some(lookup),
            agency_id: None,
            after_seq: None,
            limit: 1,
        };
        let page = self.list_agents(filter).await?;
        Ok(page.and_then(|page| page.agents.into_iter().next()))
    }
}

#[cfg(test)]
mod handle_tests {
    use super::Handle;

    #[test]
    fn matched_on_is_serialised_as_the_name_used_in_messages() {
        for handle in [Handle::PlatformAgentId, Handle::Npn, Handle::Email] {
            let wire = serde_json::to_value(handle).expect("json");
            assert_eq!(wire, serde_json::Value::from(handle.as_str()));
        }
    }
}
