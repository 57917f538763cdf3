//! Ingesting dialer records: each record is checked, dropped for a documented reason, or
//! attributed, scored, stored (once per agency and dialer call id) with its archived recording
//! and its queued `call.scored` webhook. Records are processed in batches, each stored in one
//! transaction.
//!
//! In order, a record is:
//! - invalid when it does not read ([`super::record`]) or names no agency of the tenant;
//! - the call already stored, when its agency already has its dialer call id (nothing changes);
//! - dropped, before anything is stored, billed or delivered: `agency_not_enabled`,
//!   `too_short` (under [`MIN_DURATION_SECS`] seconds), `no_audio` (no recording, or an empty
//!   or unreadable file), `no_transcript` (none, or no turns), `unregistered_rep`;
//! - otherwise stored: scored, or not scored (`SCORING_INCOMPLETE`) when no rep turn has
//!   content; either way its webhook is queued and its minutes count toward the allowance.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use svc_receiver::CallSource;

use super::attribution::attribute;
use super::audio::Archive;
use super::record::{AgencyName, DialerRecord};
use crate::clock::Clock;
use crate::db::{Candidate, Db, DbError, NewRealCall, RealCallAgency, Stored};
use crate::ids;
use crate::scoring::evaluate::{EventIds, event_for};
use crate::scoring::real_call::{self, RealCall};
use crate::time::format_timestamp;

/// Calls shorter than this are too short to assess (dropped `too_short`).
pub const MIN_DURATION_SECS: i64 = 30;
/// Records stored per transaction.
const BATCH: usize = 500;

/// Why a record was dropped before persistence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Its agency is not switched on for real calls.
    AgencyNotEnabled,
    /// Under [`MIN_DURATION_SECS`].
    TooShort,
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

/// A record that passed every check, ready to be stored.
struct Ready {
    slot: usize,
    call: NewRealCall,
    scored: bool,
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
    /// # Errors
    /// Storage failure (the batch being stored is not stored).
    pub async fn ingest(
        &self,
        tenant_id: &str,
        records: Vec<Result<Value, String>>,
    ) -> Result<Vec<RecordOutcome>, DbError> {
        let mut agencies: HashMap<AgencyName, Option<RealCallAgency>> = HashMap::new();
        let mut rosters: HashMap<String, Vec<Candidate>> = HashMap::new();
        let mut outcomes = Vec::with_capacity(records.len());
        let mut records = records.into_iter().enumerate().peekable();
        while records.peek().is_some() {
            let mut ready = Vec::new();
            // (agency, dialer call id) of the batch's calls to store, and their slot: a later
            // record of the same call is the call already ingested.
            let mut in_batch: HashMap<(AgencyName, String), usize> = HashMap::new();
            let mut repeats: Vec<(usize, usize)> = Vec::new();
            for (i, record) in records.by_ref().take(BATCH) {
                let slot = outcomes.len();
                // An invalid record is still named by its dialerCallId when it has one.
                let named = record
                    .as_ref()
                    .ok()
                    .and_then(|value| value.get("dialerCallId"))
                    .and_then(Value::as_str)
                    .map(|id| id.trim().to_owned())
                    .filter(|id| !id.is_empty());
                let (dialer_call_id, disposal) = match record.and_then(DialerRecord::parse) {
                    Err(error) => (named, Disposal::Invalid(error)),
                    Ok(record) => {
                        let id = Some(record.dialer_call_id.clone());
                        let key = (record.agency.clone(), record.dialer_call_id.clone());
                        if let Some(first) = in_batch.get(&key) {
                            repeats.push((slot, *first));
                            // Replaced once the batch is stored.
                            (id, Disposal::Invalid(String::new()))
                        } else {
                            let checked = self
                                .check(tenant_id, record, &mut agencies, &mut rosters)
                                .await?;
                            match checked {
                                Ok(call) => {
                                    let scored = call.score.is_some();
                                    in_batch.insert(key, slot);
                                    ready.push(Ready { slot, call, scored });
                                    // Replaced once the batch is stored.
                                    (id, Disposal::Invalid(String::new()))
                                }
                                Err(disposal) => (id, disposal),
                            }
                        }
                    }
                };
                outcomes.push(RecordOutcome {
                    index: i + 1,
                    dialer_call_id,
                    disposal,
                });
            }
            let slots: Vec<(usize, bool)> = ready.iter().map(|r| (r.slot, r.scored)).collect();
            let calls: Vec<NewRealCall> = ready.into_iter().map(|r| r.call).collect();
            let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
            let stored = self.db.insert_real_calls(calls).await?;
            for (((slot, scored), id), stored) in slots.into_iter().zip(ids).zip(stored) {
                outcomes[slot].disposal = match stored {
                    Stored::New => Disposal::Stored {
                        call_id: id,
                        scored,
                    },
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
        }
        Ok(outcomes)
    }

    /// Runs every check on a record that reads: `Ok` is the call to store.
    async fn check(
        &self,
        tenant_id: &str,
        record: DialerRecord,
        agencies: &mut HashMap<AgencyName, Option<RealCallAgency>>,
        rosters: &mut HashMap<String, Vec<Candidate>>,
    ) -> Result<Result<NewRealCall, Disposal>, DbError> {
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
        let Some(Some(agency)) = agencies.get(&record.agency) else {
            return Ok(Err(Disposal::Invalid(format!(
                "{} is not an agency of this tenant",
                record.agency
            ))));
        };
        if let Some(call_id) = self
            .db
            .dialer_call(&agency.id, &record.dialer_call_id)
            .await?
        {
            return Ok(Err(Disposal::AlreadyIngested { call_id }));
        }
        let recording = record.recording.as_deref().map(|p| self.recording_path(p));
        let dropped = if !agency.enabled {
            Some(Dropped::AgencyNotEnabled)
        } else if record.duration_sec < MIN_DURATION_SECS {
            Some(Dropped::TooShort)
        } else if !recording.as_deref().is_some_and(Archive::usable) {
            Some(Dropped::NoAudio)
        } else if record.transcript.as_ref().is_none_or(Vec::is_empty) {
            Some(Dropped::NoTranscript)
        } else {
            None
        };
        if let Some(dropped) = dropped {
            return Ok(Err(Disposal::Dropped(dropped)));
        }
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
        // Checked usable above; a file that vanished since is a recording that cannot be read.
        let audio_file = match recording.as_deref().map(|path| self.archive.store(path)) {
            Some(Ok(name)) => name,
            _ => return Ok(Err(Disposal::Dropped(Dropped::NoAudio))),
        };
        Ok(Ok(self.build(tenant_id, agency, agent, record, audio_file)))
    }

    fn recording_path(&self, path: &str) -> PathBuf {
        let path = Path::new(path.trim());
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.base_dir.join(path)
        }
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
        let now = self.clock.now();
        let call_id = ids::call_id();
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
            audio_file: Some(audio_file),
            webhook_id: ids::webhook_id(),
            webhook_body: serde_json::to_string(&event).unwrap_or_default(),
            now: now.timestamp_millis(),
        }
    }
}

/// Reads an ingest file: a JSON array of records, or JSON lines (one record per non-blank
/// line). A line that is not JSON is an invalid record, not the end of the file.
///
/// # Errors
/// The text starts as an array that does not read as one.
pub fn read_records(text: &str) -> Result<Vec<Result<Value, String>>, String> {
    if text.trim_start().starts_with('[') {
        let records: Vec<Value> = serde_json::from_str(text).map_err(|e| {
            format!("the file starts as a JSON array but does not read as one: {e}")
        })?;
        return Ok(records.into_iter().map(Ok).collect());
    }
    Ok(text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(|e| format!("not JSON: {e}")))
        .collect())
}
