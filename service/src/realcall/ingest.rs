//! Ingesting dialer records: each record is checked, dropped for a documented reason, or
//! attributed, scored, stored (once per agency and dialer call id) with its archived recording
//! and its queued `call.scored` webhook. Records are processed in batches, each stored in one
//! transaction.
//!
//! In order, a record is:
//! - invalid when it does not read ([`super::record`]) or names no agency of the tenant;
//! - the call already stored, when its agency already has its dialer call id (nothing changes);
//! - dropped, before anything is stored, billed or delivered: `agency_not_enabled`,
//!   `too_short` (under [`MIN_DURATION_SECS`] seconds), `recording_outside_dir` (the path,
//!   symlinks resolved, leaves the ingest file's directory), `recording_not_audio` (not an
//!   audio file by its extension, see [`super::audio::audio_type`]), `no_audio` (no
//!   recording, or an empty or unreadable file), `no_transcript` (none, or no turns),
//!   `unregistered_rep`;
//! - otherwise stored: scored, or not scored (`SCORING_INCOMPLETE`) when no rep turn has
//!   content; either way its webhook is queued and its minutes count toward the allowance.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;
use svc_contract::CallSource;

use super::attribution::attribute;
use super::audio::{Archive, ArchiveError};
use super::record::{AgencyName, DialerRecord, DuplicateKey, MAX_TEXT_LEN};
use crate::clock::Clock;
use crate::db::{Candidate, Db, DbError, NewRealCall, RealCallAgency, Stored};
use crate::ids;
use crate::scoring::evaluate::{EventIds, event_for};
use crate::scoring::real_call::{self, RealCall};
use crate::time::format_timestamp;

/// `path` with `.` dropped and each `..` taking away the component before it, by the text
/// alone (the file system is not read; `..` at the root stays at the root).
fn lexically_normal(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// Calls shorter than this are too short to assess (dropped `too_short`).
pub const MIN_DURATION_SECS: i64 = 30;
/// Records stored per transaction.
const BATCH: usize = 500;

/// Why an ingestion stopped (the batch in progress is not stored; earlier ones are).
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A recording could not be written into the archive (not the recording's fault, so its
    /// call is not dropped: ingesting the file again once the archive is fixed stores it).
    #[error(transparent)]
    Archive(ArchiveError),
}

impl IngestError {
    /// Whether the disk under the database or the archive is full: nothing of the batch in
    /// progress was stored, and ingesting the same file again once space is freed stores it
    /// (the operator's command exits 75 for it).
    pub fn is_disk_full(&self) -> bool {
        match self {
            Self::Db(DbError::Sqlite(err)) => {
                err.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
            }
            Self::Db(DbError::File { source, .. })
            | Self::Archive(ArchiveError::Archive { source, .. }) => {
                source.kind() == std::io::ErrorKind::StorageFull
            }
            _ => false,
        }
    }
}

impl From<tokio::task::JoinError> for IngestError {
    fn from(err: tokio::task::JoinError) -> Self {
        Self::Db(DbError::Task(err))
    }
}

/// Why a record was dropped before persistence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Its agency is not switched on for real calls.
    AgencyNotEnabled,
    /// Under [`MIN_DURATION_SECS`].
    TooShort,
    /// The recording's path leaves the ingest file's directory (`..`, an absolute path
    /// elsewhere, or a symlink pointing out): never read, so a dialer file cannot have the
    /// service archive and serve any file it can read.
    RecordingOutsideDir,
    /// The recording is not an audio file (its extension is not one of the audio types the
    /// archive serves), so it would be served as something a browser runs or renders.
    RecordingNotAudio,
    /// No usable recording.
    NoAudio,
    /// No transcript.
    NoTranscript,
    /// No registered agent of the agency matches the rep.
    UnregisteredRep,
}

impl Dropped {
    /// As printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Dropped::AgencyNotEnabled => "agency_not_enabled",
            Dropped::TooShort => "too_short",
            Dropped::RecordingOutsideDir => "recording_outside_dir",
            Dropped::RecordingNotAudio => "recording_not_audio",
            Dropped::NoAudio => "no_audio",
            Dropped::NoTranscript => "no_transcript",
            Dropped::UnregisteredRep => "unregistered_rep",
        }
    }
}

/// What became of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposal {
    /// Stored now; `scored` says whether it was scored.
    Stored {
        /// The new call.
        call_id: String,
        /// False when it was stored not scored (`SCORING_INCOMPLETE`).
        scored: bool,
    },
    /// Its dialer call id was already stored for the agency: nothing changed.
    AlreadyIngested {
        /// The call stored earlier.
        call_id: String,
    },
    /// Dropped before persistence.
    Dropped(Dropped),
    /// It does not read, or names no agency of the tenant.
    Invalid(String),
}

/// The outcome of one record, in input order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordOutcome {
    /// Its position in the input, from 1.
    pub index: usize,
    /// Its `dialerCallId`, when it has one.
    pub dialer_call_id: Option<String>,
    /// What became of it.
    pub disposal: Disposal,
}

/// Ingests dialer records into the database of one tenant.
#[derive(Debug, Clone)]
pub struct Ingest {
    db: Db,
    archive: Archive,
    clock: Clock,
    /// Where relative recording paths are read from.
    base_dir: PathBuf,
}

/// A record that read and names an agency of the tenant.
struct Parsed {
    slot: usize,
    record: DialerRecord,
    agency: RealCallAgency,
}

/// A record that passed every check: what remains is to archive its recording and score it.
struct Attributed {
    slot: usize,
    record: DialerRecord,
    agency: RealCallAgency,
    agent: Candidate,
    recording: PathBuf,
}

/// A record ready to be stored, or dropped because its recording could not be archived.
struct Built {
    slot: usize,
    call: Result<NewRealCall, Dropped>,
}

impl Ingest {
    /// Ingestion into `db`, archiving recordings in `archive`, reading relative recording paths
    /// from `base_dir`.
    pub fn new(db: Db, archive: Archive, clock: Clock, base_dir: impl Into<PathBuf>) -> Self {
        Self {
            db,
            archive,
            clock,
            base_dir: base_dir.into(),
        }
    }

    /// Ingests `records` (each already read as JSON, or the reason it could not be) for
    /// `tenant_id`, and returns one outcome per record, in order.
    ///
    /// Records go in batches of `BATCH`: the checks run in order, one read per batch finds
    /// the dialer calls already stored, recordings are archived and calls scored on every
    /// core, and the batch is stored in one transaction.
    ///
    /// # Errors
    /// [`IngestError::Db`] when the database fails, [`IngestError::Archive`] when a recording
    /// cannot be written into the archive. Either way the batch in progress is not stored (its
    /// archived files are orphans the sweep deletes) and earlier batches are.
    pub async fn ingest(
        &self,
        tenant_id: &str,
        records: Vec<Result<Value, String>>,
    ) -> Result<Vec<RecordOutcome>, IngestError> {
        let mut agencies: HashMap<AgencyName, Option<RealCallAgency>> = HashMap::new();
        let mut rosters: HashMap<String, Vec<Candidate>> = HashMap::new();
        let mut outcomes = Vec::with_capacity(records.len());
        let mut records = records.into_iter().enumerate().peekable();
        while records.peek().is_some() {
            let mut parsed = Vec::new();
            for (i, record) in records.by_ref().take(BATCH) {
                let slot = outcomes.len();
                // An invalid record is still named by its dialerCallId when it has one (within
                // its bound: a huge one is not echoed).
                let named = record
                    .as_ref()
                    .ok()
                    .and_then(|value| value.get("dialerCallId"))
                    .and_then(Value::as_str)
                    .map(|id| id.trim().to_owned())
                    .filter(|id| !id.is_empty() && id.chars().count() <= MAX_TEXT_LEN);
                // The clock bounds a plausible startedAt.
                let now = self.clock.now();
                let disposal = match record.and_then(|value| DialerRecord::parse(value, now)) {
                    Err(error) => Disposal::Invalid(error),
                    Ok(record) => match self.agency(tenant_id, &record, &mut agencies).await? {
                        Some(agency) => {
                            parsed.push(Parsed {
                                slot,
                                record,
                                agency,
                            });
                            // Replaced below.
                            Disposal::Invalid(String::new())
                        }
                        None => Disposal::Invalid(format!(
                            "{} is not an agency of this tenant",
                            record.agency
                        )),
                    },
                };
                outcomes.push(RecordOutcome {
                    index: i + 1,
                    dialer_call_id: named,
                    disposal,
                });
            }
            self.ingest_batch(tenant_id, parsed, &mut rosters, &mut outcomes)
                .await?;
        }
        Ok(outcomes)
    }

    /// The rest of a batch, from the records that named an agency of the tenant: what is
    /// already stored, the drops, attribution, archiving and scoring, storing.
    async fn ingest_batch(
        &self,
        tenant_id: &str,
        parsed: Vec<Parsed>,
        rosters: &mut HashMap<String, Vec<Candidate>>,
        outcomes: &mut [RecordOutcome],
    ) -> Result<(), IngestError> {
        let mut asked: HashMap<&str, Vec<String>> = HashMap::new();
        for p in &parsed {
            asked
                .entry(p.agency.id.as_str())
                .or_default()
                .push(p.record.dialer_call_id.clone());
        }
        let mut stored: HashMap<(String, String), String> = HashMap::new();
        for (agency_id, dialer_call_ids) in asked {
            for (dialer_call_id, call_id) in
                self.db.dialer_calls(agency_id, dialer_call_ids).await?
            {
                stored.insert((agency_id.to_owned(), dialer_call_id), call_id);
            }
        }
        // (agency, dialer call id) of the batch's calls to store, and their slot: a later
        // record of the same call is the call already ingested.
        let mut in_batch: HashMap<(String, String), usize> = HashMap::new();
        let mut repeats: Vec<(usize, usize)> = Vec::new();
        let mut attributed = Vec::new();
        for Parsed {
            slot,
            record,
            agency,
        } in parsed
        {
            let key = (agency.id.clone(), record.dialer_call_id.clone());
            if let Some(first) = in_batch.get(&key) {
                repeats.push((slot, *first));
                continue;
            }
            if let Some(call_id) = stored.get(&key) {
                outcomes[slot].disposal = Disposal::AlreadyIngested {
                    call_id: call_id.clone(),
                };
                continue;
            }
            match self.check(tenant_id, slot, record, agency, rosters).await? {
                Ok(ready) => {
                    in_batch.insert(key, slot);
                    attributed.push(ready);
                }
                Err(disposal) => outcomes[slot].disposal = disposal,
            }
        }
        let mut calls = Vec::with_capacity(attributed.len());
        let mut slots = Vec::with_capacity(attributed.len());
        for Built { slot, call } in self.archive_and_score(tenant_id, attributed).await? {
            match call {
                Ok(call) => {
                    slots.push((slot, call.id.clone(), call.score.is_some()));
                    calls.push(call);
                }
                Err(dropped) => outcomes[slot].disposal = Disposal::Dropped(dropped),
            }
        }
        let results = self.db.insert_real_calls(calls).await?;
        for ((slot, call_id, scored), result) in slots.into_iter().zip(results) {
            outcomes[slot].disposal = match result {
                Stored::New => Disposal::Stored { call_id, scored },
                Stored::Existing(call_id) => Disposal::AlreadyIngested { call_id },
            };
        }
        for (slot, first) in repeats {
            outcomes[slot].disposal = match &outcomes[first].disposal {
                Disposal::Stored { call_id, .. } | Disposal::AlreadyIngested { call_id } => {
                    Disposal::AlreadyIngested {
                        call_id: call_id.clone(),
                    }
                }
                other => other.clone(),
            };
        }
        Ok(())
    }

    /// The agency a record names, if it is one of the tenant's (looked up once per batch run).
    async fn agency(
        &self,
        tenant_id: &str,
        record: &DialerRecord,
        agencies: &mut HashMap<AgencyName, Option<RealCallAgency>>,
    ) -> Result<Option<RealCallAgency>, DbError> {
        if !agencies.contains_key(&record.agency) {
            let agency = match &record.agency {
                AgencyName::Id(id) => self.db.real_call_agency(tenant_id, id).await?,
                AgencyName::Platform(id) => {
                    self.db
                        .real_call_agency_by_platform_id(tenant_id, id)
                        .await?
                }
            };
            agencies.insert(record.agency.clone(), agency);
        }
        Ok(agencies.get(&record.agency).cloned().flatten())
    }

    /// Runs the drops and attribution on the record in `slot`, not stored yet: `Ok` is the call
    /// to archive and score.
    async fn check(
        &self,
        tenant_id: &str,
        slot: usize,
        record: DialerRecord,
        agency: RealCallAgency,
        rosters: &mut HashMap<String, Vec<Candidate>>,
    ) -> Result<Result<Attributed, Disposal>, DbError> {
        let recording = if !agency.enabled {
            Err(Dropped::AgencyNotEnabled)
        } else if record.duration_sec < MIN_DURATION_SECS {
            Err(Dropped::TooShort)
        } else {
            self.recording(record.recording.as_deref())
        };
        let recording = recording.and_then(|recording| {
            if record.transcript.as_ref().is_none_or(Vec::is_empty) {
                Err(Dropped::NoTranscript)
            } else {
                Ok(recording)
            }
        });
        let recording = match recording {
            Ok(recording) => recording,
            Err(dropped) => return Ok(Err(Disposal::Dropped(dropped))),
        };
        if !rosters.contains_key(&agency.id) {
            let roster = self.db.agency_candidates(tenant_id, &agency.id).await?;
            rosters.insert(agency.id.clone(), roster);
        }
        let roster = rosters
            .get(&agency.id)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let Some((agent, _)) = attribute(&record.rep, roster, agency.third_party_dialer) else {
            return Ok(Err(Disposal::Dropped(Dropped::UnregisteredRep)));
        };
        let agent = agent.clone();
        Ok(Ok(Attributed {
            slot,
            record,
            agency,
            agent,
            recording,
        }))
    }

    /// Archives the recordings and scores the calls of a batch, spread over the machine's
    /// cores (copying files waits on the disk, scoring on the CPU); in input order.
    async fn archive_and_score(
        &self,
        tenant_id: &str,
        attributed: Vec<Attributed>,
    ) -> Result<Vec<Built>, IngestError> {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        let per_worker = attributed.len().div_ceil(workers).max(1);
        let mut attributed = attributed.into_iter();
        let mut tasks = Vec::new();
        loop {
            let chunk: Vec<Attributed> = attributed.by_ref().take(per_worker).collect();
            if chunk.is_empty() {
                break;
            }
            let (ingest, tenant_id) = (self.clone(), tenant_id.to_owned());
            tasks.push(tokio::task::spawn_blocking(move || {
                chunk
                    .into_iter()
                    .map(|a| ingest.archive_and_build(&tenant_id, a))
                    .collect::<Result<Vec<Built>, ArchiveError>>()
            }));
        }
        // Every task is awaited, also after one failed: returning at once left the others
        // copying in the background, their temporary files still in the archive when the
        // caller saw the error.
        let mut built = Vec::new();
        let mut failed = None;
        for task in tasks {
            match task.await? {
                Ok(chunk) => built.extend(chunk),
                Err(error) => {
                    failed.get_or_insert(error);
                }
            }
        }
        match failed {
            Some(error) => Err(IngestError::Archive(error)),
            None => Ok(built),
        }
    }

    /// Archives one recording and scores its call.
    fn archive_and_build(
        &self,
        tenant_id: &str,
        attributed: Attributed,
    ) -> Result<Built, ArchiveError> {
        let Attributed {
            slot,
            record,
            agency,
            agent,
            recording,
        } = attributed;
        // Checked usable before; a file that vanished since is a recording that cannot be read.
        let call = match self.archive.store(&recording, self.clock.now().into()) {
            Ok(audio_file) => Ok(self.build(tenant_id, &agency, &agent, record, audio_file)),
            Err(ArchiveError::Source(_)) => Err(Dropped::NoAudio),
            Err(err @ ArchiveError::Archive { .. }) => return Err(err),
        };
        Ok(Built { slot, call })
    }

    /// The record's recording, confined to the ingest file's directory: the path is resolved
    /// against it, first by its text (`..` and absolute paths), then on disk (symlinks), and
    /// must stay inside it both times; then it must be an audio file, readable and not empty.
    fn recording(&self, path: Option<&str>) -> Result<PathBuf, Dropped> {
        let path = path.map(str::trim).ok_or(Dropped::NoAudio)?;
        let base = std::path::absolute(&self.base_dir).map_err(|_| Dropped::NoAudio)?;
        let base = lexically_normal(&base);
        // By its text first, so a path outside is refused without looking at what is there.
        if !lexically_normal(&base.join(path)).starts_with(&base) {
            return Err(Dropped::RecordingOutsideDir);
        }
        let resolved = std::fs::canonicalize(base.join(path)).map_err(|_| Dropped::NoAudio)?;
        let real_base = std::fs::canonicalize(&base).map_err(|_| Dropped::NoAudio)?;
        if !resolved.starts_with(&real_base) {
            return Err(Dropped::RecordingOutsideDir);
        }
        if super::audio::audio_type(&resolved).is_none() {
            return Err(Dropped::RecordingNotAudio);
        }
        if !Archive::usable(&resolved) {
            return Err(Dropped::NoAudio);
        }
        Ok(resolved)
    }

    /// Scores the call and builds what is stored, webhook body included.
    fn build(
        &self,
        tenant_id: &str,
        agency: &RealCallAgency,
        agent: &Candidate,
        record: DialerRecord,
        audio_file: String,
    ) -> NewRealCall {
        build_real_call(
            self.clock.now(),
            tenant_id,
            agency,
            agent,
            record,
            Some(audio_file),
        )
    }
}

/// Scores a real call attributed to `agent` of `agency` at `now`, and builds what is stored,
/// webhook body included (`audio_file`: its archived recording, if any).
pub fn build_real_call(
    now: chrono::DateTime<chrono::Utc>,
    tenant_id: &str,
    agency: &RealCallAgency,
    agent: &Candidate,
    record: DialerRecord,
    audio_file: Option<String>,
) -> NewRealCall {
    let call_id = ids::call_id();
    // The root of the delivery's trace: its attempts continue it from the outbox row.
    let span = tracing::info_span!("call_scoring", call_id = %call_id, source = "real_call");
    let _scoring = span.enter();
    let turns = record.turns();
    let outcome = real_call::score(RealCall {
        turns: &turns,
        disposition: record.disposition,
        product_line: record.product_line,
        rubric: agency.rubric,
    });
    let ids = EventIds {
        call_id: &call_id,
        agent_id: &agent.id,
        agency_id: &agency.id,
        platform_agent_id: agent.platform_agent_id.as_deref(),
        platform_agency_id: Some(&agency.platform_agency_id),
        external_user_id: None,
        external_agency_id: None,
    };
    let event = event_for(
        &ids,
        CallSource::RealCall,
        outcome.as_ref().err().copied(),
        format_timestamp(now),
        ids::request_id(),
    );
    NewRealCall {
        id: call_id.clone(),
        tenant_id: tenant_id.to_owned(),
        agency_id: agency.id.clone(),
        platform_agency_id: agency.platform_agency_id.clone(),
        agent_id: agent.id.clone(),
        platform_agent_id: agent.platform_agent_id.clone(),
        dialer_call_id: record.dialer_call_id,
        disposition: record.disposition.as_str().to_owned(),
        product_line: record.product_line.as_str().to_owned(),
        started_at: record.started_at,
        duration_sec: record.duration_sec,
        transcript: serde_json::to_string(&record.transcript.unwrap_or_default())
            .unwrap_or_else(|_| "[]".to_owned()),
        score: outcome
            .ok()
            .and_then(|score| serde_json::to_string(&score).ok()),
        audio_file,
        webhook_id: ids::webhook_id(),
        webhook_body: serde_json::to_string(&event).unwrap_or_default(),
        traceparent: svc_ops::traces::traceparent(&span),
        now: now.timestamp_millis(),
    }
}

/// Reads an ingest file: a JSON array of records, or JSON lines (one record per non-blank
/// line). A line that is not JSON is an invalid record, not the end of the file; so is a
/// record in which a key appears twice in one object (as in the API's bodies, which refuse
/// a duplicate field). A UTF-8 byte-order mark at the start of the text is skipped.
///
/// # Errors
/// The text starts as an array that does not read as one.
pub fn read_records(text: &str) -> Result<Vec<Result<Value, String>>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('[') {
        let not_array =
            |e| format!("the file starts as a JSON array but does not read as one: {e}");
        let records: Vec<Value> = serde_json::from_str(text).map_err(not_array)?;
        let duplicates: Vec<DuplicateKey> = serde_json::from_str(text).map_err(not_array)?;
        return Ok(records
            .into_iter()
            .zip(duplicates)
            .map(|(record, duplicate)| duplicate.refuse(record))
            .collect());
    }
    Ok(text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let record = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
            let duplicate: DuplicateKey =
                serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
            duplicate.refuse(record)
        })
        .collect())
}
