//! SQL of triggered calls (`svc-cli sandbox trigger`, see [`crate::trigger`]): the rep a
//! handle names, and a practice call stored as ended, for the scoring step to score as any
//! other. Times are unix milliseconds.

use rusqlite::{Connection, OptionalExtension, params};

use super::{Db, DbError};

/// A registered rep a call is made for, with the ids calls echo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerAgent {
    /// Service agent id.
    pub id: String,
    /// Service agency id.
    pub agency_id: String,
    /// The tenant's id for the agent.
    pub platform_agent_id: Option<String>,
    /// The tenant's id for the agency.
    pub platform_agency_id: String,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: String,
}

/// A practice call that ended with this transcript, to be scored.
#[derive(Debug, Clone)]
pub struct NewTriggeredCall {
    /// Public call id.
    pub id: String,
    /// Tenant.
    pub tenant_id: String,
    /// The rep.
    pub agent: TriggerAgent,
    /// The drill practised.
    pub drill_key: String,
    /// Start (ms).
    pub started_at: i64,
    /// Whole seconds.
    pub duration_sec: i64,
    /// Transcript JSON; `None` for a call that never completed.
    pub transcript: Option<String>,
    /// Now (ms).
    pub now: i64,
}

const AGENT_COLUMNS: &str = "a.id, a.agency_id, a.platform_agent_id, g.platform_agency_id, \
                             a.first_name, a.last_name";

fn agent_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TriggerAgent> {
    Ok(TriggerAgent {
        id: r.get(0)?,
        agency_id: r.get(1)?,
        platform_agent_id: r.get(2)?,
        platform_agency_id: r.get(3)?,
        first_name: r.get(4)?,
        last_name: r.get(5)?,
    })
}

/// The tenant's rep named by `handle` (service agent id, `platformAgentId`, email or NPN, in
/// that order of preference: a handle that is one rep's `platformAgentId` and holds another's
/// NPN digits names the first), or the first one registered when `handle` is `None`.
fn find_agent(
    conn: &Connection,
    tenant_id: &str,
    handle: Option<&str>,
) -> rusqlite::Result<Option<TriggerAgent>> {
    let from = "FROM agents a JOIN agencies g ON g.id = a.agency_id WHERE a.tenant_id = ?1";
    match handle.map(str::trim) {
        None => conn
            .query_row(
                &format!("SELECT {AGENT_COLUMNS} {from} ORDER BY a.seq LIMIT 1"),
                [tenant_id],
                agent_row,
            )
            .optional(),
        Some(handle) => {
            let digits: String = handle.chars().filter(char::is_ascii_digit).collect();
            conn.query_row(
                &format!(
                    "SELECT {AGENT_COLUMNS} {from}
                     AND (a.id = ?2 OR a.platform_agent_id = ?2 OR a.email_lower = lower(?2)
                          OR (?3 <> '' AND a.npn = ?3))
                     ORDER BY CASE WHEN a.id = ?2 THEN 0 WHEN a.platform_agent_id = ?2 THEN 1
                                   WHEN a.email_lower = lower(?2) THEN 2 ELSE 3 END, a.seq
                     LIMIT 1"
                ),
                params![tenant_id, handle, digits],
                agent_row,
            )
            .optional()
        }
    }
}

fn insert_ended(conn: &Connection, call: &NewTriggeredCall) -> rusqlite::Result<()> {
    let ended = call
        .started_at
        .saturating_add(call.duration_sec.saturating_mul(1000));
    conn.execute(
        "INSERT INTO calls (id, tenant_id, source, state, agent_id, agency_id, platform_agent_id,
            platform_agency_id, drill_key, started_at, ended_at, list_at, duration_sec, transcript,
            created_at, updated_at)
         VALUES (?1, ?2, 'roleplay', 'ended', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11, ?12, ?12)",
        params![
            call.id,
            call.tenant_id,
            call.agent.id,
            call.agent.agency_id,
            call.agent.platform_agent_id,
            call.agent.platform_agency_id,
            call.drill_key,
            call.started_at,
            ended,
            call.duration_sec,
            call.transcript,
            call.now,
        ],
    )?;
    Ok(())
}

impl Db {
    /// The tenant's rep named by `handle` (service agent id, `platformAgentId`, email or
    /// NPN), or the first one registered when `handle` is `None`.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn trigger_agent(
        &self,
        tenant_id: &str,
        handle: Option<String>,
    ) -> Result<Option<TriggerAgent>, DbError> {
        let tenant_id = tenant_id.to_owned();
        self.read(move |conn| Ok(find_agent(conn, &tenant_id, handle.as_deref())?))
            .await
    }

    /// Stores a practice call as ended, waiting to be scored.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn insert_ended_call(&self, call: NewTriggeredCall) -> Result<(), DbError> {
        self.write(move |tx| Ok(insert_ended(tx, &call)?)).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::outbox::tests::conn;
    use super::*;

    #[test]
    fn a_handle_names_a_rep_by_id_then_platform_id_then_email_then_npn() {
        let c = conn();
        c.execute_batch(
            "INSERT INTO tenants (id, name, signing_secret, created_at)
             VALUES ('ten_1', 'T', 'whsec_x', 0);
             INSERT INTO agencies (id, tenant_id, platform_agency_id, name, created_at, updated_at)
             VALUES ('svc_agency_1', 'ten_1', 'agency-1', 'First', 0, 0);
             INSERT INTO agents (id, tenant_id, agency_id, first_name, last_name, email,
                 email_lower, npn, platform_agent_id, created_at)
             VALUES ('svc_agent_npn', 'ten_1', 'svc_agency_1', 'Ada', 'Lovelace', NULL, NULL,
                     '1234', 'rep-ada', 0),
                    ('svc_agent_pid', 'ten_1', 'svc_agency_1', 'Grace', 'Hopper',
                     'Grace@Example.com', 'grace@example.com', NULL, 'rep-1234', 0);",
        )
        .expect("seed");
        let named = |handle: Option<&str>| {
            find_agent(&c, "ten_1", handle)
                .expect("read")
                .map(|agent| agent.id)
        };
        assert_eq!(named(None).as_deref(), Some("svc_agent_npn"), "the first");
        assert_eq!(named(Some("rep-1234")).as_deref(), Some("svc_agent_pid"));
        assert_eq!(named(Some("12-34")).as_deref(), Some("svc_agent_npn"));
        assert_eq!(named(Some("GRACE@example.com")).as_deref(), Some("svc_agent_pid"));
        assert_eq!(named(Some("svc_agent_pid")).as_deref(), Some("svc_agent_pid"));
        assert_eq!(named(Some("nobody")), None);
        assert_eq!(find_agent(&c, "ten_2", None).expect("read"), None);
    }
}
