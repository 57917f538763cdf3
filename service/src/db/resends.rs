//! SQL of resends: a delivery sent again on the operator's request (`svc-cli sandbox resend`),
//! queued in `webhook_resends` by whichever process asks (the CLI beside a running sandbox) and
//! made by the running service's outbox worker, once each, as an attempt of its own marked
//! `resend` in the attempt log. A resend leaves the delivery's state and retry schedule as they
//! were: it is outside the contract's retry policy. Times are unix milliseconds.

use rusqlite::{Connection, OptionalExtension, params};

use super::outbox::{self, AttemptLog, Claimed, LEASE_MS};
use super::{Db, DbError};

/// A resend claimed for its one attempt: the delivery as the outbox sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedResend {
    /// The request's number.
    pub seq: i64,
    /// The delivery, as a claimed delivery reads (its `attempts` are those made so far).
    pub delivery: Claimed,
    /// Whether the tenant's faults apply to it.
    pub with_faults: bool,
}

/// A resend asked for and, once made, its attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResendRow {
    /// The request's number.
    pub seq: i64,
    /// The delivery's `wh_…` id.
    pub webhook_id: String,
    /// The call the delivery announces.
    pub call_id: String,
    /// The attempt's number in the delivery's log, once made.
    pub attempt: Option<u32>,
    /// The attempt, once made.
    pub log: Option<AttemptLog>,
}

/// Why a resend could not be asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResendRefused {
    /// No delivery with this id for the tenant.
    UnknownWebhook(String),
}

fn queue(
    conn: &Connection,
    tenant_id: &str,
    webhook_ids: &[String],
    with_faults: bool,
    now: i64,
) -> Result<Result<Vec<i64>, ResendRefused>, DbError> {
    let mut seqs = Vec::with_capacity(webhook_ids.len());
    for id in webhook_ids {
        let known: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = ?1 AND tenant_id = ?2)",
            params![id, tenant_id],
            |r| r.get(0),
        )?;
        if !known {
            return Ok(Err(ResendRefused::UnknownWebhook(id.clone())));
        }
        seqs.push(conn.query_row(
            "INSERT INTO webhook_resends (delivery_id, tenant_id, with_faults, requested_at)
             VALUES (?1, ?2, ?3, ?4) RETURNING seq",
            params![id, tenant_id, with_faults, now],
            |r| r.get(0),
        )?);
    }
    Ok(Ok(seqs))
}

/// Claims the earliest resend asked for and not made (leased for [`LEASE_MS`]).
fn claim(conn: &Connection, now: i64) -> rusqlite::Result<Option<ClaimedResend>> {
    conn.query_row(
        "UPDATE webhook_resends SET lease_until = ?1 + ?2
         WHERE seq = (SELECT seq FROM webhook_resends
                      WHERE attempt IS NULL AND (lease_until IS NULL OR lease_until <= ?1)
                      ORDER BY seq LIMIT 1)
         RETURNING seq, delivery_id, with_faults",
        params![now, LEASE_MS],
        |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get(2)?)),
    )
    .optional()?
    .map(|(seq, id, with_faults)| {
        conn.query_row(
            "SELECT id, tenant_id, body, attempts, call_id, created_at, traceparent FROM webhook_deliveries
             WHERE id = ?1",
            [&id],
            outbox::claimed_row,
        )
        .map(|delivery| ClaimedResend {
            seq,
            delivery,
            with_faults,
        })
    })
    .transpose()
}

fn read_resends(conn: &Connection, seqs: &[i64]) -> rusqlite::Result<Vec<ResendRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT r.seq, r.delivery_id, r.attempt, a.attempted_at, a.url, a.status, a.latency_ms,
                a.error, a.faults, d.call_id
         FROM webhook_resends r
         JOIN webhook_deliveries d ON d.id = r.delivery_id
         LEFT JOIN webhook_attempts a ON a.delivery_id = r.delivery_id AND a.attempt = r.attempt
         WHERE r.seq = ?1",
    )?;
    let mut rows = Vec::with_capacity(seqs.len());
    for seq in seqs {
        let row = stmt
            .query_row([seq], |r| {
                let attempt: Option<i64> = r.get(2)?;
                let attempted_at: Option<i64> = r.get(3)?;
                Ok(ResendRow {
                    seq: r.get(0)?,
                    webhook_id: r.get(1)?,
                    call_id: r.get(9)?,
                    attempt: attempt.and_then(|n| u32::try_from(n).ok()),
                    log: match attempted_at {
                        Some(attempted_at) => Some(AttemptLog {
                            attempted_at,
                            url: r.get(4)?,
                            status: r.get(5)?,
                            latency_ms: r.get(6)?,
                            error: r.get(7)?,
                            faults: outbox::faults_of(r.get(8)?),
                            resend: true,
                        }),
                        None => None,
                    },
                })
            })
            .optional()?;
        rows.extend(row);
    }
    Ok(rows)
}

impl Db {
    /// Asks for one resend of each delivery of `webhook_ids` (all the tenant's, or none is
    /// queued), for the running service's outbox worker; their numbers, in order.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn queue_resends(
        &self,
        tenant_id: &str,
        webhook_ids: Vec<String>,
        with_faults: bool,
        now: i64,
    ) -> Result<Result<Vec<i64>, ResendRefused>, DbError> {
        let tenant_id = tenant_id.to_owned();
        self.write(move |tx| queue(tx, &tenant_id, &webhook_ids, with_faults, now))
            .await
    }

    /// Claims the earliest resend due.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn claim_resend(&self, now: i64) -> Result<Option<ClaimedResend>, DbError> {
        self.write(move |tx| Ok(claim(tx, now)?)).await
    }

    /// Logs the attempt of resend `seq` (of delivery `id`) and marks the resend made.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn record_resend(
        &self,
        seq: i64,
        id: &str,
        attempt: AttemptLog,
    ) -> Result<(), DbError> {
        let id = id.to_owned();
        self.write(move |tx| {
            let number = outbox::log_attempt(tx, &id, &AttemptLog {
                resend: true,
                ..attempt
            })?;
            tx.execute(
                "UPDATE webhook_resends SET attempt = ?2, lease_until = NULL WHERE seq = ?1",
                params![seq, number],
            )?;
            Ok(())
        })
        .await
    }

    /// The resends numbered `seqs`, made or not, in that order (unknown numbers left out).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn resends(&self, seqs: Vec<i64>) -> Result<Vec<ResendRow>, DbError> {
        self.read(move |conn| Ok(read_resends(conn, &seqs)?)).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::outbox::tests::conn;
    use super::*;

    #[test]
    fn a_resend_is_claimed_once_and_numbered_after_the_attempts_logged() {
        let c = conn();
        let delivery = outbox::NewDelivery {
            id: "wh_1",
            tenant_id: "ten_1",
            call_id: "svc_call_1",
            body: "{\"a\":1}",
            traceparent: None,
        };
        outbox::enqueue(&c, delivery, 0).expect("enqueue");
        let first = AttemptLog {
            attempted_at: 1,
            url: None,
            status: Some(500),
            latency_ms: 1,
            error: Some("HTTP 500".into()),
            faults: Vec::new(),
            resend: false,
        };
        outbox::record_attempt(&c, "wh_1", &first, outbox::Next::GiveUp).expect("record");
        let refused = queue(&c, "ten_2", &["wh_1".to_owned()], false, 5).expect("queue");
        assert_eq!(refused, Err(ResendRefused::UnknownWebhook("wh_1".into())));
        let seqs = queue(&c, "ten_1", &["wh_1".to_owned()], true, 5)
            .expect("queue")
            .expect("known");
        assert_eq!(next_due_of(&c), Some(5));
        let claimed = claim(&c, 10).expect("claim").expect("due");
        assert_eq!(claimed.delivery.body, "{\"a\":1}");
        assert!(claimed.with_faults);
        assert_eq!(claim(&c, 11).expect("claim"), None, "leased");
        let made = AttemptLog {
            attempted_at: 12,
            status: Some(200),
            error: None,
            ..first
        };
        let number = outbox::log_attempt(&c, "wh_1", &AttemptLog {
            resend: true,
            ..made
        })
        .expect("log");
        assert_eq!(number, 2);
        c.execute(
            "UPDATE webhook_resends SET attempt = ?2 WHERE seq = ?1",
            params![seqs[0], number],
        )
        .expect("mark");
        let rows = read_resends(&c, &seqs).expect("read");
        assert_eq!(rows[0].attempt, Some(2));
        assert_eq!(rows[0].log.as_ref().map(|l| (l.status, l.resend)), Some((Some(200), true)));
        assert_eq!(claim(&c, i64::MAX / 2).expect("claim"), None, "made once");
        let listed = outbox::list_deliveries(&c, None, 10).expect("list");
        assert_eq!(listed[0].state, "failed", "the delivery's own state is unchanged");
        assert_eq!(
            listed[0].attempts.iter().map(|a| a.resend).collect::<Vec<_>>(),
            [false, true]
        );
    }

    fn next_due_of(c: &Connection) -> Option<i64> {
        outbox::next_due(c).expect("next")
    }
}
