//! Reconcile as the command line runs it, over `svc-reconcile`: `svc-store`'s store as the sink,
//! the documented exit code of a run, its report as a table, and the spinner that shows
//! progress.

use std::ops::Deref;

use comfy_table::Table;
use indicatif::ProgressBar;
use serde::Serialize;
use svc_client::CallSource;
use svc_reconcile::{
    Counts, Outcome, Progress, Reconciler, RunError, RunGuard, RunReport, StopReason,
};
use svc_store::{RunLock, Store, StoreError};

use crate::exit;
use crate::output;

/// A run's report with the exit code `svc-cli reconcile` ends with: what `--json` prints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reconciled {
    /// What the run did.
    #[serde(flatten)]
    pub run: RunReport,
    /// The process's exit code.
    pub exit_code: u8,
    /// The run's delivery grace (for the note on awaiting calls).
    #[serde(skip)]
    pub delivery_grace: std::time::Duration,
}

impl Deref for Reconciled {
    type Target = RunReport;

    fn deref(&self) -> &RunReport {
        &self.run
    }
}

/// A spinner's message as the run goes.
struct Spinner<'a>(&'a ProgressBar);

impl Progress for Spinner<'_> {
    fn update(&self, source: &CallSource, counts: &Counts) {
        self.0.set_message(format!(
            "{}: {} pages, {} calls listed, {} details read",
            source, counts.pages, counts.listed, counts.details_fetched
        ));
    }
}

/// Runs one reconcile with `reconciler` (over the store): a run under `guard`, which its
/// [`Reconciler::lock`] gave, or a dry run without one (nothing written, no lock needed).
pub async fn run(
    reconciler: &Reconciler<Store>,
    guard: Option<&RunGuard<RunLock>>,
    progress: &ProgressBar,
) -> Reconciled {
    let spinner = Spinner(progress);
    let result = match guard {
        Some(guard) => reconciler.run(guard, &spinner).await,
        None => reconciler.dry_run(&spinner).await,
    };
    let delivery_grace = reconciler.options().delivery_grace;
    let report = match result {
        Ok(run) => Reconciled {
            exit_code: outcome_code(run.outcome),
            run,
            delivery_grace,
        },
        Err(RunError { reason, report }) => Reconciled {
            exit_code: stop_code(&reason),
            run: *report,
            delivery_grace,
        },
    };
    if let Some(run_id) = report.run_id
        && report.exit_code != exit::FAILURE
        && report.outcome == Outcome::Stopped
    {
        // The store records 1 for a stopped run; the command line knows the precise code.
        let code = report.exit_code;
        if let Err(e) = reconciler
            .sink()
            .blocking(move |s| s.record_exit_code(run_id.0, code))
            .await
        {
            tracing::warn!(error = %e, "could not record the run's exit code");
        }
    }
    report
}

/// What the calls still awaiting their webhook mean, for the run's notes: not missed (yet),
/// and not delivered either, so that a clean run right after lost webhooks does not read as
/// "nothing missed".
pub fn awaiting_note(awaiting: u64, grace: std::time::Duration) -> String {
    format!(
        "{awaiting} stored call(s) awaiting their webhook: scored within the last {} (the \
         delivery grace), so not counted as missed yet; a later run reports each as delivered, \
         or recovered if its webhook never comes",
        humantime_secs(grace)
    )
}

/// `grace` as the flag takes it (`30m`, `90s`, `2h`).
fn humantime_secs(grace: std::time::Duration) -> String {
    let secs = grace.as_secs();
    match secs {
        s if s > 0 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s > 0 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// The exit code of a run that finished: 3 when it found something to alert on, 1 when some
/// listed calls could not be stored. (A run that stopped comes as an error: [`stop_code`].)
fn outcome_code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Clean => exit::OK,
        Outcome::Found => exit::FOUND,
        _ => exit::FAILURE,
    }
}

/// The exit code of a run that stopped for `reason`.
fn stop_code(reason: &StopReason<StoreError>) -> u8 {
    match reason {
        StopReason::Client(e) => exit::client_code(e),
        StopReason::Sink(e) => exit::store_code(e),
        _ => exit::FAILURE,
    }
}

impl Reconciled {
    /// The human form: one row per source and a totals row, then what needs attention.
    pub fn table(&self) -> (Table, Vec<String>) {
        let mut table = output::table([
            "source",
            "from",
            "to",
            "pages",
            "listed",
            "new",
            "known",
            "recovered",
            "backfilled",
            "changed",
            "failed",
            "awaiting",
            "watermark",
        ]);
        let row = |name: &str, from: &str, to: &str, c: &Counts, watermark: &str| {
            vec![
                name.to_owned(),
                from.to_owned(),
                to.to_owned(),
                c.pages.to_string(),
                c.listed.to_string(),
                c.new.to_string(),
                c.known.to_string(),
                c.recovered.to_string(),
                c.backfilled.to_string(),
                c.changed_silently.to_string(),
                c.failed.to_string(),
                c.awaiting.to_string(),
                watermark.to_owned(),
            ]
        };
        let ts = svc_reconcile::time::format_ts;
        for source in &self.sources {
            let mut watermark = output::opt(source.watermark.map(ts).as_deref());
            if !source.completed {
                watermark.push_str(" (unchanged: incomplete)");
            }
            table.add_row(row(
                source.source.as_str(),
                &ts(source.from),
                &ts(source.to),
                &source.counts,
                &watermark,
            ));
        }
        if self.sources.len() > 1 {
            table.add_row(row("total", "", "", &self.totals, ""));
        }
        let mut notes = vec![format!(
            "{} in {:.1} s, {} requests{}",
            if self.dry_run {
                "dry run (nothing written)"
            } else {
                "run"
            },
            self.duration.as_secs_f64(),
            self.requests,
            self.run_id
                .map(|id| format!(", run {}", id.0))
                .unwrap_or_default()
        )];
        let listed = |ids: Vec<&str>, total: u64| {
            let mut text = ids.join(", ");
            if total > ids.len() as u64 {
                text.push_str(&format!(" … ({total} in all)"));
            }
            text
        };
        if self.totals.recovered > 0 {
            notes.push(format!(
                "recovered {} call(s) whose webhook never arrived: {}",
                self.totals.recovered,
                listed(
                    self.recovered_call_ids
                        .iter()
                        .map(|id| id.as_str())
                        .collect(),
                    self.totals.recovered
                )
            ));
        }
        if self.totals.changed_silently > 0 {
            notes.push(format!(
                "{} call(s) changed without a webhook (see the change log): {}",
                self.totals.changed_silently,
                listed(
                    self.changed_call_ids.iter().map(|id| id.as_str()).collect(),
                    self.totals.changed_silently
                )
            ));
        }
        if self.totals.awaiting > 0 {
            notes.push(awaiting_note(self.totals.awaiting, self.delivery_grace));
        }
        for failed in &self.failed_calls {
            notes.push(format!(
                "call {} not stored: {}",
                failed.call_id, failed.error
            ));
        }
        if let Some(error) = &self.error {
            notes.push(format!("stopped: {error}"));
        }
        (table, notes)
    }
}
