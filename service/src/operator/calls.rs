//! The operator's `calls …` commands on real calls: ingest dialer records, re-disposition a
//! call, and sweep archived recordings past retention.
//!
//! `calls ingest-real` exits 0 when every record was processed (a dropped record is
//! processed), 1 when any record was invalid, 2 on a usage error (a file that cannot be
//! read, is not a regular file, is over [`input::MAX_FILE_BYTES`] or is not UTF-8; an unknown
//! tenant), in which case nothing is ingested, and 75 when the disk under the database or the
//! archive is full (the batch in progress is not stored; the same file again stores the rest).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{Output, Reported, Temporary, Usage, print, print_line};
use crate::clock::Clock;
use crate::config::{DEFAULT_DB, default_audio_dir};
use crate::db::Db;
use crate::realcall::audio::Archive;
use crate::realcall::ingest::{Disposal, Ingest, RecordOutcome, read_records};
use crate::realcall::input;
use crate::realcall::redisposition::redisposition;
use crate::realcall::replay;
use crate::realcall::sweep::sweep;
use super::target::OperatorTarget;
use crate::scoring::real_call::Disposition;
use crate::time::{format_millis, parse_timestamp};

/// `svc-service calls …`.
#[derive(Debug, Args)]
pub struct CallsArgs {
    /// SQLite database file of the service.
    #[arg(long, env = "SVC_DB", default_value = DEFAULT_DB, global = true)]
    pub db: PathBuf,
    /// Directory of the archived recordings (default: `<db>-audio` beside the database).
    #[arg(long, env = "SVC_AUDIO_DIR", global = true)]
    pub audio_dir: Option<PathBuf>,
    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// The operator command.
    #[command(subcommand)]
    pub command: CallsCommand,
}

/// The calls commands.
#[derive(Debug, Subcommand)]
pub enum CallsCommand {
    /// Ingest dialer records (a JSON array or JSON lines; `-` reads stdin): one result per
    /// record, in order, then a summary.
    IngestReal {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// The records; relative recording paths are read from this file's directory (from
        /// the working directory with `-`).
        #[arg(long)]
        file: PathBuf,
        /// Move each record's startedAt into the last hours (file order, five minutes apart,
        /// the last 15 minutes ago), to replay a fixture file as recent calls.
        #[arg(long)]
        relative_to_now: bool,
    },
    /// Change a real call's disposition and score it again (sends no webhook); prints the old
    /// and the new score.
    Redisposition {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// The real call (svc_call_…).
        #[arg(long)]
        call_id: String,
        /// sale, no_sale, callback or not_interested.
        #[arg(long, value_parser = Disposition::NAMES)]
        disposition: String,
    },
    /// Forget recordings archived more than 30 days ago and delete their files (serve does
    /// this hourly).
    SweepAudio {
        /// Sweep as if now were this time (ISO 8601) instead of the system clock.
        #[arg(long)]
        now: Option<String>,
    },
}

impl CallsArgs {
    /// Runs the command against the database.
    ///
    /// # Errors
    /// [`Usage`] for a bad file or value (exit 2), [`Reported`] when records were invalid
    /// (exit 1), or a database failure.
    pub async fn exec(self) -> anyhow::Result<()> {
        let target = OperatorTarget {
            audio_dir: self.audio_dir,
            json: self.json,
            ..OperatorTarget::new(self.db)
        };
        match self.command {
            CallsCommand::IngestReal {
                tenant,
                file,
                relative_to_now,
            } => ingest_real(&target, &tenant, &file, relative_to_now).await,
            CallsCommand::Redisposition {
                tenant,
                call_id,
                disposition,
            } => {
                let disposition = Disposition::parse(&disposition)
                    .ok_or_else(|| Usage(format!("unknown disposition {disposition:?}")))?;
                redisposition_call(&target, &tenant, &call_id, disposition).await
            }
            CallsCommand::SweepAudio { now } => sweep_audio(&target, now).await,
        }
    }
}

/// Opens the target's database and its archive of recordings.
async fn open(target: &OperatorTarget) -> anyhow::Result<(Db, Archive)> {
    let db = Db::open(&target.db)
        .await
        .with_context(|| format!("opening database {}", target.db.display()))?;
    let archive = Archive::new(
        target
            .audio_dir
            .clone()
            .unwrap_or_else(|| default_audio_dir(&target.db)),
    );
    Ok((db, archive))
}

/// Ingests the dialer records in `file` for `tenant`, printing one line per record.
pub(crate) async fn ingest_real(
    target: &OperatorTarget,
    tenant: &str,
    file: &Path,
    relative_to_now: bool,
) -> anyhow::Result<()> {
    let (db, archive) = open(target).await?;
    ingest(db, archive, tenant, file, relative_to_now, target.json).await
}

/// Re-dispositions `tenant`'s real call `call_id`, printing the old and the new score.
pub(crate) async fn redisposition_call(
    target: &OperatorTarget,
    tenant: &str,
    call_id: &str,
    disposition: Disposition,
) -> anyhow::Result<()> {
    let (db, _) = open(target).await?;
    let done = redisposition(
        &db,
        &Clock::System,
        tenant.trim(),
        call_id.trim(),
        disposition,
    )
    .await?;
    let overall = |score: &Value| score["overallScore"].clone();
    print(
        &Output {
            json: json!({
                "callId": done.call_id,
                "disposition": { "before": done.disposition_before, "after": done.disposition.as_str() },
                "score": { "before": done.score_before, "after": done.score },
                "scoredAt": format_millis(done.scored_at),
            }),
            human: format!(
                "{}: disposition {} -> {}, overallScore {} -> {}, compliancePercent {} -> {}{} (no webhook sent)",
                done.call_id,
                done.disposition_before,
                done.disposition.as_str(),
                overall(&done.score_before),
                overall(&done.score),
                done.score_before["compliancePercent"],
                done.score["compliancePercent"],
                scorecard_change(&done.score_before, &done.score),
            ),
        },
        target.json,
    )
}

/// `, complianceScorecard dropped` (or `added`) when a re-disposition took it away (or gave
/// it): it is carried only by a default-rubric health-plan sale (contract section 2).
fn scorecard_change(before: &Value, after: &Value) -> &'static str {
    let has = |score: &Value| score.get("complianceScorecard").is_some();
    match (has(before), has(after)) {
        (true, false) => ", complianceScorecard dropped",
        (false, true) => ", complianceScorecard added",
        _ => "",
    }
}

/// Forgets recordings past retention (as of `now`, else the system clock) and deletes their
/// files.
async fn sweep_audio(target: &OperatorTarget, now: Option<String>) -> anyhow::Result<()> {
    let (db, archive) = open(target).await?;
    let now = match now {
        Some(text) => parse_timestamp(text.trim())
            .ok_or_else(|| Usage(format!("--now {text:?} is not an ISO 8601 time")))?,
        None => chrono::Utc::now(),
    };
    let swept = sweep(&db, &archive, now).await?;
    print(
        &Output {
            json: json!({ "expired": swept.expired, "deletedFiles": swept.deleted }),
            human: format!(
                "{} call(s) past the recording retention, {} file(s) deleted",
                swept.expired, swept.deleted
            ),
        },
        target.json,
    )
}

async fn ingest(
    db: Db,
    archive: Archive,
    tenant: &str,
    file: &Path,
    relative_to_now: bool,
    as_json: bool,
) -> anyhow::Result<()> {
    let tenant = tenant.trim();
    if db.tenant(tenant).await?.is_none() {
        return Err(Usage(format!("no tenant {tenant:?}")).into());
    }
    // Read whole (a regular file, capped) before any record is looked at.
    let (text, base_dir) = if file.as_os_str() == "-" {
        let text = input::read_stdin().map_err(|e| Usage(e.to_string()))?;
        (text, PathBuf::from("."))
    } else {
        let text = input::read_file(file).map_err(|e| Usage(e.to_string()))?;
        let dir = file
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        (text, dir)
    };
    let mut records = read_records(&text).map_err(Usage)?;
    if relative_to_now {
        replay::relative_to_now(&mut records, chrono::Utc::now());
    }
    let outcomes = Ingest::new(db, archive, Clock::System, base_dir)
        .ingest(tenant, records)
        .await
        .map_err(|err| -> anyhow::Error {
            if err.is_disk_full() {
                Temporary(format!(
                    "{err}: the disk is full; nothing of the batch in progress was stored \
                     (earlier batches of the file were): ingest the same file again once \
                     space is freed"
                ))
                .into()
            } else {
                err.into()
            }
        })?;
    let mut counts = Counts::default();
    for outcome in &outcomes {
        counts.add(&outcome.disposal);
        if as_json {
            print_line(&line_json(outcome).to_string())?;
        } else {
            print_line(&line_text(outcome))?;
        }
    }
    let summary = format!(
        "{} record(s): {} stored ({} not scored), {} already ingested, {} dropped, {} invalid",
        outcomes.len(),
        counts.stored,
        counts.not_scored,
        counts.already,
        counts.dropped,
        counts.invalid
    );
    let _ = writeln!(std::io::stderr(), "{summary}");
    if counts.invalid > 0 {
        return Err(Reported(1).into());
    }
    Ok(())
}

#[derive(Default)]
struct Counts {
    stored: usize,
    not_scored: usize,
    already: usize,
    dropped: usize,
    invalid: usize,
}

impl Counts {
    fn add(&mut self, disposal: &Disposal) {
        match disposal {
            Disposal::Stored { scored, .. } => {
                self.stored += 1;
                if !scored {
                    self.not_scored += 1;
                }
            }
            Disposal::AlreadyIngested { .. } => self.already += 1,
            Disposal::Dropped(_) => self.dropped += 1,
            Disposal::Invalid(_) => self.invalid += 1,
        }
    }
}

/// One result line of `--json`: `dialerCallId`, `callId`, `dropped` (the documented keys),
/// plus `record` (its position), `alreadyIngested`, `scored` and `error` (invalid records).
fn line_json(outcome: &RecordOutcome) -> Value {
    let (call_id, dropped, error, already, scored) = match &outcome.disposal {
        Disposal::Stored { call_id, scored } => (Some(call_id), None, None, false, Some(*scored)),
        Disposal::AlreadyIngested { call_id } => (Some(call_id), None, None, true, None),
        Disposal::Dropped(reason) => (None, Some(reason.as_str()), None, false, None),
        Disposal::Invalid(error) => (None, None, Some(error), false, None),
    };
    let mut line = json!({
        "record": outcome.index,
        "dialerCallId": outcome.dialer_call_id,
        "callId": call_id,
        "dropped": dropped,
    });
    if let Some(map) = line.as_object_mut() {
        if already {
            map.insert("alreadyIngested".into(), Value::Bool(true));
        }
        if let Some(scored) = scored {
            map.insert("scored".into(), Value::Bool(scored));
        }
        if let Some(error) = error {
            map.insert("error".into(), Value::String(error.clone()));
        }
    }
    line
}

fn line_text(outcome: &RecordOutcome) -> String {
    let id = outcome.dialer_call_id.as_deref().unwrap_or("-");
    let what = match &outcome.disposal {
        Disposal::Stored {
            call_id,
            scored: true,
        } => format!("stored {call_id}"),
        Disposal::Stored {
            call_id,
            scored: false,
        } => {
            format!("stored {call_id} (not scored: no rep turn)")
        }
        Disposal::AlreadyIngested { call_id } => format!("already ingested as {call_id}"),
        Disposal::Dropped(reason) => format!("dropped: {}", reason.as_str()),
        Disposal::Invalid(error) => format!("invalid: {error}"),
    };
    format!("{:>5}  {id:<24}  {what}", outcome.index)
}
