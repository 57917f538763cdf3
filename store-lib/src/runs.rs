//! Reconcile runs and the per-source sync state: a row per run (started, finished, outcome,
//! exit code, report), and per source the watermark up to which every listed call is stored.

use serde::Serialize;

use super::sql::params;
use super::{Store, StoreError};

/// The sync state of one source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncState {
    /// Every call listed up to this time is stored (contract timestamp form).
    pub watermark: Option<String>,
    /// The last run that listed this source.
    pub last_run_id: Option<i64>,
    /// When it started.
    pub last_run_at: Option<String>,
    /// `ok` or `failed: …`.
    pub last_outcome: Option<String>,
    /// When the last run that completed this source started.
    pub last_success_at: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// It finished (its exit code says what it found).
    Ok,
    /// It stopped on an error.
    Failed,
}

impl Store {
    /// Records the start of a run; runs left `running` by a killed process are marked
    /// `interrupted` (the caller holds the run lock, so none of them is still going).
    ///
    /// # Errors
    /// A database error.
    pub fn start_run(&self, started_at: &str, options: &str) -> Result<i64, StoreError> {
        self.write(|db| {
            db.execute(
                "UPDATE runs SET outcome = 'interrupted' WHERE outcome = 'running'",
                &[],
            )?;
            db.query_one(
                "INSERT INTO runs (started_at, pid, options, outcome)
                 VALUES ($1, $2, $3, 'running') RETURNING id",
                params![started_at, std::process::id(), options],
            )?
            .i64(0)
        })
    }

    /// Records the end of a run with its report.
    ///
    /// # Errors
    /// A database error.
    pub fn finish_run(
        &self,
        run_id: i64,
        finished_at: &str,
        outcome: RunOutcome,
        exit_code: u8,
        report: &str,
    ) -> Result<(), StoreError> {
        let outcome = match outcome {
            RunOutcome::Ok => "ok",
            RunOutcome::Failed => "failed",
        };
        self.write(|db| {
            db.execute(
                "UPDATE runs SET finished_at = $2, outcome = $3, exit_code = $4, report = $5
                 WHERE id = $1",
                params![run_id, finished_at, outcome, exit_code, report],
            )
            .map(drop)
        })
    }

    /// The sync state of `source` (all `None` before its first run).
    ///
    /// # Errors
    /// A database error.
    pub fn sync_state(&self, source: &str) -> Result<SyncState, StoreError> {
        self.read(|db| {
            let Some(r) = db.query_opt(
                "SELECT watermark, last_run_id, last_run_at, last_outcome, last_success_at
                 FROM sync_state WHERE source = $1",
                params![source],
            )?
            else {
                return Ok(SyncState::default());
            };
            Ok(SyncState {
                watermark: r.opt_text(0)?,
                last_run_id: r.opt_i64(1)?,
                last_run_at: r.opt_text(2)?,
                last_outcome: r.opt_text(3)?,
                last_success_at: r.opt_text(4)?,
            })
        })
    }

    /// Records that run `run_id`, started at `run_at`, listed `source`: with `Ok(watermark)`
    /// every page of its window was stored (the watermark moves to `watermark` when given);
    /// with `Err(reason)` it stopped and the watermark stays.
    ///
    /// # Errors
    /// A database error.
    pub fn record_sync(
        &self,
        source: &str,
        run_id: i64,
        run_at: &str,
        result: Result<Option<&str>, &str>,
    ) -> Result<(), StoreError> {
        let (watermark, outcome, success) = match result {
            Ok(watermark) => (watermark, "ok".to_owned(), Some(run_at)),
            Err(reason) => (None, format!("failed: {reason}"), None),
        };
        self.write(|db| {
            db.execute(
                "INSERT INTO sync_state (source, watermark, last_run_id, last_run_at,
                    last_outcome, last_success_at)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (source) DO UPDATE SET
                    watermark = COALESCE($2, sync_state.watermark), last_run_id = $3,
                    last_run_at = $4, last_outcome = $5,
                    last_success_at = COALESCE($6, sync_state.last_success_at)",
                params![source, watermark, run_id, run_at, outcome, success],
            )
            .map(drop)
        })
    }

    /// Records the exit code a run ended with, once its caller knows it (a run that stopped
    /// is recorded with 1 when it finishes).
    ///
    /// # Errors
    /// A database error.
    pub fn record_exit_code(&self, run_id: i64, exit_code: u8) -> Result<(), StoreError> {
        self.write(|db| {
            let report = db
                .query_opt("SELECT report FROM runs WHERE id = $1", params![run_id])?
                .map(|row| row.opt_text(0))
                .transpose()?
                .flatten();
            // The kept report says the same code.
            let report =
                report.map(
                    |text| match serde_json::from_str::<serde_json::Value>(&text) {
                        Ok(mut value) => {
                            if let Some(map) = value.as_object_mut() {
                                map.insert("exitCode".into(), exit_code.into());
                            }
                            value.to_string()
                        }
                        Err(_) => text,
                    },
                );
            db.execute(
                "UPDATE runs SET exit_code = $2, report = COALESCE($3, report) WHERE id = $1",
                params![run_id, exit_code, report],
            )
            .map(drop)
        })
    }
}
