//! `reconcile --metrics-file`: the run's figures in the Prometheus text format, for
//! node_exporter's textfile collector, written atomically: a temporary file in the same
//! directory (a hidden name not ending in `.prom`, which the collector skips), flushed to disk,
//! then renamed over the target, so a reader sees the previous file or the new one, whole.
//!
//! Every figure is a gauge of the last run, replaced by the next (alert with
//! `max_over_time(…[1h])`), except the last success per source, which a failed run leaves as
//! it was (alert on `time() - …`). `tenant-cli/README.md` lists them with alert rules.

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::reconcile::Report;
use svc_reconcile::Counts;

/// Writes `contents` to `path` atomically (see the module's documentation). The file gets the
/// default permissions of a new file.
///
/// # Errors
/// The directory cannot be written, or the disk is full; the target is then left as it was,
/// and the temporary file removed.
pub fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    write_atomically_as(path, contents, 0o666)
}

/// Writes `contents` to `path` atomically, as [`write_atomically`], the new file created with
/// `mode` (less the umask; 0o600 for a file only its owner may read). Every file the command
/// line writes whole goes through here (`--metrics-file`, `store report --out`, `config set`,
/// `demo --keep`): the temporary file has an unpredictable name and is created exclusively
/// (`O_EXCL`: a link planted at its name is never followed, the write fails instead), then
/// renamed over the target, which replaces a symbolic link at `path` instead of writing
/// through it.
///
/// # Errors
/// As [`write_atomically`].
pub fn write_atomically_as(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let (temp, mut file) = create_temp(dir, &name.to_string_lossy(), mode)?;
    let written = (|| {
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    // The rename itself is durable once the directory is synced (not possible everywhere).
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// A new, hidden temporary file in `dir` for the file `name`, created exclusively under a
/// random name (another try on the rare name already taken).
fn create_temp(dir: &Path, name: &str, mode: u32) -> io::Result<(PathBuf, std::fs::File)> {
    let mut tries = 0;
    loop {
        let temp = dir.join(format!(".{name}.{:016x}.tmp", rand::random::<u64>()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
        #[cfg(not(unix))]
        let _ = mode;
        match options.open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// The figures of one run: its report, and when each listed source last completed.
#[derive(Debug)]
pub struct RunFigures<'a> {
    /// The run's report.
    pub report: &'a Report,
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
