//! `store stats`: what the store holds (calls per source and how they arrived, deliveries
//! received, recovered and changed calls over time, failures) and each source's last run and
//! watermark.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::runs::SyncState;
use super::{Store, StoreError, count};
use crate::time::{before, format_ts};

/// Everything `store stats` prints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    /// The store's schema version.
    pub schema_version: u32,
    /// Stored calls, per source.
    pub calls: Vec<SourceCalls>,
    /// Webhook deliveries received by `webhook serve`.
    pub deliveries: Deliveries,
    /// Calls whose webhook never came, stored by reconcile: by when they were found.
    pub recovered: Periods,
    /// Silent changes (score, `scoredAt` or `updatedAt`) found by reconcile.
    pub changed: Periods,
    /// Listed calls whose detail could not be stored.
    pub failures: Failures,
    /// Per source: watermark and last run.
    pub sync: BTreeMap<String, SyncState>,
    /// The last reconcile run.
    pub last_run: Option<LastRun>,
}

/// The stored calls of one source.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceCalls {
    /// `roleplay`, `real_call`, …
    pub source: String,
    /// How many.
    pub calls: u64,
    /// Whose webhook was received.
    pub delivered: u64,
    /// Stored by reconcile, webhook still possible.
    pub awaiting: u64,
    /// Stored by reconcile after their webhook was missed.
    pub recovered: u64,
    /// Stored from history by a first run.
    pub backfill: u64,
}

/// The webhook ledger.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deliveries {
    /// Deliveries recorded (one per webhook id).
    pub total: u64,
    /// `success: true` events.
    pub scored: u64,
    /// `success: false` events, by `reason`.
    pub not_scored: BTreeMap<String, u64>,
    /// When the last one was verified.
    pub last_verified_at: Option<String>,
}

/// Counts over the last day, week and month, and in all.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Periods {
    /// In the last 24 hours.
    pub last_24h: u64,
    /// In the last 7 days.
    pub last_7d: u64,
    /// In the last 30 days.
    pub last_30d: u64,
    /// Ever.
    pub total: u64,
}

/// Listed calls whose detail could not be stored.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failures {
    /// Retried by the next runs.
    pub retrying: u64,
    /// Failed too many times; no longer retried.
    pub given_up: u64,
}

/// The last reconcile run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastRun {
    /// Its id.
    pub id: i64,
    /// When it started.
    pub started_at: String,
    /// When it finished (`None` while running or when it was killed).
    pub finished_at: Option<String>,
    /// `running`, `ok`, `failed` or `interrupted`.
    pub outcome: String,
    /// Its exit code.
    pub exit_code: Option<u8>,
}

impl Store {
    /// Reads the statistics as of `now`. A listed call whose detail failed `max_attempts`
    /// times counts as given up.
    ///
    /// # Errors
    /// A database error.
    pub fn stats(&self, now: DateTime<Utc>, max_attempts: u32) -> Result<Stats, StoreError> {
        let schema_version = self.schema_version()?;
        let conn = self.conn();
        let calls = conn
            .prepare(
                "SELECT source, COUNT(*), SUM(delivery = 'webhook'), SUM(delivery = 'awaiting'),
                        SUM(delivery = 'recovered'), SUM(delivery = 'backfill')
                 FROM calls GROUP BY source ORDER BY source DESC",
            )?
            .query_map([], |r| {
                Ok(SourceCalls {
                    source: r.get(0)?,
                    calls: count(r, 1)?,
                    delivered: count(r, 2)?,
                    awaiting: count(r, 3)?,
                    recovered: count(r, 4)?,
                    backfill: count(r, 5)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        let (total, scored, last_verified_at) = conn.query_row(
            "SELECT COUNT(*), COALESCE(SUM(success), 0), MAX(verified_at) FROM deliveries",
            [],
            |r| Ok((count(r, 0)?, count(r, 1)?, r.get(2)?)),
        )?;
        let not_scored = conn
            .prepare(
                "SELECT COALESCE(reason, '(none)'), COUNT(*) FROM deliveries WHERE success = 0
                 GROUP BY reason",
            )?
            .query_map([], |r| Ok((r.get(0)?, count(r, 1)?)))?
            .collect::<Result<_, _>>()?;
        let periods = |sql: &str| -> Result<Periods, StoreError> {
            let at =
                |days: u64| format_ts(before(now, std::time::Duration::from_secs(days * 86_400)));
            Ok(conn.query_row(sql, params![at(1), at(7), at(30)], |r| {
                Ok(Periods {
                    last_24h: count(r, 0)?,
                    last_7d: count(r, 1)?,
                    last_30d: count(r, 2)?,
                    total: count(r, 3)?,
                })
            })?)
        };
        let recovered = periods(
            "SELECT COALESCE(SUM(recovered_at >= ?1), 0), COALESCE(SUM(recovered_at >= ?2), 0),
                    COALESCE(SUM(recovered_at >= ?3), 0), COUNT(*)
             FROM calls WHERE delivery = 'recovered'",
        )?;
        let changed = periods(
            "SELECT COALESCE(SUM(found_at >= ?1), 0), COALESCE(SUM(found_at >= ?2), 0),
                    COALESCE(SUM(found_at >= ?3), 0), COUNT(*)
             FROM score_changes",
        )?;
        let failures = conn.query_row(
            "SELECT COALESCE(SUM(attempts < ?1), 0), COALESCE(SUM(attempts >= ?1), 0)
             FROM call_failures",
            [max_attempts],
            |r| {
                Ok(Failures {
                    retrying: count(r, 0)?,
                    given_up: count(r, 1)?,
                })
            },
        )?;
        let sources: Vec<String> = conn
            .prepare("SELECT source FROM sync_state ORDER BY source")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let last_run = conn
            .query_row(
                "SELECT id, started_at, finished_at, outcome, exit_code FROM runs
                 ORDER BY id DESC LIMIT 1",
                [],
                |r| {
                    Ok(LastRun {
                        id: r.get(0)?,
                        started_at: r.get(1)?,
                        finished_at: r.get(2)?,
                        outcome: r.get(3)?,
                        exit_code: r.get(4)?,
                    })
                },
            )
            .optional()?;
        drop(conn);
        let sync = sources
            .into_iter()
            .map(|source| Ok((source.clone(), self.sync_state(&source)?)))
            .collect::<Result<_, StoreError>>()?;
        Ok(Stats {
            schema_version,
            calls,
            deliveries: Deliveries {
                total,
                scored,
                not_scored,
                last_verified_at,
            },
            recovered,
            changed,
            failures,
            sync,
            last_run,
        })
    }
}
