//! What the demo found, its self-check, and how it is told: a short story with reconcile's
//! report for people, one JSON object (`demo --json`, keys below) for scripts and CI.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use svc_service::sandbox::DeliveryRow;
use svc_service::sandbox::Faults;

use super::Rep;
use crate::output::Output;
use crate::reconcile::Reconciled;
use svc_client::CallId;

/// The practice calls made.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PracticeCalls {
    /// Calls made.
    pub made: usize,
    /// By a strong rep.
    pub strong: usize,
    /// By a weak rep.
    pub weak: usize,
    /// By a rep who never spoke (not scored).
    pub silent: usize,
    /// The calls, for waiting on them.
    #[serde(skip)]
    pub call_ids: Vec<(CallId, Rep)>,
}

impl PracticeCalls {
    pub(super) fn new(call_ids: Vec<(CallId, Rep)>) -> Self {
        let of = |rep: Rep| call_ids.iter().filter(|(_, r)| *r == rep).count();
        Self {
            made: call_ids.len(),
            strong: of(Rep::Strong),
            weak: of(Rep::Weak),
            silent: of(Rep::Silent),
            call_ids,
        }
    }
}

/// The dialer file's records and what became of them.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RealCalls {
    /// Records read.
    pub records: usize,
    /// Stored and scored.
    pub scored: usize,
    /// Stored, not scored.
    pub not_scored: usize,
    /// Dropped before storage, by reason (`unregistered_rep`, `no_audio`, …).
    pub dropped: BTreeMap<String, usize>,
    /// Repeats of a call already stored.
    pub already_ingested: usize,
    /// Records that did not read.
    pub invalid: Vec<String>,
    /// The call re-dispositioned after its webhook (none when no sale was delivered).
    pub redispositioned: Option<Redispositioned>,
}

/// The re-dispositioned real call.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Redispositioned {
    /// The call.
    pub call_id: String,
    /// Its disposition before.
    pub disposition_before: String,
    /// And after.
    pub disposition_after: String,
    /// `overallScore` before.
    pub score_before: Option<f64>,
    /// And after.
    pub score_after: Option<f64>,
}

/// What the sandbox's outbox did, from its own log.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deliveries {
    /// Events queued (one per call outcome).
    pub events: usize,
    /// Delivered (the receiver answered 200).
    pub delivered: usize,
    /// Delivered and, by the fault profile, sent a second time.
    pub duplicated: usize,
    /// Dropped by the fault profile: failed on both attempts.
    pub dropped: usize,
    /// Failed for another reason (should be none).
    pub failed_otherwise: usize,
    /// The dropped deliveries' calls that are scored (listed by `GET /calls`): what reconcile
    /// must recover.
    pub dropped_scored_call_ids: Vec<String>,
}

impl Deliveries {
    /// Counts `deliveries` (the sandbox's log) against `faults` and the scored calls `listed`.
    pub fn count(deliveries: &[DeliveryRow], faults: &Faults, listed: &BTreeSet<String>) -> Self {
        let mut counts = Self {
            events: deliveries.len(),
            ..Self::default()
        };
        for delivery in deliveries {
            match delivery.state.as_str() {
                "delivered" => {
                    counts.delivered += 1;
                    if faults.duplicates(&delivery.call_id) {
                        counts.duplicated += 1;
                    }
                }
                "failed" if faults.drops(&delivery.call_id) => {
                    counts.dropped += 1;
                    if listed.contains(&delivery.call_id) {
                        counts
                            .dropped_scored_call_ids
                            .push(delivery.call_id.clone());
                    }
                }
                _ => counts.failed_otherwise += 1,
            }
        }
        counts.dropped_scored_call_ids.sort();
        counts
    }
}

/// The store against the API, after reconcile.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreCheck {
    /// Scored calls `GET /calls` lists (both sources).
    #[serde(skip)]
    pub listed: BTreeSet<String>,
    /// Calls the store holds.
    pub stored: u64,
    /// Listed calls the store lacks.
    pub missing: Vec<String>,
    /// Deliveries in the store's ledger (one per webhook id).
    pub ledger: u64,
}

/// Where a `--keep` demo left its files.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    /// The directory.
    pub dir: PathBuf,
    /// The sandbox's base URL while the demo ran.
    pub base_url: String,
    /// The store's HTML report (`store report`), written into the directory.
    pub report: PathBuf,
}

/// Everything the demo reports (`demo --json` prints it).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Whether the store holds every scored call exactly once and reconcile found what the
    /// faults hid.
    pub ok: bool,
    /// What the self-check found wrong (empty when `ok`).
    pub problems: Vec<String>,
    /// Scored calls `GET /calls` lists.
    pub scored_calls: usize,
    /// The practice calls.
    pub practice_calls: PracticeCalls,
    /// The real calls.
    pub real_calls: RealCalls,
    /// The sandbox's deliveries.
    pub deliveries: Deliveries,
    /// The store after reconcile.
    pub store: StoreCheck,
    /// Calls reconcile recovered (their webhook never came).
    pub recovered_call_ids: Vec<String>,
    /// Calls reconcile found changed with no webhook.
    pub changed_call_ids: Vec<String>,
    /// Reconcile's report.
    pub reconcile: Reconciled,
    /// Where the files are, with `--keep`.
    pub kept: Option<Kept>,
    /// How long the demo took (ms).
    pub duration_ms: u64,
}

impl Summary {
    /// Puts the parts together and runs the self-check.
    pub(super) fn new(
        practice_calls: PracticeCalls,
        real_calls: RealCalls,
        deliveries: Deliveries,
        reconcile: Reconciled,
        store: StoreCheck,
        kept: Option<Kept>,
        took: Duration,
    ) -> Self {
        let mut recovered: Vec<String> = reconcile
            .recovered_call_ids
            .iter()
            .map(|id| id.as_str().to_owned())
            .collect();
        recovered.sort();
        let mut problems = Vec::new();
        if reconcile.outcome == svc_reconcile::Outcome::Stopped {
            problems.push(format!(
                "reconcile did not complete: {}",
                reconcile.error.as_deref().unwrap_or("unknown error")
            ));
        }
        if !store.missing.is_empty() {
            problems.push(format!(
                "the store lacks {} scored call(s): {}",
                store.missing.len(),
                store.missing.join(", ")
            ));
        }
        if store.stored != store.listed.len() as u64 {
            problems.push(format!(
                "the store holds {} call(s) for {} scored",
                store.stored,
                store.listed.len()
            ));
        }
        if recovered != deliveries.dropped_scored_call_ids {
            problems.push(format!(
                "reconcile recovered [{}], the dropped deliveries of scored calls were [{}]",
                recovered.join(", "),
                deliveries.dropped_scored_call_ids.join(", ")
            ));
        }
        if store.ledger != deliveries.delivered as u64 {
            problems.push(format!(
                "the ledger holds {} deliveries for {} delivered (duplicates must count once)",
                store.ledger, deliveries.delivered
            ));
        }
        if deliveries.failed_otherwise > 0 {
            problems.push(format!(
                "{} deliveries failed for a reason other than the fault profile",
                deliveries.failed_otherwise
            ));
        }
        if let Some(changed) = &real_calls.redispositioned
            && !reconcile
                .changed_call_ids
                .iter()
                .any(|id| id.as_str() == changed.call_id)
        {
            problems.push(format!(
                "reconcile missed the silent score change of {}",
                changed.call_id
            ));
        }
        Self {
            ok: problems.is_empty(),
            problems,
            scored_calls: store.listed.len(),
            practice_calls,
            real_calls,
            deliveries,
            store,
            recovered_call_ids: recovered,
            changed_call_ids: reconcile
                .changed_call_ids
                .iter()
                .map(|id| id.as_str().to_owned())
                .collect(),
            reconcile,
            kept,
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Prints the story, reconcile's table and the verdict on stdout.
    ///
    /// # Errors
    /// When stdout is closed.
    pub fn print_story(&self, out: &Output) -> anyhow::Result<()> {
        let p = &self.practice_calls;
        let r = &self.real_calls;
        let d = &self.deliveries;
        let dropped_records: usize = r.dropped.values().sum();
        let dropped_reasons = r
            .dropped
            .iter()
            .map(|(reason, n)| format!("{n} {reason}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut lines = vec![
            "A sandbox of the service started that loses about a fifth of its webhooks (both \
             attempts) and sends some twice; a receiver (`webhook serve`) wrote into a new store."
                .to_owned(),
            format!(
                "{} practice calls: {} strong reps, {} weak, {} who never spoke (not scored, so \
                 the failure webhook is sent too).",
                p.made, p.strong, p.weak, p.silent
            ),
            format!(
                "{} dialer records ingested as real calls: {} scored, {} stored not scored, {} \
                 dropped{}.",
                r.records,
                r.scored,
                r.not_scored,
                dropped_records,
                if dropped_reasons.is_empty() {
                    String::new()
                } else {
                    format!(" ({dropped_reasons})")
                }
            ),
            format!(
                "The service queued {} webhooks: {} delivered ({} of them twice: the receiver \
                 stored each once), {} lost on both attempts, {} of them for scored calls.",
                d.events,
                d.delivered,
                d.duplicated,
                d.dropped,
                d.dropped_scored_call_ids.len()
            ),
        ];
        if let Some(c) = &r.redispositioned {
            let moved = if c.score_before == c.score_after {
                format!(
                    "overall score still {}, its summary and scoredAt changed",
                    score_text(c.score_after)
                )
            } else {
                format!(
                    "overall score {} to {}",
                    score_text(c.score_before),
                    score_text(c.score_after)
                )
            };
            lines.push(format!(
                "Then the dialer re-dispositioned {} ({} to {}): the service scored it again \
                 ({moved}) and sent no webhook.",
                c.call_id, c.disposition_before, c.disposition_after,
            ));
        }
        lines.push("Then `svc-cli reconcile` ran:".to_owned());
        for line in &lines {
            out.line(line)?;
        }
        let (table, _) = self.reconcile.table();
        out.table(&table)?;
        out.line(&format!(
            "Recovered {} call(s) whose webhook never came: {}",
            self.recovered_call_ids.len(),
            list_or_none(&self.recovered_call_ids)
        ))?;
        out.line(&format!(
            "Found {} silent change(s): {}",
            self.changed_call_ids.len(),
            list_or_none(&self.changed_call_ids)
        ))?;
        if self.ok {
            out.line(&format!(
                "Check passed: the store holds every one of the {} scored calls exactly once \
                 ({:.1} s).",
                self.scored_calls,
                self.duration_ms as f64 / 1000.0
            ))?;
        } else {
            out.line("Check FAILED:")?;
            for problem in &self.problems {
                out.line(&format!("  - {problem}"))?;
            }
        }
        if let Some(kept) = &self.kept {
            let dir = kept.dir.display();
            out.line(&format!("\nThe files are in {dir}. To explore them:"))?;
            out.line(&format!(
                "  {}    # the HTML report: open it in a browser",
                kept.report.display()
            ))?;
            out.line(&format!("  svc-cli store stats --store {dir}/store.db"))?;
            out.line(&format!(
                "  svc-cli store export --store {dir}/store.db --format jsonl"
            ))?;
            out.line(&format!(
                "  svc-cli sandbox --db {dir}/sandbox.db    # serve the demo's data again; then, \
                 with its exports:"
            ))?;
            if let Some(id) = self
                .recovered_call_ids
                .first()
                .or(self.changed_call_ids.first())
            {
                out.line(&format!("  svc-cli calls show {id}"))?;
            }
        }
        Ok(())
    }
}

fn score_text(score: Option<f64>) -> String {
    score.map_or_else(|| "unscored".to_owned(), |s| format!("{s}"))
}

fn list_or_none(ids: &[String]) -> String {
    if ids.is_empty() {
        "none".to_owned()
    } else {
        ids.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use svc_client::CallId;
    use svc_reconcile::{Counts, Outcome, RunId, RunReport};

    fn report(recovered: &[&str], changed: &[&str]) -> Reconciled {
        let ids = |ids: &[&str]| ids.iter().map(|s| CallId::from_service(*s)).collect();
        Reconciled {
            run: RunReport {
                run_id: Some(RunId(1)),
                dry_run: false,
                started_at: chrono::DateTime::UNIX_EPOCH,
                finished_at: chrono::DateTime::UNIX_EPOCH,
                duration: std::time::Duration::ZERO,
                request_bound: std::time::Duration::ZERO,
                service_time: None,
                clock_skew_ms: None,
                outcome: Outcome::Clean,
                error: None,
                requests: 0,
                sources: Vec::new(),
                totals: Counts::default(),
                recovered_call_ids: ids(recovered),
                changed_call_ids: ids(changed),
                failed_calls: Vec::new(),
            },
            exit_code: 0,
            delivery_grace: std::time::Duration::ZERO,
        }
    }

    fn parts(stored: u64, missing: &[&str]) -> (Deliveries, StoreCheck, RealCalls) {
        let deliveries = Deliveries {
            events: 3,
            delivered: 2,
            dropped: 1,
            dropped_scored_call_ids: vec!["c".to_owned()],
            ..Deliveries::default()
        };
        let store = StoreCheck {
            listed: ["a", "b", "c"].iter().map(|s| (*s).to_owned()).collect(),
            stored,
            missing: missing.iter().map(|s| (*s).to_owned()).collect(),
            ledger: 2,
        };
        let real = RealCalls {
            redispositioned: Some(Redispositioned {
                call_id: "b".to_owned(),
                disposition_before: "sale".to_owned(),
                disposition_after: "not_interested".to_owned(),
                score_before: Some(100.0),
                score_after: Some(98.0),
            }),
            ..RealCalls::default()
        };
        (deliveries, store, real)
    }

    fn summary(report: Reconciled, stored: u64, missing: &[&str]) -> Summary {
        let (deliveries, store, real) = parts(stored, missing);
        Summary::new(
            PracticeCalls::default(),
            real,
            deliveries,
            report,
            store,
            None,
            Duration::ZERO,
        )
    }

    #[test]
    fn the_check_passes_when_reconcile_recovered_exactly_what_was_lost() {
        let ok = summary(report(&["c"], &["b"]), 3, &[]);
        assert!(ok.ok, "{:?}", ok.problems);
    }

    #[test]
    fn the_check_fails_on_a_missing_call_a_wrong_recovery_or_a_missed_change() {
        let missing = summary(report(&["c"], &["b"]), 2, &["a"]);
        assert!(!missing.ok);
        assert!(missing.problems.iter().any(|p| p.contains("lacks 1")));

        let wrong = summary(report(&["a", "c"], &["b"]), 3, &[]);
        assert!(!wrong.ok);
        assert!(
            wrong
                .problems
                .iter()
                .any(|p| p.contains("recovered [a, c]"))
        );

        let unseen = summary(report(&["c"], &[]), 3, &[]);
        assert!(!unseen.ok);
        assert!(
            unseen
                .problems
                .iter()
                .any(|p| p.contains("silent score change"))
        );
    }
}
