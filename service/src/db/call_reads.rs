//! SQL of the call reads (GET /calls and GET /calls/{callId}) and of bulk imports of already
//! scored calls. Only `scored` calls are read; the list is keyset-paged on (list time, id), newest
//! first, where the list time is `endedAt` for practice calls and `startedAt` for real calls.
//!
//! [`CallRow`] is the contract's list row itself: the API serialises it as read (the `GET /calls`
//! rows and the first fields of a call's detail), so a stored call maps to the wire only here.

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use utoipa::ToSchema;

use crate::time::serialize_opt_millis;

/// A call list row.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = CallListRow)]
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
    #[schema(required = true)]
    pub platform_agent_id: Option<String>,
    /// Tenant agency id.
    #[schema(required = true)]
    pub platform_agency_id: Option<String>,
    /// Minting-time rep label.
    #[schema(required = true)]
    pub external_user_id: Option<String>,
    /// Minting-time agency label.
    #[schema(required = true)]
    pub external_agency_id: Option<String>,
    /// The drill practised; null for real calls.
    #[schema(required = true)]
    pub drill_key: Option<String>,
    /// Start.
    #[serde(serialize_with = "serialize_opt_millis")]
    #[schema(required = true, value_type = Option<String>)]
    pub started_at: Option<i64>,
    /// End.
    #[serde(serialize_with = "serialize_opt_millis")]
    #[schema(required = true, value_type = Option<String>)]
    pub ended_at: Option<i64>,
    /// Whole seconds.
    pub duration_sec: i64,
    /// When it was scored.
    #[serde(serialize_with = "serialize_opt_millis")]
    #[schema(required = true, value_type = Option<String>)]
    pub scored_at: Option<i64>,
}

/// A list row with its position in the list (what a cursor points after).
#[derive(Debug, Clone, PartialEq)]
pub struct ListedCall {
    /// The row.
    pub row: CallRow,
    /// The listing key: `endedAt` for practice calls, `startedAt` for real calls (ms).
    pub list_at: i64,
}

/// A scored call with what only its detail shows.
#[derive(Debug, Clone, PartialEq)]
pub struct CallDetailRecord {
    /// The list-row fields.
    pub row: CallRow,
    /// Transcript JSON.
    pub transcript: Option<String>,
    /// Score JSON.
    pub score: Option<String>,
    /// Row creation (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
    /// The archived recording's file name (real calls; none once swept).
    pub audio_file: Option<String>,
}

/// The columns of a [`CallRow`], in the order [`call_row`] reads them; other columns follow.
const ROW_COLUMNS: &str = "id, source, agent_id, agency_id, platform_agent_id, platform_agency_id,
    external_user_id, external_agency_id, drill_key, started_at, ended_at, duration_sec, scored_at";

/// How many columns [`ROW_COLUMNS`] names.
const ROW_WIDTH: usize = 13;

fn call_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CallRow> {
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
) -> rusqlite::Result<Option<CallDetailRecord>> {
    // Cached: every `GET /calls/{callId}` runs it.
    conn.prepare_cached(&format!(
        "SELECT {ROW_COLUMNS}, transcript, score, created_at, updated_at, audio_file
         FROM calls WHERE id = ?1 AND tenant_id = ?2 AND state = 'scored'"
    ))?
    .query_row(
        params![call_id, tenant_id],
        |r| {
            Ok(CallDetailRecord {
                row: call_row(r)?,
                transcript: r.get(ROW_WIDTH)?,
                score: r.get(ROW_WIDTH + 1)?,
                created_at: r.get(ROW_WIDTH + 2)?,
                updated_at: r.get(ROW_WIDTH + 3)?,
                audio_file: r.get(ROW_WIDTH + 4)?,
            })
        },
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
pub(super) fn list_calls(
    conn: &Connection,
    filter: &CallFilter,
) -> rusqlite::Result<Vec<ListedCall>> {
    let mut sql = format!(
        "SELECT {ROW_COLUMNS}, list_at FROM calls WHERE tenant_id = ? AND source = ? AND state = 'scored' AND list_at >= ?"
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
    let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| {
        Ok(ListedCall {
            row: call_row(r)?,
            list_at: r.get::<_, Option<i64>>(ROW_WIDTH)?.unwrap_or(0),
        })
    })?;
    rows.collect()
}

/// An already-scored call to store directly (see `insert_scored`).
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
    let ended = call
        .started_at
        .saturating_add(call.duration_sec.saturating_mul(1000));
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::CallRow;

    #[test]
    fn a_list_row_goes_on_the_wire_with_contract_timestamps_and_explicit_nulls() {
        let row = CallRow {
            id: "svc_call_1".into(),
            source: "real_call".into(),
            agent_id: "svc_agent_1".into(),
            agency_id: "svc_agency_1".into(),
            platform_agent_id: Some("rep-1".into()),
            platform_agency_id: None,
            external_user_id: None,
            external_agency_id: None,
            drill_key: None,
            started_at: Some(1_767_225_600_123),
            ended_at: Some(1_767_225_725_000),
            duration_sec: 125,
            scored_at: None,
        };
        assert_eq!(
            serde_json::to_value(&row).expect("serialise"),
            json!({
                "id": "svc_call_1",
                "source": "real_call",
                "agentId": "svc_agent_1",
                "agencyId": "svc_agency_1",
                "platformAgentId": "rep-1",
                "platformAgencyId": null,
                "externalUserId": null,
                "externalAgencyId": null,
                "drillKey": null,
                "startedAt": "2026-01-01T00:00:00.123Z",
                "endedAt": "2026-01-01T00:02:05.000Z",
                "durationSec": 125,
                "scoredAt": null,
            })
        );
    }
}
