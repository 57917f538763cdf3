//! SQL for practice calls and session tokens: the service token key, minting (token + call row
//! in one transaction), the monthly usage sum, atomic single-use redemption, the live ticket,
//! ending and scoring outcomes (the reads are in [`super::call_reads`]).
//!
//! Times are unix milliseconds. Call states (contract section 3): `created` (token minted),
//! `live` (redeemed), `ended`, `scoring`, `scored`, `not_scored`. Only `scored` calls are read.

use rusqlite::{Connection, OptionalExtension, params};

/// Reads the service's session-token signing key (in `service_secrets`), storing `fresh` as
/// the key on first use.
///
/// # Errors
/// SQLite errors.
pub(super) fn token_key(conn: &Connection, fresh: &[u8]) -> rusqlite::Result<Vec<u8>> {
    conn.execute(
        "INSERT OR IGNORE INTO service_secrets (name, value) VALUES ('session_token_key', ?1)",
        params![fresh],
    )?;
    conn.query_row(
        "SELECT value FROM service_secrets WHERE name = 'session_token_key'",
        [],
        |r| r.get(0),
    )
}

/// Everything stored when a token is minted.
#[derive(Debug, Clone)]
pub struct NewMint {
    /// Token id.
    pub jti: String,
    /// Public call id reserved for the call.
    pub call_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Service agent id.
    pub agent_id: String,
    /// Service agency id.
    pub agency_id: String,
    /// The agent's tenant id, if any.
    pub platform_agent_id: Option<String>,
    /// The agency's tenant id, if any.
    pub platform_agency_id: Option<String>,
    /// Earlier-form rep label.
    pub external_user_id: Option<String>,
    /// Earlier-form agency label.
    pub external_agency_id: Option<String>,
    /// Token expiry.
    pub expires_at: i64,
    /// Now.
    pub now: i64,
}

/// Seconds of calls of `tenant_id` that ended in `[from, to)`, whatever their outcome.
///
/// # Errors
/// SQLite errors.
pub(super) fn usage_secs(
    conn: &Connection,
    tenant_id: &str,
    from: i64,
    to: i64,
) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT COALESCE(SUM(duration_sec), 0) FROM calls WHERE tenant_id = ?1 AND ended_at >= ?2 AND ended_at < ?3",
        params![tenant_id, from, to],
        |r| r.get(0),
    )
}

/// Stores a minted token and its `created` call.
///
/// # Errors
/// SQLite errors.
pub(super) fn insert_mint(conn: &Connection, mint: &NewMint) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO session_tokens (jti, tenant_id, agent_id, call_id, expires_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            mint.jti,
            mint.tenant_id,
            mint.agent_id,
            mint.call_id,
            mint.expires_at,
            mint.now
        ],
    )?;
    conn.execute(
        "INSERT INTO calls (id, tenant_id, source, state, agent_id, agency_id, platform_agent_id,
            platform_agency_id, external_user_id, external_agency_id, created_at, updated_at)
         VALUES (?1, ?2, 'roleplay', 'created', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
        params![
            mint.call_id,
            mint.tenant_id,
            mint.agent_id,
            mint.agency_id,
            mint.platform_agent_id,
            mint.platform_agency_id,
            mint.external_user_id,
            mint.external_agency_id,
            mint.now
        ],
    )?;
    Ok(())
}

/// What spending a token found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spend {
    /// This request spent it; the call it reserved.
    Spent {
        /// The reserved call.
        call_id: String,
    },
    /// It was spent before.
    AlreadyUsed,
    /// It was voided (its tenant was deactivated or its keys revoked) before it was spent.
    Voided,
    /// No such token (or not this tenant's / agent's).
    Unknown,
}

/// Spends a token atomically: of any number of concurrent spends exactly one sees `Spent`.
///
/// # Errors
/// SQLite errors.
pub(super) fn spend_token(
    conn: &Connection,
    jti: &str,
    tenant_id: &str,
    agent_id: &str,
    now: i64,
) -> rusqlite::Result<Spend> {
    let spent: Option<String> = conn
        .query_row(
            "UPDATE session_tokens SET spent_at = ?4
             WHERE jti = ?1 AND tenant_id = ?2 AND agent_id = ?3 AND spent_at IS NULL
               AND voided_at IS NULL RETURNING call_id",
            params![jti, tenant_id, agent_id, now],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(call_id) = spent {
        return Ok(Spend::Spent { call_id });
    }
    let state: Option<(bool, bool)> = conn
        .query_row(
            "SELECT spent_at IS NOT NULL, voided_at IS NOT NULL FROM session_tokens
             WHERE jti = ?1 AND tenant_id = ?2 AND agent_id = ?3",
            params![jti, tenant_id, agent_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(match state {
        Some((true, _)) => Spend::AlreadyUsed,
        Some((false, true)) => Spend::Voided,
        _ => Spend::Unknown,
    })
}

/// Seconds of the tenant's allowance held by calls in progress and tokens outstanding: each
/// reserves one minute (see [`super::Db::mint_session`]).
pub(super) fn reserved_secs(conn: &Connection, tenant_id: &str, now: i64) -> rusqlite::Result<i64> {
    let live: i64 = conn.query_row(
        "SELECT COUNT(*) FROM calls WHERE tenant_id = ?1 AND state = 'live'",
        [tenant_id],
        |r| r.get(0),
    )?;
    let tokens: i64 = conn.query_row(
        "SELECT COUNT(*) FROM session_tokens
         WHERE tenant_id = ?1 AND spent_at IS NULL AND voided_at IS NULL AND expires_at > ?2",
        params![tenant_id, now],
        |r| r.get(0),
    )?;
    Ok((live + tokens) * 60)
}

/// What redeem stores when the call goes live.
#[derive(Debug, Clone)]
pub struct GoLive {
    /// The call.
    pub call_id: String,
    /// The drill key.
    pub drill_key: String,
    /// Difficulty (contract spelling).
    pub difficulty: String,
    /// The persona's name.
    pub persona_name: String,
    /// The seed the persona was picked with.
    pub persona_seed: i64,
    /// The `ext_…` session id.
    pub session_id: String,
    /// SHA-256 hex of the connection ticket.
    pub ticket_hash: String,
    /// Now.
    pub now: i64,
}

/// Moves a `created` call to `live`. Returns false if it was not `created`.
///
/// # Errors
/// SQLite errors.
pub(super) fn go_live(conn: &Connection, live: &GoLive) -> rusqlite::Result<bool> {
    let changed = conn.execute(
        "UPDATE calls SET state = 'live', drill_key = ?2, difficulty = ?3, persona_name = ?4, persona_seed = ?5,
            session_id = ?6, ticket_hash = ?7, started_at = ?8, updated_at = ?8
         WHERE id = ?1 AND state = 'created'",
        params![
            live.call_id,
            live.drill_key,
            live.difficulty,
            live.persona_name,
            live.persona_seed,
            live.session_id,
            live.ticket_hash,
            live.now
        ],
    )?;
    Ok(changed == 1)
}

/// A live call whose ticket was just accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveCall {
    /// Public call id.
    pub call_id: String,
    /// Drill key.
    pub drill_key: String,
    /// Difficulty.
    pub difficulty: String,
    /// Persona name.
    pub persona_name: String,
    /// Persona seed.
    pub persona_seed: i64,
    /// When the call went live.
    pub started_at: i64,
}

/// Whether a ticket could be accepted now (read only; [`claim_ticket`] decides).
///
/// # Errors
/// SQLite errors.
pub(super) fn ticket_claimable(
    conn: &Connection,
    session_id: &str,
    ticket_hash: &str,
) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM calls
         WHERE session_id = ?1 AND ticket_hash = ?2 AND ticket_used_at IS NULL AND state = 'live')",
        params![session_id, ticket_hash],
        |r| r.get(0),
    )
}

/// Accepts a connection ticket once: the session must be live, the ticket unused and the
/// tenant active.
///
/// # Errors
/// SQLite errors.
pub(super) fn claim_ticket(
    conn: &Connection,
    session_id: &str,
    ticket_hash: &str,
    now: i64,
) -> rusqlite::Result<Option<LiveCall>> {
    conn.query_row(
        "UPDATE calls SET ticket_used_at = ?3
         WHERE session_id = ?1 AND ticket_hash = ?2 AND ticket_used_at IS NULL AND state = 'live'
           AND tenant_id IN (SELECT id FROM tenants WHERE active = 1)
         RETURNING id, drill_key, difficulty, persona_name, persona_seed, started_at",
        params![session_id, ticket_hash, now],
        |r| {
            Ok(LiveCall {
                call_id: r.get(0)?,
                drill_key: r.get(1)?,
                difficulty: r.get(2)?,
                persona_name: r.get(3)?,
                persona_seed: r.get(4)?,
                started_at: r.get(5)?,
            })
        },
    )
    .optional()
}

/// Ends a live call with its transcript. Returns the duration, or `None` if it was not live.
///
/// `durationSec` counts every second begun, as a phone bill does: a call live for 200 ms (a
/// scripted call, whose persona answers at once) lasted 1 s, not 0 (issue 44), and
/// `startedAt + durationSec` is never before `endedAt`.
///
/// # Errors
/// SQLite errors.
pub(super) fn end_call(
    conn: &Connection,
    call_id: &str,
    transcript_json: &str,
    now: i64,
) -> rusqlite::Result<Option<i64>> {
    conn.query_row(
        "UPDATE calls SET state = 'ended', ended_at = MAX(?3, started_at), list_at = MAX(?3, started_at),
            duration_sec = (MAX(?3, started_at) - started_at + 999) / 1000, transcript = ?2, updated_at = ?3
         WHERE id = ?1 AND state = 'live' RETURNING duration_sec",
        params![call_id, transcript_json, now],
        |r| r.get(0),
    )
    .optional()
}

/// Ends a live call with no transcript (see [`super::Db::end_call_without_transcript`]).
///
/// # Errors
/// SQLite errors.
pub(super) fn end_call_without_transcript(
    conn: &Connection,
    call_id: &str,
    now: i64,
) -> rusqlite::Result<Option<i64>> {
    conn.query_row(
        "UPDATE calls SET state = 'ended', ended_at = MAX(?2, started_at), list_at = MAX(?2, started_at),
            duration_sec = (MAX(?2, started_at) - started_at + 999) / 1000, transcript = NULL, updated_at = ?2
         WHERE id = ?1 AND state = 'live' RETURNING duration_sec",
        params![call_id, now],
        |r| r.get(0),
    )
    .optional()
}

/// Live calls that went live at or before `cutoff` (at the ceiling).
///
/// # Errors
/// SQLite errors.
pub(super) fn live_calls_started_before(
    conn: &Connection,
    cutoff: i64,
) -> rusqlite::Result<Vec<String>> {
    let mut stmt =
        conn.prepare("SELECT id FROM calls WHERE state = 'live' AND started_at <= ?1")?;
    let rows = stmt.query_map([cutoff], |r| r.get(0))?;
    rows.collect()
}

/// Every live call (at startup they were cut off by the previous process).
///
/// # Errors
/// SQLite errors.
pub(super) fn live_calls(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    live_calls_started_before(conn, i64::MAX)
}

/// Calls waiting for scoring (`ended`, or `scoring` interrupted by a restart).
///
/// # Errors
/// SQLite errors.
pub(super) fn calls_to_score(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt =
        conn.prepare("SELECT id FROM calls WHERE state IN ('ended', 'scoring') ORDER BY seq")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    rows.collect()
}

/// A call as scoring needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToScore {
    /// Tenant.
    pub tenant_id: String,
    /// Drill key.
    pub drill_key: Option<String>,
    /// Transcript JSON, if the call ended normally.
    pub transcript: Option<String>,
    /// Ids echoed on the webhook.
    pub agent_id: String,
    /// Ids echoed on the webhook.
    pub agency_id: String,
    /// Ids echoed on the webhook.
    pub platform_agent_id: Option<String>,
    /// Ids echoed on the webhook.
    pub platform_agency_id: Option<String>,
    /// The earlier form's rep label, echoed on the webhook when the token carried it.
    pub external_user_id: Option<String>,
    /// The earlier form's agency label, echoed on the webhook when the token carried it.
    pub external_agency_id: Option<String>,
}

/// Marks an ended call `scoring` and returns what scoring needs; `None` if it is not waiting.
///
/// # Errors
/// SQLite errors.
pub(super) fn begin_scoring(
    conn: &Connection,
    call_id: &str,
    now: i64,
) -> rusqlite::Result<Option<ToScore>> {
    conn.query_row(
        "UPDATE calls SET state = 'scoring', updated_at = ?2 WHERE id = ?1 AND state IN ('ended', 'scoring')
         RETURNING tenant_id, drill_key, transcript, agent_id, agency_id, platform_agent_id,
                   platform_agency_id, external_user_id, external_agency_id",
        params![call_id, now],
        |r| {
            Ok(ToScore {
                tenant_id: r.get(0)?,
                drill_key: r.get(1)?,
                transcript: r.get(2)?,
                agent_id: r.get(3)?,
                agency_id: r.get(4)?,
                platform_agent_id: r.get(5)?,
                platform_agency_id: r.get(6)?,
                external_user_id: r.get(7)?,
                external_agency_id: r.get(8)?,
            })
        },
    )
    .optional()
}

/// Records a score (`Some(score_json)`) or a failed outcome (`None`). Returns false when the
/// call was not being scored.
///
/// # Errors
/// SQLite errors.
pub(super) fn record_outcome(
    conn: &Connection,
    call_id: &str,
    score_json: Option<&str>,
    now: i64,
) -> rusqlite::Result<bool> {
    let changed = match score_json {
        Some(score) => conn.execute(
            "UPDATE calls SET state = 'scored', score = ?2, scored_at = ?3, updated_at = ?3
             WHERE id = ?1 AND state = 'scoring'",
            params![call_id, score, now],
        )?,
        None => conn.execute(
            "UPDATE calls SET state = 'not_scored', updated_at = ?2 WHERE id = ?1 AND state = 'scoring'",
            params![call_id, now],
        )?,
    };
    Ok(changed == 1)
}

/// Marks a call that never completed (cut off by a restart) as ended with no transcript, so
/// scoring reports it as not scored.
///
/// # Errors
/// SQLite errors.
pub(super) fn abandon_live_call(
    conn: &Connection,
    call_id: &str,
    now: i64,
    ceiling_ms: i64,
) -> rusqlite::Result<bool> {
    // The call cannot have outlived the ceiling, however long the service was down.
    let changed = conn.execute(
        "UPDATE calls SET state = 'ended', transcript = NULL,
            ended_at = MIN(MAX(?2, started_at), started_at + ?3),
            list_at = MIN(MAX(?2, started_at), started_at + ?3),
            duration_sec = (MIN(MAX(?2, started_at), started_at + ?3) - started_at + 999) / 1000, updated_at = ?2
         WHERE id = ?1 AND state = 'live'",
        params![call_id, now, ceiling_ms],
    )?;
    Ok(changed == 1)
}

#[cfg(test)]
mod tests {
    use super::super::call_reads::{CallFilter, list_calls, scored_call};
    use super::*;

    fn conn() -> Connection {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::migrations::migrate(&mut conn).expect("schema");
        conn.execute(
            "INSERT INTO tenants (id, name, signing_secret, created_at)
             VALUES ('ten_1', 'Tenant', 'whsec_test', 0)",
            [],
        )
        .expect("the tenant");
        conn
    }

    fn mint(conn: &Connection, jti: &str, call: &str, now: i64) {
        let m = NewMint {
            jti: jti.into(),
            call_id: call.into(),
            tenant_id: "ten_1".into(),
            agent_id: "svc_agent_1".into(),
            agency_id: "svc_agency_1".into(),
            platform_agent_id: Some("rep-1".into()),
            platform_agency_id: None,
            external_user_id: None,
            external_agency_id: None,
            expires_at: now + 300_000,
            now,
        };
        insert_mint(conn, &m).expect("mint");
    }

    fn live(conn: &Connection, call: &str, session: &str, now: i64) {
        let l = GoLive {
            call_id: call.into(),
            drill_key: "ma-full-sale".into(),
            difficulty: "Advanced".into(),
            persona_name: "Frank Russo".into(),
            persona_seed: 1,
            session_id: session.into(),
            ticket_hash: format!("hash-{session}"),
            now,
        };
        assert!(go_live(conn, &l).expect("live"));
    }

    #[test]
    fn the_token_key_is_created_once_and_kept() {
        let c = conn();
        let first = token_key(&c, b"first").expect("key");
        let second = token_key(&c, b"second").expect("key");
        assert_eq!(first, b"first");
        assert_eq!(second, b"first");
    }

    #[test]
    fn a_token_is_spent_once_and_only_by_its_tenant_and_agent() {
        let c = conn();
        mint(&c, "tok_1", "svc_call_1", 0);
        assert_eq!(
            spend_token(&c, "tok_1", "ten_2", "svc_agent_1", 1).expect("spend"),
            Spend::Unknown
        );
        assert_eq!(
            spend_token(&c, "tok_1", "ten_1", "svc_agent_1", 1).expect("spend"),
            Spend::Spent {
                call_id: "svc_call_1".into()
            }
        );
        assert_eq!(
            spend_token(&c, "tok_1", "ten_1", "svc_agent_1", 2).expect("spend"),
            Spend::AlreadyUsed
        );
    }

    #[test]
    fn a_ticket_is_accepted_once_and_the_call_ends_with_whole_seconds() {
        let c = conn();
        mint(&c, "tok_1", "svc_call_1", 0);
        live(&c, "svc_call_1", "ext_1", 1_000);
        assert!(
            claim_ticket(&c, "ext_1", "wrong", 2_000)
                .expect("claim")
                .is_none()
        );
        let call = claim_ticket(&c, "ext_1", "hash-ext_1", 2_000)
            .expect("claim")
            .expect("live call");
        assert_eq!(call.call_id, "svc_call_1");
        assert!(
            claim_ticket(&c, "ext_1", "hash-ext_1", 2_000)
                .expect("claim")
                .is_none()
        );
        assert_eq!(
            end_call(&c, "svc_call_1", "[]", 8_999).expect("end"),
            Some(8),
            "7.999 s live: 8 seconds begun"
        );
        assert_eq!(end_call(&c, "svc_call_1", "[]", 9_999).expect("end"), None);
        assert_eq!(usage_secs(&c, "ten_1", 0, 10_000).expect("usage"), 8);
        assert_eq!(usage_secs(&c, "ten_1", 9_000, 10_000).expect("usage"), 0);
    }

    /// Issue 44: every scripted practice call reported `durationSec` 0.
    #[test]
    fn a_call_live_for_less_than_a_second_lasted_one() {
        let c = conn();
        mint(&c, "tok_1", "svc_call_1", 0);
        live(&c, "svc_call_1", "ext_1", 1_000);
        assert_eq!(
            end_call(&c, "svc_call_1", "[]", 1_200).expect("end"),
            Some(1)
        );
        mint(&c, "tok_2", "svc_call_2", 0);
        live(&c, "svc_call_2", "ext_2", 1_000);
        assert_eq!(
            end_call(&c, "svc_call_2", "[]", 3_000).expect("end"),
            Some(2),
            "whole seconds stay as they are"
        );
    }

    #[test]
    fn only_scored_calls_are_read_and_listed_newest_first_with_keyset_paging() {
        let c = conn();
        for i in 0..5 {
            let call = format!("svc_call_{i}");
            mint(&c, &format!("tok_{i}"), &call, 0);
            live(&c, &call, &format!("ext_{i}"), 0);
            end_call(&c, &call, "[]", 1_000 * (i + 1)).expect("end");
            assert!(begin_scoring(&c, &call, 10_000).expect("begin").is_some());
            let score = if i == 2 { None } else { Some("{}") };
            assert!(record_outcome(&c, &call, score, 10_000).expect("outcome"));
        }
        assert!(
            scored_call(&c, "ten_1", "svc_call_2")
                .expect("read")
                .is_none()
        );
        assert!(
            scored_call(&c, "ten_2", "svc_call_1")
                .expect("read")
                .is_none()
        );
        assert!(
            scored_call(&c, "ten_1", "svc_call_1")
                .expect("read")
                .is_some()
        );
        let mut filter = CallFilter {
            tenant_id: "ten_1".into(),
            source: "roleplay".into(),
            from: 0,
            limit: 2,
            ..CallFilter::default()
        };
        let page = list_calls(&c, &filter).expect("list");
        assert_eq!(
            page.iter().map(|r| r.row.id.as_str()).collect::<Vec<_>>(),
            ["svc_call_4", "svc_call_3", "svc_call_1"]
        );
        filter.after = Some((page[1].list_at, page[1].row.id.clone()));
        let page = list_calls(&c, &filter).expect("list");
        assert_eq!(
            page.iter().map(|r| r.row.id.as_str()).collect::<Vec<_>>(),
            ["svc_call_1", "svc_call_0"]
        );
        filter.after = None;
        filter.to = Some(2_000);
        filter.from = 2_000;
        let page = list_calls(&c, &filter).expect("list");
        assert_eq!(
            page.iter().map(|r| r.row.id.as_str()).collect::<Vec<_>>(),
            ["svc_call_1"]
        );
    }

    #[test]
    fn scoring_resumes_after_a_restart_and_abandoned_live_calls_end_without_transcript() {
        let c = conn();
        mint(&c, "tok_1", "svc_call_1", 0);
        live(&c, "svc_call_1", "ext_1", 0);
        mint(&c, "tok_2", "svc_call_2", 0);
        live(&c, "svc_call_2", "ext_2", 0);
        end_call(&c, "svc_call_2", "[]", 5_000).expect("end");
        begin_scoring(&c, "svc_call_2", 5_000).expect("begin");
        assert_eq!(live_calls(&c).expect("live"), ["svc_call_1"]);
        assert!(abandon_live_call(&c, "svc_call_1", 9_000_000, 2_000).expect("abandon"));
        assert_eq!(
            usage_secs(&c, "ten_1", 0, i64::MAX).expect("usage"),
            2 + 5,
            "capped at the ceiling"
        );
        assert_eq!(
            calls_to_score(&c).expect("pending"),
            ["svc_call_1", "svc_call_2"]
        );
        let call = begin_scoring(&c, "svc_call_1", 6_000)
            .expect("begin")
            .expect("waiting");
        assert_eq!(call.transcript, None);
    }
}
