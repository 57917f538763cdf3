//! `svc-cli store report`: the local store as one self-contained HTML page a person reads in a
//! browser, offline: the score distribution, scores over time per agency, a table per agent
//! (calls, average score, compliance) and delivery health per day (webhooks received, calls
//! recovered by reconcile, failure events, silent changes).
//!
//! # Layout
//! - [`model`]: the figures, aggregated from the store's rows as they stream past
//!   ([`svc_store::report_rows`] reads them).
//! - [`chart`]: the inline SVG charts.
//! - [`html`]: the page.
//! - [`escape`]: HTML escaping (the console's page uses it too).

pub mod chart;
pub mod escape;
pub mod html;
pub mod model;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use model::{Aggregator, Figures};
use svc_store::report_rows::ReportWindow;
use svc_store::{Store, StoreError};

/// A report, ready to render.
#[derive(Debug, Clone)]
pub struct HtmlReport {
    /// The store it was read from (as named).
    pub store: String,
    /// When it was made.
    pub generated_at: DateTime<Utc>,
    /// Where it starts (`None`: every call).
    pub since: Option<DateTime<Utc>>,
    /// What it shows.
    pub figures: Figures,
}

/// What writing a report may fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the file failed.
    #[error("cannot write the report {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl HtmlReport {
    /// Reads `store` (calls listed, deliveries verified, recoveries and changes found at or
    /// after `since`) as of `now`.
    ///
    /// # Errors
    /// A database error.
    pub fn build(
        store: &Store,
        since: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<Self, StoreError> {
        let window = ReportWindow {
            since_ms: since.map(|s| s.timestamp_millis()),
            since_ts: since.map(svc_reconcile::time::format_ts),
        };
        let mut aggregator = Aggregator::new();
        store.for_each_report_call(&window, &mut |call| aggregator.add(call))?;
        let days = store.report_days(&window)?;
        Ok(Self {
            store: store.location().to_string(),
            generated_at: now,
            since,
            figures: aggregator.finish(days),
        })
    }

    /// The page.
    pub fn to_html(&self) -> String {
        html::render(self)
    }

    /// Writes the page to `path`, replacing it whole (a reader never sees half a report).
    ///
    /// # Errors
    /// The directory does not exist or cannot be written.
    pub fn write(&self, path: &Path) -> Result<(), ReportError> {
        let failed = |source| ReportError::Write {
            path: path.to_path_buf(),
            source,
        };
        // A temporary file created exclusively under a random name, then renamed over (a link
        // at `path` is replaced, never written through).
        crate::files::write_atomically(path, self.to_html().as_bytes()).map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::Aggregator;
    use svc_store::report_rows::DayCounts;

    fn report(figures: Figures) -> HtmlReport {
        HtmlReport {
            store: "calls.db".into(),
            generated_at: DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default(),
            since: None,
            figures,
        }
    }

    #[cfg(unix)]
    #[test]
    fn writing_never_follows_a_link_at_a_guessable_temporary_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "precious").expect("victim");
        let out = dir.path().join("report.html");
        // The names a temporary file of this process could be guessed by.
        let pid = std::process::id();
        for name in [
            format!("report.html.{pid}.tmp"),
            format!(".report.html.{pid}.0.tmp"),
            "report.html.tmp".to_owned(),
        ] {
            std::os::unix::fs::symlink(&victim, dir.path().join(name)).expect("plant a link");
        }
        report(Aggregator::new().finish(Vec::new()))
            .write(&out)
            .expect("the report is written");
        assert_eq!(
            std::fs::read_to_string(&victim).expect("victim"),
            "precious"
        );
        assert!(
            std::fs::read_to_string(&out)
                .expect("report")
                .contains("<html")
        );
    }

    #[test]
    fn the_page_has_every_section_and_its_charts_and_escapes_store_values() {
        let mut aggregator = Aggregator::new();
        aggregator.add(svc_store::report_rows::ReportCall {
            source: "roleplay".into(),
            agent_id: Some("svc_agent_1".into()),
            agency_id: Some("svc_agency_1".into()),
            platform_agent_id: Some("<script>alert(1)</script>".into()),
            platform_agency_id: Some("agency & co".into()),
            listed_ms: Some(1_767_225_600_000),
            overall_score: Some(72.0),
            compliance_percent: Some(90.0),
        });
        let days = vec![(
            "2026-01-01".to_owned(),
            DayCounts {
                scored_webhooks: 3,
                failure_events: 1,
                recovered: 2,
                silent_changes: 1,
            },
        )];
        let page = report(aggregator.finish(days)).to_html();
        for id in [
            "score-distribution",
            "scores-over-time",
            "agents",
            "delivery-health",
        ] {
            assert!(page.contains(&format!(r#"<section id="{id}">"#)), "{id}");
        }
        assert_eq!(page.matches(r#"<svg class="chart""#).count(), 3);
        assert!(
            !page.contains("<script"),
            "no script at all, escaped data included"
        );
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("agency &amp; co"));
        assert!(!page.contains("http://") && !page.contains("https://"));
    }

    #[test]
    fn an_empty_store_still_makes_a_page_that_says_so() {
        let page = report(Aggregator::new().finish(Vec::new())).to_html();
        assert!(page.contains("No scored calls"));
        assert!(page.contains("No calls in the store."));
    }
}
