//! What `store report` reads from the store: each stored call's headline fields (streamed, so
//! memory stays flat whatever the store's size) and per-day counts of the webhook ledger, the
//! recovered calls and the change log. `svc-cli`'s `html_report` aggregates and renders
//! them. The SQL is plain enough for any backend: `substr` on the stored ISO 8601 text for the
//! day, `$n` parameters.

use serde_json::Value;

use super::sql::params;
use super::{Store, StoreError};

/// One stored call, as the report needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportCall {
    /// `roleplay`, `real_call`, …
    pub source: String,
    /// Service agent id.
    pub agent_id: Option<String>,
    /// Service agency id.
    pub agency_id: Option<String>,
    /// The tenant's agent id.
    pub platform_agent_id: Option<String>,
    /// The tenant's agency id.
    pub platform_agency_id: Option<String>,
    /// When the call is listed by (`endedAt` for practice calls, `startedAt` for real calls),
    /// unix milliseconds.
    pub listed_ms: Option<i64>,
    /// `score.overallScore`.
    pub overall_score: Option<f64>,
    /// `score.compliancePercent`, when the call was assessed for compliance.
    pub compliance_percent: Option<f64>,
}

/// Counts for one UTC day (`YYYY-MM-DD`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DayCounts {
    /// Verified webhook deliveries of `success: true` events.
    pub scored_webhooks: u64,
    /// Verified webhook deliveries of `success: false` events (calls that could not be scored).
    pub failure_events: u64,
    /// Calls reconcile stored after their webhook was missed.
    pub recovered: u64,
    /// Silent changes reconcile found.
    pub silent_changes: u64,
}

/// Where a report starts: calls listed at or after `since_ms`, ledger rows and changes
/// recorded at or after `since_ts` (the same instant as stored text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportWindow {
    /// Unix milliseconds (`None`: from the beginning).
    pub since_ms: Option<i64>,
    /// The same instant as the store writes it (`None`: from the beginning).
    pub since_ts: Option<String>,
}

impl ReportWindow {
    fn ms(&self) -> i64 {
        self.since_ms.unwrap_or(i64::MIN)
    }

    fn ts(&self) -> &str {
        self.since_ts.as_deref().unwrap_or("")
    }
}

/// Which count of a day a query adds to.
type Counter = fn(&mut DayCounts) -> &mut u64;

impl Store {
    /// Calls `visit` with every stored call in `window`, in no particular order.
    ///
    /// # Errors
    /// A database error.
    pub fn for_each_report_call(
        &self,
        window: &ReportWindow,
        visit: &mut dyn FnMut(ReportCall),
    ) -> Result<(), StoreError> {
        self.read(|db| {
            db.for_each(
                "SELECT source, agent_id, agency_id, platform_agent_id, platform_agency_id,
                        listed_ms, overall_score, score_json
                 FROM calls WHERE COALESCE(listed_ms, 0) >= $1",
                params![window.ms()],
                &mut |row| {
                    let compliance_percent = serde_json::from_str::<Value>(row.text_ref(7)?)
                        .ok()
                        .and_then(|score| score.get("compliancePercent").and_then(Value::as_f64));
                    visit(ReportCall {
                        source: row.text(0)?,
                        agent_id: row.opt_text(1)?,
                        agency_id: row.opt_text(2)?,
                        platform_agent_id: row.opt_text(3)?,
                        platform_agency_id: row.opt_text(4)?,
                        listed_ms: row.opt_i64(5)?,
                        overall_score: row.opt_f64(6)?,
                        compliance_percent,
                    });
                    Ok(())
                },
            )
        })
    }

    /// Per UTC day in `window`: deliveries received (by outcome), calls recovered, changes
    /// found; days without any are absent. In day order.
    ///
    /// # Errors
    /// A database error.
    pub fn report_days(
        &self,
        window: &ReportWindow,
    ) -> Result<Vec<(String, DayCounts)>, StoreError> {
        let mut days: std::collections::BTreeMap<String, DayCounts> = Default::default();
        self.read(|db| {
            let since = params![window.ts()];
            for row in db.query(
                "SELECT substr(verified_at, 1, 10) AS day, success, COUNT(*) FROM deliveries
                 WHERE verified_at >= $1 GROUP BY day, success",
                since,
            )? {
                let n = row.count(2)?;
                let counts = days.entry(row.text(0)?).or_default();
                if row.bool(1)? {
                    counts.scored_webhooks += n;
                } else {
                    counts.failure_events += n;
                }
            }
            let per_day: [(&str, Counter); 2] = [
                (
                    "SELECT substr(recovered_at, 1, 10) AS day, COUNT(*) FROM calls
                     WHERE delivery = 'recovered' AND recovered_at >= $1 GROUP BY day",
                    |c| &mut c.recovered,
                ),
                (
                    "SELECT substr(found_at, 1, 10) AS day, COUNT(*) FROM score_changes
                     WHERE found_at >= $1 GROUP BY day",
                    |c| &mut c.silent_changes,
                ),
            ];
            for (sql, field) in per_day {
                for row in db.query(sql, since)? {
                    *field(days.entry(row.text(0)?).or_default()) += row.count(1)?;
                }
            }
            Ok(())
        })?;
        Ok(days.into_iter().collect())
    }
}
