//! `reconcile --metrics-file`: the run's figures in the Prometheus text format, for
//! node_exporter's textfile collector, written atomically: a temporary file in the same
//! directory (a hidden name not ending in `.prom`, which the collector skips), flushed to disk,
//! then renamed over the target, so a reader sees the previous file or the new one, whole.
//!
//! Every figure is a gauge of the last run, replaced by the next (alert with
//! `max_over_time(…[1h])`), except the last success per source, which a failed run leaves as
//! it was (alert on `time() - …`). `tenant-cli/OPERATIONS.md` lists them with alert rules.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use crate::reconcile::Reconciled;
use svc_reconcile::Counts;

/// The figures of one run: its report, and when each listed source last completed.
#[derive(Debug)]
pub struct RunFigures<'a> {
    /// The run's report.
    pub report: &'a Reconciled,
    /// Per source, when the last run that completed it started (`None`: never).
    pub last_success: Vec<(String, Option<DateTime<Utc>>)>,
}

/// One gauge family: name, help, and its samples (labels, value).
struct Family {
    name: &'static str,
    help: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl RunFigures<'_> {
    /// The text-format file.
    pub fn render(&self) -> String {
        let mut text = String::new();
        for family in self.families() {
            if family.samples.is_empty() {
                continue;
            }
            let _ = writeln!(text, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(text, "# TYPE {} gauge", family.name);
            for (labels, value) in family.samples {
                text.push_str(family.name);
                if !labels.is_empty() {
                    let labels: Vec<String> = labels
                        .iter()
                        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                        .collect();
                    let _ = write!(text, "{{{}}}", labels.join(","));
                }
                let _ = writeln!(text, " {value}");
            }
        }
        text
    }

    fn families(&self) -> Vec<Family> {
        let report = self.report;
        let run = |name, help, value: f64| Family {
            name,
            help,
            samples: vec![(Vec::new(), value)],
        };
        let per_source = |name, help, count: fn(&Counts) -> u64| Family {
            name,
            help,
            samples: report
                .sources
                .iter()
                .map(|s| {
                    (
                        vec![("source", s.source.as_str().to_owned())],
                        count(&s.counts) as f64,
                    )
                })
                .collect(),
        };
        let finished = seconds(report.finished_at);
        vec![
            run(
                "svc_cli_reconcile_run_timestamp_seconds",
                "When the last reconcile run finished (unix seconds).",
                finished,
            ),
            run(
                "svc_cli_reconcile_run_success",
                "Whether the last reconcile run finished (1) or stopped on an error (0).",
                if report.outcome == svc_reconcile::Outcome::Stopped {
                    0.0
                } else {
                    1.0
                },
            ),
            run(
                "svc_cli_reconcile_run_exit_code",
                "The exit code of the last reconcile run (0 clean, 3 found missed or changed calls).",
                f64::from(report.exit_code),
            ),
            run(
                "svc_cli_reconcile_run_duration_seconds",
                "How long the last reconcile run took.",
                report.duration.as_secs_f64(),
            ),
            Family {
                name: "svc_cli_reconcile_clock_skew_seconds",
                help: "How far this host's clock was ahead of the service's (negative: behind) when the last run's first page was answered, by the service's Date header (whole seconds). Watermarks follow the service's clock; beyond 300 s webhook signatures are refused too.",
                samples: report
                    .clock_skew_ms
                    .map(|ms| (Vec::new(), ms as f64 / 1000.0))
                    .into_iter()
                    .collect(),
            },
            per_source(
                "svc_cli_reconcile_run_new_calls",
                "Calls the last run stored for the first time. A call stored by an earlier run while awaiting its webhook and recovered by this one counts in svc_cli_reconcile_run_recovered_calls only, so recovered can exceed new.",
                |c| c.new,
            ),
            per_source(
                "svc_cli_reconcile_run_awaiting_calls",
                "Stored calls still awaiting their webhook after the last run: scored within the delivery grace, not missed yet (a later run settles them).",
                |c| c.awaiting,
            ),
            per_source(
                "svc_cli_reconcile_run_recovered_calls",
                "Calls the last run stored whose webhook never arrived: lost deliveries.",
                |c| c.recovered,
            ),
            per_source(
                "svc_cli_reconcile_run_changed_silently_calls",
                "Stored calls whose score changed with no webhook, found by the last run.",
                |c| c.changed_silently,
            ),
            per_source(
                "svc_cli_reconcile_run_failed_calls",
                "Listed calls whose detail the last run could not store (retried by later runs).",
                |c| c.failed,
            ),
            Family {
                name: "svc_cli_reconcile_last_success_timestamp_seconds",
                help: "When the last run that completed this source started (unix seconds).",
                samples: self
                    .last_success
                    .iter()
                    .filter_map(|(source, at)| {
                        at.map(|at| (vec![("source", source.clone())], seconds(at)))
                    })
                    .collect(),
            },
        ]
    }
}

/// Unix seconds with milliseconds.
fn seconds(at: DateTime<Utc>) -> f64 {
    at.timestamp_millis() as f64 / 1000.0
}

/// A label value as the text format writes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
