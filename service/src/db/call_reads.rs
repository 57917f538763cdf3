//! SQL of the call reads (GET /calls and GET /calls/{callId}) and of bulk imports of already
//! scored calls. Only `scored` calls are read; the list is keyset-paged on (list time, id), newest
//! first, where the list time is `endedAt` for practice calls and `startedAt` for real calls.

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params};

/// A scored call as the API returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRow {
    /// Public call id.
    pub id: String,
    /// `roleplay` or `real_call`.
    pub source: String,
    /// Service agent id.
    pub agent_id: String,
    /// Service agency id.
    pub agency_id: String,
    /// Tenant agent id.
    pub platform_agent_id: Option<String>,
    /// Tenant agency id.
    pub platform_agency_id: Option<String>,
    /// Earlier-form label.
    pub external_user_id: Option<String>,
    /// Earlier-form label.
    pub external_agency_id: Option<String>,
    /// Drill key.
    pub drill_key: Option<String>,
    /// Start.
    pub started_at: Option<i64>,
    /// End.
    pub ended_at: Option<i64>,
    /// Whole seconds.
    pub duration_sec: i64,
    /// Scoring time.
    pub scored_at: Option<i64>,
    /// The listing key (cursor position).
    pub list_at: i64,
    /// Transcript JSON (detail only).
    pub transcript: Option<String>,
    /// Score JSON (detail only).
    pub score: Option<String>,
    /// Row creation.
    pub created_at: i64,
    /// Last change.
    pub updated_at: i64,
}

const ROW_COLUMNS: &str = "id, source, agent_id, agency_id, platform_agent_id, platform_agency_id,
    external_user_id, external_agency_id, drill_key, started_at, ended_at, duration_sec, scored_at,
    list_at, transcript, score, created_at, updated_at";

fn row(r: &rusqlite::Row<'_>, detail: bool) -> rusqlite::Result<CallRow> {
    Ok(CallRow {
        id: r.get(0)?,
        source: r.get(1)?,
        agent_id: r.get(2)?,
        agency_id: r.get(3)?,
        platform_agent_id: r.get(4)?,
        platform_agency_id: r.get(5)?,
        external_user_id: r.get(6)?,
        external_agency_id: r.get(7)?,
        drill_key: r.get(8)?,
        started_at: r.get(9)?,
        ended_at: r.get(10)?,
        duration_sec: r.get(11)?,
        scored_at: r.get(12)?,
        list_at: r.get::<_, Option<i64>>(13)?.unwrap_or(0),
        transcript: if detail { r.get(14)? } else { None },
        score: if detail { r.get(15)? } else { None },
        created_at: r.get(16)?,
        updated_at: r.get(17)?,
    })
}

/// One scored call of the tenant.
///
/// # Errors
/// SQLite errors.
pub(super) fn scored_call(
    conn: &Connection,
    tenant_id: &str,
    call_id: &str,
) -> rusqlite::Result<Option<CallRow>> {
    conn.query_row(
        &format!(
            "SELECT {ROW_COLUMNS} FROM calls WHERE id = ?1 AND tenant_id = ?2 AND state = 'scored'"
        ),
        params![call_id, tenant_id],
        |r| row(r, true),
    )
    .optional()
}

/// The filters of GET /calls, resolved to service ids.
#[derive(Debug, Clone, Default)]
pub struct CallFilter {
    /// Tenant.
    pub tenant_id: String,
    /// `roleplay` or `real_call`.
    pub source: String,
    /// Inclusive lower bound (ms).
    pub from: i64,
    /// Inclusive upper bound (ms).
    pub to: Option<i64>,
    /// Service agent id.
    pub agent_id: Option<String>,
    /// Service agency id.
    pub agency_id: Option<String>,
    /// Tenant agent id.
    pub platform_agent_id: Option<String>,
    /// Tenant agency id.
    pub platform_agency_id: Option<String>,
    /// Earlier-form label.
    pub external_user_id: Option<String>,
    /// Earlier-form label.
    pub external_agency_id: Option<String>,
    /// Continue after this (list_at, id).
    pub after: Option<(i64, String)>,
    /// Page size.
    pub limit: u32,
}

/// A page of scored calls, newest first; fetches `limit + 1` rows so the caller knows whether
/// another page exists.
///
/// # Errors
/// SQLite errors.
pub(super) fn list_calls(conn: &Connection, filter: &CallFilter) -> rusqlite::Result<Vec<CallRow>> {
    let mut sql = format!(
        "SELECT {ROW_COLUMNS} FROM calls WHERE tenant_id = ? AND source = ? AND state = 'scored' AND list_at >= ?"
    );
    let mut args: Vec<Value> = vec![
        filter.tenant_id.clone().into(),
        filter.source.clone().into(),
        filter.from.into(),
    ];
    if let Some(to) = filter.to {
        sql.push_str(" AND list_at <= ?");
        args.push(to.into());
    }
    for (column, value) in [
        ("agent_id", &filter.agent_id),
        ("agency_id", &filter.agency_id),
        ("platform_agent_id", &filter.platform_agent_id),
        ("platform_agency_id", &filter.platform_agency_id),
        ("external_user_id", &filter.external_user_id),
        ("external_agency_id", &filter.external_agency_id),
    ] {
        if let Some(value) = value {
            sql.push_str(&format!(" AND {column} = ?"));
            args.push(value.clone().into());
        }
    }
    if let Some((at, id)) = &filter.after {
        sql.push_str(" AND (list_at, id) < (?, ?)");
        args.push((*at).into());
        args.push(id.clone().into());
    }
    sql.push_str(" ORDER BY list_at DESC, id DESC LIMIT ?");
    args.push(i64::from(filter.limit).saturating_add(1).into());
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| row(r, false))?;
    rows.collect()
}

/// An already-scored call to store directly (see [`insert_scored`]).
#[derive(Debug, Clone)]
pub struct ScoredCall {
    /// Public call id.
    pub id: String,
    /// Tenant.
    pub tenant_id: String,
    /// `roleplay` or `real_call`.
    pub source: String,
    /// Service agent id.
    pub agent_id: String,
    /// Service agency id.
    pub agency_id: String,
    /// Tenant agent id.
    pub platform_agent_id: Option<String>,
    /// Tenant agency id.
    pub platform_agency_id: Option<String>,
    /// Drill key.
    pub drill_key: Option<String>,
    /// Start (ms).
    pub started_at: i64,
    /// Whole seconds.
    pub duration_sec: i64,
    /// Transcript JSON.
    pub transcript: String,
    /// Score JSON.
    pub score: String,
}

/// Stores one already-scored call (listed by `endedAt`, or `startedAt` for real calls).
///
/// # Errors
/// SQLite errors.
pub(super) fn insert_scored(conn: &Connection, call: &ScoredCall) -> rusqlite::Result<()> {
    let ended = call.started_at + call.duration_sec * 1000;
    let list_at = if call.source == "real_call" {
        call.started_at
    } else {
        ended
    };
    conn.prepare_cached(
        "INSERT INTO calls (id, tenant_id, source, state, agent_id, agency_id, platform_agent_id, platform_agency_id,
            drill_key, started_at, ended_at, duration_sec, list_at, scored_at, transcript, score, created_at, updated_at)
         VALUES (?1, ?2, ?3, 'scored', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?10, ?13, ?14, ?9, ?10)",
    )?
    .execute(params![
        call.id,
        call.tenant_id,
        call.source,
        call.agent_id,
        call.agency_id,
        call.platform_agent_id,
        call.platform_agency_id,
        call.drill_key,
        call.started_at,
        ended,
        call.duration_sec,
        list_at,
        call.transcript,
        call.score
    ])?;
    Ok(())
}
