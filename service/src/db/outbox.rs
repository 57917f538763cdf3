//! SQL for the durable webhook outbox: deliveries queued in the same transaction as a call's
//! outcome, claimed with a lease (so a crash mid-send retries rather than loses), the attempt
//! log (with the faults injected into each attempt), the operator's delivery listing, and what a
//! tenant still has to be sent (resends asked for included: see [`super::resends`]). Times are
//! unix milliseconds.
//!
//! Delivery states: `pending` (an attempt is due at `next_attempt_at`), `delivered`, `failed`
//! (both attempts failed; never sent again).

use rusqlite::{Connection, OptionalExtension, params};

use crate::faults::AppliedFault;

/// How long a claimed delivery is hidden from other claimers (longer than any attempt).
pub(super) const LEASE_MS: i64 = 60_000;

/// A delivery to queue.
#[derive(Debug, Clone, Copy)]
pub(super) struct NewDelivery<'a> {
    /// `wh_…` id.
    pub(super) id: &'a str,
    /// Tenant.
    pub(super) tenant_id: &'a str,
    /// The call it announces.
    pub(super) call_id: &'a str,
    /// The body, sent as is on every attempt.
    pub(super) body: &'a str,
    /// The trace context of the span that queued it, if traced.
    pub(super) traceparent: Option<&'a str>,
}

/// Queues a delivery due now.
///
/// # Errors
/// SQLite errors.
pub(super) fn enqueue(conn: &Connection, delivery: NewDelivery<'_>, now: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO webhook_deliveries (id, tenant_id, call_id, body, state, next_attempt_at, created_at, updated_at, traceparent)
         VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5, ?5, ?6)",
        params![
            delivery.id,
            delivery.tenant_id,
            delivery.call_id,
            delivery.body,
            now,
            delivery.traceparent
        ],
    )?;
    Ok(())
}

/// A delivery claimed for one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// `wh_…` id, the same on every attempt.
    pub id: String,
    /// Tenant, to read its current endpoint and secret.
    pub tenant_id: String,
    /// The body, exactly as queued.
    pub body: String,
    /// Attempts made before this one.
    pub attempts: i64,
    /// The call it announces.
    pub call_id: String,
    /// When it was queued (ms).
    pub created_at: i64,
    /// The trace context of the span that queued it (W3C `traceparent`), if traced: each
    /// attempt's span continues that trace.
    pub traceparent: Option<String>,
}

/// A [`Claimed`] from a row of `id, tenant_id, body, attempts, call_id, created_at`.
pub(super) fn claimed_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Claimed> {
    Ok(Claimed {
        id: r.get(0)?,
        tenant_id: r.get(1)?,
        body: r.get(2)?,
        attempts: r.get(3)?,
        call_id: r.get(4)?,
        created_at: r.get(5)?,
        traceparent: r.get(6)?,
    })
}

/// Deliveries of one tenant attempted at once, at most: a tenant whose endpoint accepts and
/// never answers holds this many workers for the 10-second deadline, never all of them.
pub(crate) const MAX_IN_FLIGHT_PER_TENANT: i64 = 2;

/// Claims a due delivery for one attempt (leased for [`LEASE_MS`]), fairly across tenants:
/// among tenants with fewer than [`MAX_IN_FLIGHT_PER_TENANT`] attempts in flight, the one
/// served least recently goes first (round-robin), and within a tenant the earliest due.
///
/// # Errors
/// SQLite errors.
pub(super) fn claim_due(conn: &Connection, now: i64) -> rusqlite::Result<Option<Claimed>> {
    let claimed = conn
        .query_row(
            "UPDATE webhook_deliveries SET lease_until = ?1 + ?2, updated_at = ?1
             WHERE id = (
                SELECT d.id FROM webhook_deliveries d
                LEFT JOIN webhook_turns t ON t.tenant_id = d.tenant_id
                WHERE d.state = 'pending' AND d.next_attempt_at <= ?1
                  AND (d.lease_until IS NULL OR d.lease_until <= ?1)
                  AND (SELECT COUNT(*) FROM webhook_deliveries l
                       WHERE l.tenant_id = d.tenant_id AND l.state = 'pending'
                         AND l.lease_until > ?1) < ?3
                ORDER BY COALESCE(t.last_claimed_at, 0), d.next_attempt_at
                LIMIT 1)
             RETURNING id, tenant_id, body, attempts, call_id, created_at, traceparent",
            params![now, LEASE_MS, MAX_IN_FLIGHT_PER_TENANT],
            claimed_row,
        )
        .optional()?;
    if let Some(claimed) = &claimed {
        conn.execute(
            "INSERT INTO webhook_turns (tenant_id, last_claimed_at) VALUES (?1, ?2)
             ON CONFLICT (tenant_id) DO UPDATE SET last_claimed_at = ?2",
            params![claimed.tenant_id, now],
        )?;
    }
    Ok(claimed)
}

/// When the next pending delivery falls due (its lease included), if any.
///
/// # Errors
/// SQLite errors.
pub(super) fn next_due(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.query_row(
        "SELECT MIN(due) FROM (
            SELECT MAX(next_attempt_at, COALESCE(lease_until, 0)) AS due FROM webhook_deliveries
            WHERE state = 'pending'
            UNION ALL
            SELECT MAX(requested_at, COALESCE(lease_until, 0)) FROM webhook_resends
            WHERE attempt IS NULL)",
        [],
        |r| r.get(0),
    )
}

/// Puts a delivery's first attempt off until `at`, logging nothing (an injected delay).
///
/// # Errors
/// SQLite errors.
pub(super) fn defer(conn: &Connection, id: &str, at: i64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE webhook_deliveries SET next_attempt_at = ?2, lease_until = NULL WHERE id = ?1",
        params![id, at],
    )?;
    Ok(())
}

/// One logged attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptLog {
    /// When it was made.
    pub attempted_at: i64,
    /// The URL it went to (none when the tenant had no endpoint).
    pub url: Option<String>,
    /// HTTP status, if a response arrived.
    pub status: Option<u16>,
    /// Milliseconds until the response or failure.
    pub latency_ms: i64,
    /// Why it failed.
    pub error: Option<String>,
    /// The faults injected into it (none outside fault injection).
    pub faults: Vec<AppliedFault>,
    /// Whether it was a resend the operator asked for, outside the retry policy.
    pub resend: bool,
}

/// The faults of an attempt as stored: their names, comma-separated; `None` for none.
fn faults_text(faults: &[AppliedFault]) -> Option<String> {
    (!faults.is_empty()).then(|| {
        faults
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// The faults of an attempt from their stored text (a name this build does not know is left
/// out rather than failing the listing).
pub(super) fn faults_of(text: Option<String>) -> Vec<AppliedFault> {
    text.as_deref()
        .unwrap_or_default()
        .split(',')
        .filter_map(AppliedFault::parse)
        .collect()
}

/// What happens to a delivery after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// It succeeded.
    Delivered,
    /// It failed; try again at this time.
    RetryAt(i64),
    /// It failed for the last time.
    GiveUp,
}

/// Logs an attempt and moves the delivery on (call inside a transaction).
///
/// # Errors
/// SQLite errors.
pub(super) fn record_attempt(
    conn: &Connection,
    id: &str,
    attempt: &AttemptLog,
    next: Next,
) -> rusqlite::Result<()> {
    // The retry policy counts its own attempts; the log numbers every attempt, resends too.
    conn.execute(
        "UPDATE webhook_deliveries SET attempts = attempts + 1 WHERE id = ?1",
        [id],
    )?;
    log_attempt(conn, id, attempt)?;
    let (state, due) = match next {
        Next::Delivered => ("delivered", None),
        Next::RetryAt(at) => ("pending", Some(at)),
        Next::GiveUp => ("failed", None),
    };
    conn.execute(
        "UPDATE webhook_deliveries SET state = ?2, next_attempt_at = ?3, lease_until = NULL, updated_at = ?4 WHERE id = ?1",
        params![id, state, due, attempt.attempted_at],
    )?;
    Ok(())
}

/// Adds `attempt` to the log of delivery `id`, numbered after the last one logged; returns
/// its number.
///
/// # Errors
/// SQLite errors.
pub(super) fn log_attempt(
    conn: &Connection,
    id: &str,
    attempt: &AttemptLog,
) -> rusqlite::Result<i64> {
    conn.query_row(
        "INSERT INTO webhook_attempts (delivery_id, attempt, attempted_at, url, status, latency_ms, error, faults, resend)
         VALUES (?1, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM webhook_attempts WHERE delivery_id = ?1),
                 ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         RETURNING attempt",
        params![id, attempt.attempted_at, attempt.url, attempt.status, attempt.latency_ms, attempt.error, faults_text(&attempt.faults), attempt.resend],
        |r| r.get(0),
    )
}

/// A delivery with its attempts, for the operator listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    /// `wh_…` id.
    pub id: String,
    /// Tenant.
    pub tenant_id: String,
    /// The call.
    pub call_id: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// When the next attempt is due (pending only).
    pub next_attempt_at: Option<i64>,
    /// When it was queued.
    pub created_at: i64,
    /// Every attempt, oldest first.
    pub attempts: Vec<AttemptLog>,
}

/// Deliveries, newest first, optionally of one tenant, at most `limit`.
///
/// # Errors
/// SQLite errors.
pub(super) fn list_deliveries(
    conn: &Connection,
    tenant_id: Option<&str>,
    limit: u32,
) -> rusqlite::Result<Vec<DeliveryRow>> {
    let mut stmt = conn.prepare(
        "SELECT id, tenant_id, call_id, state, next_attempt_at, created_at FROM webhook_deliveries
         WHERE ?1 IS NULL OR tenant_id = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2",
    )?;
    let mut rows: Vec<DeliveryRow> = stmt
        .query_map(params![tenant_id, limit], |r| {
            Ok(DeliveryRow {
                id: r.get(0)?,
                tenant_id: r.get(1)?,
                call_id: r.get(2)?,
                state: r.get(3)?,
                next_attempt_at: r.get(4)?,
                created_at: r.get(5)?,
                attempts: Vec::new(),
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut attempts = conn.prepare(
        "SELECT attempted_at, url, status, latency_ms, error, faults, resend FROM webhook_attempts WHERE delivery_id = ?1 ORDER BY attempt",
    )?;
    for row in &mut rows {
        row.attempts = attempts
            .query_map([&row.id], |r| {
                Ok(AttemptLog {
                    attempted_at: r.get(0)?,
                    url: r.get(1)?,
                    status: r.get(2)?,
                    latency_ms: r.get(3)?,
                    error: r.get(4)?,
                    faults: faults_of(r.get(5)?),
                    resend: r.get(6)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
    }
    Ok(rows)
}

/// What a tenant still has to be sent: deliveries waiting for their first attempt or for
/// their retry, and calls being scored (each queues its `call.scored` once scored).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Pending deliveries not attempted yet (injected delays included).
    pub first_attempts: u64,
    /// Pending deliveries whose first attempt failed, waiting for their retry.
    pub retries: u64,
    /// Calls that ended and are being scored.
    pub scoring: u64,
    /// Resends asked for and not made yet.
    pub resends: u64,
    /// When the earliest pending delivery is due (ms), if any.
    pub next_attempt_at: Option<i64>,
}

impl Backlog {
    /// Whether nothing is left to send: every first attempt made, every retry made or given
    /// up, every resend asked for made, no call being scored.
    pub fn is_idle(&self) -> bool {
        self.first_attempts == 0 && self.retries == 0 && self.scoring == 0 && self.resends == 0
    }
}

/// The backlog of `tenant_id`.
///
/// # Errors
/// SQLite errors.
pub(super) fn backlog(conn: &Connection, tenant_id: &str) -> rusqlite::Result<Backlog> {
    let (first_attempts, retries, next_attempt_at) = conn.query_row(
        "SELECT COALESCE(SUM(attempts = 0), 0), COALESCE(SUM(attempts > 0), 0), MIN(next_attempt_at)
         FROM webhook_deliveries WHERE tenant_id = ?1 AND state = 'pending'",
        [tenant_id],
        |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get(2)?)),
    )?;
    let scoring: i64 = conn.query_row(
        "SELECT COUNT(*) FROM calls WHERE tenant_id = ?1 AND state IN ('ended', 'scoring')",
        [tenant_id],
        |r| r.get(0),
    )?;
    let resends: i64 = conn.query_row(
        "SELECT COUNT(*) FROM webhook_resends WHERE tenant_id = ?1 AND attempt IS NULL",
        [tenant_id],
        |r| r.get(0),
    )?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(Backlog {
        first_attempts: count(first_attempts),
        retries: count(retries),
        scoring: count(scoring),
        resends: count(resends),
        next_attempt_at,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// An in-memory database with the whole schema (the resend tests use it too).
    pub(in crate::db) fn conn() -> Connection {
        let mut conn = Connection::open_in_memory().expect("open");
        super::super::migrations::migrate(&mut conn).expect("schema");
        conn
    }

    fn queued<'a>(id: &'a str, tenant_id: &'a str, call_id: &'a str) -> NewDelivery<'a> {
        NewDelivery {
            id,
            tenant_id,
            call_id,
            body: "{}",
            traceparent: None,
        }
    }

    fn log(at: i64, status: Option<u16>, error: Option<&str>) -> AttemptLog {
        AttemptLog {
            attempted_at: at,
            url: Some("https://x.test".into()),
            status,
            latency_ms: 3,
            error: error.map(Into::into),
            faults: Vec::new(),
            resend: false,
        }
    }

    #[test]
    fn a_claimed_delivery_is_hidden_until_its_lease_ends() {
        let c = conn();
        enqueue(&c, queued("wh_1", "ten_1", "svc_call_1"), 100).expect("enqueue");
        assert_eq!(claim_due(&c, 99).expect("claim"), None);
        let claimed = claim_due(&c, 100).expect("claim").expect("due");
        assert_eq!((claimed.id.as_str(), claimed.attempts), ("wh_1", 0));
        assert_eq!(claim_due(&c, 101).expect("claim"), None);
        assert_eq!(next_due(&c).expect("next"), Some(100 + LEASE_MS));
        assert!(claim_due(&c, 100 + LEASE_MS).expect("claim").is_some());
    }

    #[test]
    fn tenants_take_turns_and_none_has_more_than_two_attempts_in_flight() {
        let c = conn();
        for n in 0..5 {
            let id = format!("wh_busy_{n}");
            enqueue(&c, queued(&id, "ten_busy", "svc_call_b"), n).expect("enqueue");
        }
        enqueue(&c, queued("wh_quiet", "ten_quiet", "svc_call_q"), 10).expect("enqueue");
        let tenant = |c: &Connection, now| {
            claim_due(c, now)
                .expect("claim")
                .map(|claimed| claimed.tenant_id)
        };
        // The busy tenant's first delivery is due first; then the quiet tenant gets its turn
        // although the busy one has older deliveries due.
        assert_eq!(tenant(&c, 20).as_deref(), Some("ten_busy"));
        assert_eq!(tenant(&c, 21).as_deref(), Some("ten_quiet"));
        assert_eq!(tenant(&c, 22).as_deref(), Some("ten_busy"));
        assert_eq!(tenant(&c, 23), None, "two of the busy tenant are in flight");
        // Once the leases ran out, the quiet tenant (served least recently) goes first, then
        // the busy one has its slots again.
        let later = 22 + LEASE_MS;
        assert_eq!(tenant(&c, later).as_deref(), Some("ten_quiet"));
        assert_eq!(tenant(&c, later).as_deref(), Some("ten_busy"));
        assert_eq!(tenant(&c, later).as_deref(), Some("ten_busy"));
        assert_eq!(tenant(&c, later), None);
    }

    #[test]
    fn a_failed_attempt_schedules_the_retry_and_the_second_failure_gives_up() {
        let c = conn();
        enqueue(&c, queued("wh_1", "ten_1", "svc_call_1"), 0).expect("enqueue");
        claim_due(&c, 0).expect("claim");
        record_attempt(
            &c,
            "wh_1",
            &log(0, Some(500), Some("HTTP 500")),
            Next::RetryAt(300_000),
        )
        .expect("record");
        assert_eq!(next_due(&c).expect("next"), Some(300_000));
        assert_eq!(claim_due(&c, 299_999).expect("claim"), None);
        let again = claim_due(&c, 300_000).expect("claim").expect("due");
        assert_eq!(again.attempts, 1);
        record_attempt(
            &c,
            "wh_1",
            &log(300_000, None, Some("timed out")),
            Next::GiveUp,
        )
        .expect("record");
        assert_eq!(claim_due(&c, i64::MAX / 2).expect("claim"), None);
        assert_eq!(next_due(&c).expect("next"), None);
        let rows = list_deliveries(&c, None, 10).expect("list");
        assert_eq!(rows[0].state, "failed");
        assert_eq!(rows[0].attempts.len(), 2);
        assert_eq!(rows[0].attempts[0].status, Some(500));
        assert_eq!(
            list_deliveries(&c, Some("ten_2"), 10).expect("list").len(),
            0
        );
    }

    #[test]
    fn the_faults_of_an_attempt_are_logged_with_it() {
        let c = conn();
        enqueue(&c, queued("wh_1", "ten_1", "svc_call_1"), 0).expect("enqueue");
        let attempt = AttemptLog {
            faults: vec![AppliedFault::Delayed, AppliedFault::SentTwice],
            ..log(0, Some(200), None)
        };
        record_attempt(&c, "wh_1", &attempt, Next::Delivered).expect("record");
        let rows = list_deliveries(&c, None, 10).expect("list");
        assert_eq!(rows[0].attempts, vec![attempt]);
    }

    #[test]
    fn the_backlog_counts_first_attempts_retries_and_calls_being_scored_of_one_tenant() {
        let c = conn();
        assert!(backlog(&c, "ten_1").expect("backlog").is_idle());
        enqueue(&c, queued("wh_1", "ten_1", "svc_call_1"), 10).expect("enqueue");
        enqueue(&c, queued("wh_2", "ten_1", "svc_call_2"), 20).expect("enqueue");
        enqueue(&c, queued("wh_3", "ten_2", "svc_call_3"), 5).expect("enqueue");
        record_attempt(
            &c,
            "wh_2",
            &log(20, Some(500), Some("HTTP 500")),
            Next::RetryAt(900),
        )
        .expect("record");
        let left = backlog(&c, "ten_1").expect("backlog");
        assert_eq!(
            (left.first_attempts, left.retries, left.scoring),
            (1, 1, 0)
        );
        assert_eq!(left.next_attempt_at, Some(10));
        assert!(!left.is_idle());
        record_attempt(&c, "wh_1", &log(30, Some(200), None), Next::Delivered).expect("record");
        record_attempt(&c, "wh_2", &log(900, None, Some("down")), Next::GiveUp).expect("record");
        let done = backlog(&c, "ten_1").expect("backlog");
        assert!(done.is_idle(), "{done:?}");
        assert_eq!(done.next_attempt_at, None);
    }
}
