//! `store stats`: what the store holds (calls per source and how they arrived, deliveries
//! received, recovered and changed calls over time, failures) and each source's last run and
//! watermark.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::runs::SyncState;
use super::sql::{Sql, params};
use super::{Store, StoreError};
use svc_reconcile::time::{before, format_ts};

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

/// `SUM` of a condition, in SQL both backends accept (PostgreSQL sums no booleans).
macro_rules! sum_of {
    ($condition:literal) => {
        concat!(
            "COALESCE(SUM(CASE WHEN ",
            $condition,
            " THEN 1 ELSE 0 END), 0)"
        )
    };
}

impl Store {
    /// Reads the statistics as of `now`. A listed call whose detail failed `max_attempts`
    /// times counts as given up.
    ///
    /// # Errors
    /// A database error.
    pub fn stats(&self, now: DateTime<Utc>, max_attempts: u32) -> Result<Stats, StoreError> {
        let schema_version = self.schema_version()?;
        let (calls, deliveries, recovered, changed, failures, sources, last_run) =
            self.read(|db| {
                Ok((
                    source_calls(db)?,
                    deliveries(db)?,
                    periods(db, now, PERIODS_RECOVERED)?,
                    periods(db, now, PERIODS_CHANGED)?,
                    failures(db, max_attempts)?,
                    db.query("SELECT source FROM sync_state ORDER BY source", &[])?
                        .iter()
                        .map(|row| row.text(0))
                        .collect::<Result<Vec<_>, _>>()?,
                    last_run(db)?,
                ))
            })?;
        let sync = sources
            .into_iter()
            .map(|source| Ok((source.clone(), self.sync_state(&source)?)))
            .collect::<Result<_, StoreError>>()?;
        Ok(Stats {
            schema_version,
            calls,
            deliveries,
            recovered,
            changed,
            failures,
            sync,
            last_run,
        })
    }
}

fn source_calls(db: &mut dyn Sql) -> Result<Vec<SourceCalls>, StoreError> {
    let sql = concat!(
        "SELECT source, COUNT(*), ",
        sum_of!("delivery = 'webhook'"),
        ", ",
        sum_of!("delivery = 'awaiting'"),
        ", ",
        sum_of!("delivery = 'recovered'"),
        ", ",
        sum_of!("delivery = 'backfill'"),
        " FROM calls GROUP BY source ORDER BY source DESC"
    );
    db.query(sql, &[])?
        .iter()
        .map(|r| {
            Ok(SourceCalls {
                source: r.text(0)?,
                calls: r.count(1)?,
                delivered: r.count(2)?,
                awaiting: r.count(3)?,
                recovered: r.count(4)?,
                backfill: r.count(5)?,
            })
        })
        .collect()
}

fn deliveries(db: &mut dyn Sql) -> Result<Deliveries, StoreError> {
    let totals = db.query_one(
        "SELECT COUNT(*), COALESCE(SUM(success), 0), MAX(verified_at) FROM deliveries",
        &[],
    )?;
    let not_scored = db
        .query(
            "SELECT COALESCE(reason, '(none)'), COUNT(*) FROM deliveries WHERE success = 0
             GROUP BY reason",
            &[],
        )?
        .iter()
        .map(|r| Ok((r.text(0)?, r.count(1)?)))
        .collect::<Result<_, StoreError>>()?;
    Ok(Deliveries {
        total: totals.count(0)?,
        scored: totals.count(1)?,
        not_scored,
        last_verified_at: totals.opt_text(2)?,
    })
}

const PERIODS_RECOVERED: &str = concat!(
    "SELECT ",
    sum_of!("recovered_at >= $1"),
    ", ",
    sum_of!("recovered_at >= $2"),
    ", ",
    sum_of!("recovered_at >= $3"),
    ", COUNT(*) FROM calls WHERE delivery = 'recovered'"
);

const PERIODS_CHANGED: &str = concat!(
    "SELECT ",
    sum_of!("found_at >= $1"),
    ", ",
    sum_of!("found_at >= $2"),
    ", ",
    sum_of!("found_at >= $3"),
    ", COUNT(*) FROM score_changes"
);

/// Counts over the last day, week and month, and in all, by a query of three times.
fn periods(db: &mut dyn Sql, now: DateTime<Utc>, sql: &str) -> Result<Periods, StoreError> {
    let at = |days: u64| format_ts(before(now, std::time::Duration::from_secs(days * 86_400)));
    let r = db.query_one(sql, params![at(1), at(7), at(30)])?;
    Ok(Periods {
        last_24h: r.count(0)?,
        last_7d: r.count(1)?,
        last_30d: r.count(2)?,
        total: r.count(3)?,
    })
}

fn failures(db: &mut dyn Sql, max_attempts: u32) -> Result<Failures, StoreError> {
    let r = db.query_one(
        concat!(
            "SELECT ",
            sum_of!("attempts < $1"),
            ", ",
            sum_of!("attempts >= $1"),
            " FROM call_failures"
        ),
        params![max_attempts],
    )?;
    Ok(Failures {
        retrying: r.count(0)?,
        given_up: r.count(1)?,
    })
}

fn last_run(db: &mut dyn Sql) -> Result<Option<LastRun>, StoreError> {
    db.query_opt(
        "SELECT id, started_at, finished_at, outcome, exit_code FROM runs
         ORDER BY id DESC LIMIT 1",
        &[],
    )?
    .map(|r| {
        Ok(LastRun {
            id: r.i64(0)?,
            started_at: r.text(1)?,
            finished_at: r.opt_text(2)?,
            outcome: r.text(3)?,
            exit_code: r.opt_i64(4)?.and_then(|code| u8::try_from(code).ok()),
        })
    })
    .transpose()
}
