//! A run's report: what each source's window held and what the run did with it, as a table
//! for people or as one JSON object with stable keys (documented in `tenant-cli/README.md`).

use comfy_table::Table;
use serde::Serialize;

use crate::output;

/// How many call ids a report lists per kind (recovered, changed, failed); the counts are
/// always complete.
pub const LISTED_IDS: usize = 1_000;

/// Counts of one source, or of the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// `GET /calls` pages read.
    pub pages: u64,
    /// Distinct calls listed.
    pub listed: u64,
    /// Calls stored for the first time (recovered and backfilled ones included).
    pub new: u64,
    /// Listed calls already stored, unchanged.
    pub known: u64,
    /// Calls stored by reconcile whose webhook never came: a missed delivery.
    pub recovered: u64,
    /// Calls stored with no webhook that were scored before a receiver started writing to the
    /// store's ledger: history, not missed deliveries.
    pub backfilled: u64,
    /// Listed calls whose `scoredAt` moved since they were stored; their detail is read again.
    pub moved: u64,
    /// Stored calls whose score, `scoredAt` or `updatedAt` changed with no webhook (logged).
    pub changed_silently: u64,
    /// Listed calls whose detail could not be stored (recorded; retried by later runs).
    pub failed: u64,
    /// Call details read.
    pub details_fetched: u64,
}

impl Counts {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &Counts) {
        self.pages += other.pages;
        self.listed += other.listed;
        self.new += other.new;
        self.known += other.known;
        self.recovered += other.recovered;
        self.backfilled += other.backfilled;
        self.moved += other.moved;
        self.changed_silently += other.changed_silently;
        self.failed += other.failed;
        self.details_fetched += other.details_fetched;
    }
}

/// What a run did for one source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceReport {
    /// `roleplay` or `real_call`.
    pub source: String,
    /// The window's `from`.
    pub from: String,
    /// The window's `to`.
    pub to: String,
    /// Whether this was the source's first run.
    pub first_run: bool,
    /// Whether every page of the window was stored.
    pub completed: bool,
    /// The watermark after the run.
    pub watermark: Option<String>,
    /// The counts.
    #[serde(flatten)]
    pub counts: Counts,
}

/// A listed call whose detail could not be stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedCall {
    /// The call.
    pub call_id: String,
    /// Why.
    pub error: String,
}

/// The report of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The run's id in the store (`None` for a dry run, which writes nothing).
    pub run_id: Option<i64>,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// When the run started.
    pub started_at: String,
    /// When it finished.
    pub finished_at: String,
    /// How long it took.
    pub duration_ms: u64,
    /// `ok` or `failed`.
    pub outcome: String,
    /// Why the run stopped, when it failed.
    pub error: Option<String>,
    /// The process's exit code.
    pub exit_code: u8,
    /// HTTP requests sent, retries included.
    pub requests: u64,
    /// Per source.
    pub sources: Vec<SourceReport>,
    /// All sources together.
    pub totals: Counts,
    /// Recovered calls (at most [`LISTED_IDS`]).
    pub recovered_call_ids: Vec<String>,
    /// Calls that changed silently (at most [`LISTED_IDS`]).
    pub changed_call_ids: Vec<String>,
    /// Calls whose detail failed (at most [`LISTED_IDS`]).
    pub failed_calls: Vec<FailedCall>,
}

impl Report {
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
                watermark.to_owned(),
            ]
        };
        for source in &self.sources {
            let mut watermark = output::opt(source.watermark.as_deref());
            if !source.completed {
                watermark.push_str(" (unchanged: incomplete)");
            }
            table.add_row(row(
                &source.source,
                &source.from,
                &source.to,
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
            self.duration_ms as f64 / 1000.0,
            self.requests,
            self.run_id
                .map(|id| format!(", run {id}"))
                .unwrap_or_default()
        )];
        let listed = |ids: &[String], total: u64| {
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
                listed(&self.recovered_call_ids, self.totals.recovered)
            ));
        }
        if self.totals.changed_silently > 0 {
            notes.push(format!(
                "{} call(s) changed without a webhook (see the change log): {}",
                self.totals.changed_silently,
                listed(&self.changed_call_ids, self.totals.changed_silently)
            ));
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
