//! Scored calls in the store: what a listing finds already stored, storing a fetched call (new,
//! changed or unchanged, in one transaction), the change log, how each call reached the store
//! (webhook or reconcile), and the listed calls whose detail could not be stored.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::sql::{Sql, params};
use super::{Store, StoreError};
use svc_client::{CallSource, RawCallDetail, RawCallRow};
use svc_reconcile::{
    Arrival, CallFailure, KnownCall, Stored, Version, first_scored, listed_at, scored_at,
};

/// How the store writes how a call arrived (its `delivery` column).
fn arrival_str(arrival: Arrival) -> &'static str {
    match arrival {
        Arrival::Webhook => "webhook",
        Arrival::Awaiting => "awaiting",
        Arrival::Recovered => "recovered",
        Arrival::Backfill => "backfill",
    }
}

/// Who stores a call, and the rules to classify it by.
#[derive(Debug, Clone)]
pub struct Writer {
    /// `reconcile` or `webhook`.
    pub by: &'static str,
    /// The reconcile run storing it.
    pub run_id: Option<i64>,
    /// Now, as the store writes it.
    pub now: String,
    /// Since when a receiver writes to the store's ledger (unix ms; `None`: never). A new call
    /// scored before it, with no webhook, counts as history.
    pub ledger_since_ms: Option<i64>,
    /// A new call with no webhook that was scored at or before this (unix ms) missed its
    /// delivery; a later one is still awaiting it.
    pub missed_before_ms: i64,
}

impl Writer {
    /// The writer of a call its webhook brought, stored now.
    pub fn webhook() -> Self {
        Self {
            by: "webhook",
            run_id: None,
            now: svc_reconcile::time::format_ts(chrono::Utc::now()),
            ledger_since_ms: None,
            missed_before_ms: i64::MIN,
        }
    }
}

/// What a stored call is indexed by, read from its detail.
struct Columns {
    source: String,
    agent_id: Option<String>,
    agency_id: Option<String>,
    platform_agent_id: Option<String>,
    platform_agency_id: Option<String>,
    started_at: Option<String>,
    ended_at: Option<String>,
    scored_at: Option<String>,
    updated_at: Option<String>,
    scored_ms: Option<i64>,
    /// When the call was first scored, which is when its `call.scored` was sent (unix ms):
    /// `scoredAt`, except for a real call re-dispositioned since (its `scoredAt` moved, with
    /// no new delivery), whose first scoring is its `createdAt`.
    first_scored_ms: Option<i64>,
    listed_ms: Option<i64>,
    overall_score: f64,
    /// The detail's `score` object as the service sent it (JSON text).
    score: String,
}

/// The `score` of a detail, read without building the rest (the transcript is skipped).
#[derive(serde::Deserialize)]
struct ScoreText<'a> {
    #[serde(borrow)]
    score: &'a serde_json::value::RawValue,
}

impl Columns {
    /// Whether this detail is older than the stored one whose `scoredAt` and `updatedAt` are
    /// given ([`Version::is_older_than`], which compares those alone).
    fn is_older_than(&self, scored_at: Option<&str>, updated_at: Option<&str>) -> bool {
        let mine = Version {
            score: Value::Null,
            scored_at: self.scored_at.clone(),
            updated_at: self.updated_at.clone(),
        };
        let stored = Version {
            score: Value::Null,
            scored_at: scored_at.map(str::to_owned),
            updated_at: updated_at.map(str::to_owned),
        };
        mine.is_older_than(&stored)
    }

    fn of(detail: &RawCallDetail) -> Self {
        let d = &detail.detail;
        let r = &d.row;
        let ms = |at: Option<chrono::DateTime<chrono::Utc>>| at.map(|t| t.timestamp_millis());
        let listed_ms = ms(listed_at(detail));
        let scored_ms = ms(scored_at(detail));
        let first_scored_ms = ms(first_scored(detail));
        // The typed reading succeeded, so the text is a JSON object with a score.
        let score = serde_json::from_str::<ScoreText<'_>>(&detail.json)
            .map_or_else(|_| "null".to_owned(), |t| t.score.get().to_owned());
        Self {
            source: r.source.as_str().to_owned(),
            agent_id: r.agent_id.as_ref().map(|a| a.as_str().to_owned()),
            agency_id: r.agency_id.as_ref().map(|a| a.as_str().to_owned()),
            platform_agent_id: r.platform_agent_id.clone(),
            platform_agency_id: r.platform_agency_id.clone(),
            started_at: r.started_at.clone(),
            ended_at: r.ended_at.clone(),
            scored_at: r.scored_at.clone(),
            updated_at: d.updated_at.clone(),
            scored_ms,
            first_scored_ms,
            listed_ms,
            overall_score: d.score.overall_score,
            score,
        }
    }

    /// The fields whose change is logged.
    fn tracked(&self) -> Value {
        let score = serde_json::from_str::<Value>(&self.score).unwrap_or(Value::Null);
        json!({ "score": score, "scoredAt": self.scored_at, "updatedAt": self.updated_at })
    }
}

impl Store {
    /// What the store holds of each of `ids` (absent ids are not stored).
    ///
    /// # Errors
    /// A database error.
    pub fn known_calls(&self, ids: &[String]) -> Result<HashMap<String, KnownCall>, StoreError> {
        self.read(|db| {
            let mut known = HashMap::new();
            for id in ids {
                let found = db.query_opt(
                    "SELECT scored_at, row_json IS NOT NULL FROM calls WHERE id = $1",
                    params![id],
                )?;
                if let Some(row) = found {
                    let call = KnownCall {
                        scored_at: row.opt_text(0)?,
                        has_row: row.bool(1)?,
                    };
                    known.insert(id.clone(), call);
                }
            }
            Ok(known)
        })
    }

    /// Stores list rows of known calls that were stored without one; one transaction.
    ///
    /// # Errors
    /// A database error.
    pub fn fill_rows(&self, rows: &[&RawCallRow]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        self.write(|db| fill_rows(db, rows))
    }

    /// Stores a batch of reconcile in one transaction: the fetched calls, the failed ones,
    /// and the missing list rows of known calls; all of it or nothing.
    ///
    /// # Errors
    /// A database error (nothing of the batch is stored).
    pub fn store_batch(
        &self,
        calls: &[(Option<RawCallRow>, RawCallDetail)],
        failures: &[CallFailure],
        fills: &[&RawCallRow],
        writer: &Writer,
    ) -> Result<Vec<Stored>, StoreError> {
        self.write(|db| {
            let stored = calls
                .iter()
                .map(|(row, detail)| store_call(db, row.as_ref(), detail, writer))
                .collect::<Result<Vec<_>, _>>()?;
            for f in failures {
                let run_id = writer.run_id.unwrap_or_default();
                record_failure(db, &f.row, &f.error, f.http_status, run_id, &writer.now)?;
            }
            fill_rows(db, fills)?;
            Ok(stored)
        })
    }

    /// Stores fetched calls, each with its list row when it was listed, in one transaction;
    /// resolves their recorded failures.
    ///
    /// # Errors
    /// A database error (nothing of the batch is stored).
    pub fn store_calls(
        &self,
        calls: &[(Option<RawCallRow>, RawCallDetail)],
        writer: &Writer,
    ) -> Result<Vec<Stored>, StoreError> {
        self.write(|db| {
            calls
                .iter()
                .map(|(row, detail)| store_call(db, row.as_ref(), detail, writer))
                .collect::<Result<Vec<_>, _>>()
        })
    }

    /// Moves stored calls still awaiting their webhook: to `webhook` when it has arrived, to
    /// `recovered` (by `run_id`) when they were scored at or before `missed_before_ms` and are
    /// of one of `sources` (those the run reports, so that every recovered call is reported
    /// once: a run over another source leaves them for the next run over theirs). Returns the
    /// id and source of each call recovered now.
    ///
    /// # Errors
    /// A database error.
    pub fn settle_awaiting(
        &self,
        missed_before_ms: i64,
        run_id: i64,
        now: &str,
        sources: &[impl AsRef<str>],
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.write(|db| {
            db.execute(
                "UPDATE calls SET delivery = 'webhook' WHERE delivery = 'awaiting' AND EXISTS
                   (SELECT 1 FROM deliveries d WHERE d.call_id = calls.id AND d.success = 1)",
                &[],
            )?;
            let mut recovered = Vec::new();
            for source in sources {
                for row in db.query(
                    "UPDATE calls SET delivery = 'recovered', recovered_run = $2, recovered_at = $3
                     WHERE delivery = 'awaiting' AND scored_ms <= $1 AND source = $4
                     RETURNING id, source",
                    params![missed_before_ms, run_id, now, source.as_ref()],
                )? {
                    recovered.push((row.text(0)?, row.text(1)?));
                }
            }
            Ok(recovered)
        })
    }

    /// How many stored calls of each of `sources` are still awaiting their webhook.
    ///
    /// # Errors
    /// A database error.
    pub fn awaiting(&self, sources: &[impl AsRef<str>]) -> Result<Vec<(String, u64)>, StoreError> {
        self.read(|db| {
            let mut counts = Vec::new();
            for source in sources {
                let rows = db.query(
                    "SELECT COUNT(*) FROM calls WHERE delivery = 'awaiting' AND source = $1",
                    params![source.as_ref()],
                )?;
                let n = match rows.first() {
                    Some(row) => row.count(0)?,
                    None => 0,
                };
                counts.push((source.as_ref().to_owned(), n));
            }
            Ok(counts)
        })
    }

    /// Records that a listed call's detail could not be stored (retried by later runs).
    ///
    /// # Errors
    /// A database error.
    pub fn record_failure(
        &self,
        row: &RawCallRow,
        error: &str,
        http_status: Option<u16>,
        run_id: i64,
        now: &str,
    ) -> Result<(), StoreError> {
        self.write(|db| record_failure(db, row, error, http_status, run_id, now))
    }

    /// The listed calls of `source` whose detail failed fewer than `max_attempts` times, and
    /// not already in run `run_id` (a call the run listed and read again is done with).
    ///
    /// # Errors
    /// A database error, or a stored row that no longer reads.
    pub fn failures_to_retry(
        &self,
        source: &CallSource,
        max_attempts: u32,
        run_id: i64,
    ) -> Result<Vec<RawCallRow>, StoreError> {
        let rows = self.read(|db| {
            db.query(
                "SELECT row_json FROM call_failures
                 WHERE source = $1 AND attempts < $2 AND last_run_id IS DISTINCT FROM $3
                 ORDER BY first_failed_at",
                params![source.as_str(), max_attempts, run_id],
            )?
            .iter()
            .map(|row| row.text(0))
            .collect::<Result<Vec<_>, _>>()
        })?;
        rows.into_iter()
            .map(|json| {
                let row = serde_json::from_str(&json)
                    .map_err(|e| StoreError::Corrupt(format!("a failed call's row: {e}")))?;
                Ok(RawCallRow { row, json })
            })
            .collect()
    }

    /// The stored detail of a call, as the service sent it.
    ///
    /// # Errors
    /// A database error.
    pub fn call_detail(&self, call_id: &str) -> Result<Option<String>, StoreError> {
        self.read(|db| {
            db.query_opt(
                "SELECT detail_json FROM calls WHERE id = $1",
                params![call_id],
            )?
            .map(|row| row.text(0))
            .transpose()
        })
    }
}

fn fill_rows(db: &mut dyn Sql, rows: &[&RawCallRow]) -> Result<(), StoreError> {
    for row in rows {
        db.execute(
            "UPDATE calls SET row_json = $2 WHERE id = $1 AND row_json IS NULL",
            params![row.row.id.as_str(), &row.json],
        )?;
    }
    Ok(())
}

fn record_failure(
    db: &mut dyn Sql,
    row: &RawCallRow,
    error: &str,
    http_status: Option<u16>,
    run_id: i64,
    now: &str,
) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO call_failures (call_id, source, row_json, error, http_status,
            attempts, first_failed_at, last_failed_at, last_run_id)
         VALUES ($1, $2, $3, $4, $5, 1, $6, $6, $7)
         ON CONFLICT (call_id) DO UPDATE SET error = $4, http_status = $5,
            attempts = call_failures.attempts + 1, last_failed_at = $6,
            last_run_id = $7, row_json = $3",
        params![
            row.row.id.as_str(),
            row.row.source.as_str(),
            &row.json,
            error,
            http_status,
            now,
            run_id
        ],
    )
    .map(drop)
}

pub(super) fn store_call(
    tx: &mut dyn Sql,
    row: Option<&RawCallRow>,
    detail: &RawCallDetail,
    writer: &Writer,
) -> Result<Stored, StoreError> {
    let id = detail.detail.row.id.as_str();
    let columns = Columns::of(detail);
    let before = tx
        .query_opt(
            "SELECT score_json, scored_at, updated_at FROM calls WHERE id = $1",
            params![id],
        )?
        .map(|r| Ok::<_, StoreError>((r.text(0)?, r.opt_text(1)?, r.opt_text(2)?)))
        .transpose()?;
    let stored = match before {
        None => Stored::New(insert_call(tx, row, detail, &columns, writer)?),
        Some((_, scored_at, updated_at))
            if columns.is_older_than(scored_at.as_deref(), updated_at.as_deref()) =>
        {
            // A detail read before the stored one (the webhook worker's, read before a
            // reconcile run stored a re-disposition): the newer version stays.
            Stored::Unchanged
        }
        Some((score, scored_at, updated_at)) => {
            let score: Value = serde_json::from_str(&score)
                .map_err(|e| StoreError::Corrupt(format!("the score of call {id}: {e}")))?;
            let before = json!({ "score": score, "scoredAt": scored_at, "updatedAt": updated_at });
            let after = columns.tracked();
            let changed = before != after;
            if changed {
                tx.execute(
                    "INSERT INTO score_changes (call_id, run_id, found_at, before_json, after_json)
                     VALUES ($1, $2, $3, $4, $5)",
                    params![
                        id,
                        writer.run_id,
                        &writer.now,
                        before.to_string(),
                        after.to_string()
                    ],
                )?;
            }
            update_call(tx, row, detail, &columns, writer)?;
            if changed {
                Stored::Changed
            } else {
                Stored::Unchanged
            }
        }
    };
    tx.execute("DELETE FROM call_failures WHERE call_id = $1", params![id])?;
    Ok(stored)
}

fn insert_call(
    tx: &mut dyn Sql,
    row: Option<&RawCallRow>,
    detail: &RawCallDetail,
    c: &Columns,
    writer: &Writer,
) -> Result<Arrival, StoreError> {
    let id = detail.detail.row.id.as_str();
    let delivered = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM deliveries WHERE call_id = $1 AND success = 1)",
            params![id],
        )?
        .bool(0)?;
    let arrival = if delivered || writer.by == "webhook" {
        Arrival::Webhook
    } else if writer
        .ledger_since_ms
        .is_none_or(|since| c.first_scored_ms.is_none_or(|at| at < since))
    {
        Arrival::Backfill
    } else if c
        .first_scored_ms
        .is_some_and(|at| at <= writer.missed_before_ms)
    {
        Arrival::Recovered
    } else {
        Arrival::Awaiting
    };
    let recovered = arrival == Arrival::Recovered;
    tx.execute(
        "INSERT INTO calls (id, source, agent_id, agency_id, platform_agent_id, platform_agency_id,
            started_at, ended_at, scored_at, updated_at, scored_ms, listed_ms, overall_score,
            score_json, row_json, detail_json, delivery, recovered_run, recovered_at,
            first_seen_at, first_seen_by, first_seen_run, refreshed_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
            $18, $19, $20, $21, $22, $20)",
        params![
            id,
            &c.source,
            &c.agent_id,
            &c.agency_id,
            &c.platform_agent_id,
            &c.platform_agency_id,
            &c.started_at,
            &c.ended_at,
            &c.scored_at,
            &c.updated_at,
            c.scored_ms,
            c.listed_ms,
            c.overall_score,
            &c.score,
            row.map(|r| r.json.as_str()),
            &detail.json,
            arrival_str(arrival),
            if recovered { writer.run_id } else { None },
            recovered.then_some(writer.now.as_str()),
            &writer.now,
            writer.by,
            writer.run_id,
        ],
    )?;
    Ok(arrival)
}

fn update_call(
    tx: &mut dyn Sql,
    row: Option<&RawCallRow>,
    detail: &RawCallDetail,
    c: &Columns,
    writer: &Writer,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE calls SET source = $2, agent_id = $3, agency_id = $4, platform_agent_id = $5,
            platform_agency_id = $6, started_at = $7, ended_at = $8, scored_at = $9,
            updated_at = $10, scored_ms = $11, listed_ms = $12, overall_score = $13,
            score_json = $14, row_json = COALESCE($15, row_json), detail_json = $16,
            refreshed_at = $17
         WHERE id = $1",
        params![
            detail.detail.row.id.as_str(),
            &c.source,
            &c.agent_id,
            &c.agency_id,
            &c.platform_agent_id,
            &c.platform_agency_id,
            &c.started_at,
            &c.ended_at,
            &c.scored_at,
            &c.updated_at,
            c.scored_ms,
            c.listed_ms,
            c.overall_score,
            &c.score,
            row.map(|r| r.json.as_str()),
            &detail.json,
            &writer.now,
        ],
    )?;
    Ok(())
}
