//! [`MemorySink`]: a [`Sink`] that keeps everything in memory, with every behaviour of the
//! store (failures kept and retried, a ledger of webhooks, runs): for tests, and as the
//! smallest complete example of a sink.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use svc_client::{CallId, CallSource, RawCallDetail, RawCallRow};

use crate::report::RunReport;
use crate::sink::{
    Arrival, Batch, Delivered, KnownCall, LockError, RunId, Sink, Stored, Version, WindowEnd,
    first_scored,
};

/// Why the memory sink failed: never, in practice (a poisoned lock is recovered).
#[derive(Debug, thiserror::Error)]
#[error("memory sink: {0}")]
pub struct MemoryError(String);

/// A call as the memory sink holds it.
#[derive(Debug, Clone)]
pub struct MemoryCall {
    /// The detail, as the service sent it.
    pub detail: RawCallDetail,
    /// The list row, when it was listed.
    pub row: Option<RawCallRow>,
    /// How it arrived.
    pub arrival: Arrival,
    /// How many silent changes were found.
    pub changes: u32,
}

#[derive(Debug, Default)]
struct State {
    calls: HashMap<CallId, MemoryCall>,
    watermarks: HashMap<String, DateTime<Utc>>,
    failures: HashMap<CallId, (RawCallRow, u32, Option<RunId>)>,
    webhooks: HashMap<CallId, usize>,
    ledger_since: Option<DateTime<Utc>>,
    runs: Vec<Option<RunReport>>,
}

impl State {
    /// Records a verified webhook of `call_id`, opening the ledger at `at` the first time;
    /// returns when the ledger opened.
    fn record_webhook(&mut self, call_id: &CallId, at: DateTime<Utc>) -> DateTime<Utc> {
        *self.webhooks.entry(call_id.clone()).or_default() += 1;
        *self.ledger_since.get_or_insert(at)
    }

    /// Stores a batch: what [`Sink::store_batch`] does, under the state's lock.
    fn store(&mut self, batch: Batch) -> Vec<Stored> {
        let state = self;
        let mut stored = Vec::with_capacity(batch.calls.len());
        for call in batch.calls {
            let id = call.detail.detail.row.id.clone();
            let webhook = state.webhooks.contains_key(&id);
            state.failures.remove(&id);
            let outcome = match state.calls.get_mut(&id) {
                None => {
                    let arrival = batch
                        .context
                        .arrival_of(first_scored(&call.detail), webhook);
                    state.calls.insert(
                        id,
                        MemoryCall {
                            detail: call.detail,
                            row: call.row,
                            arrival,
                            changes: 0,
                        },
                    );
                    Stored::New(arrival)
                }
                Some(held) => {
                    let (before, after) = (Version::of(&held.detail), Version::of(&call.detail));
                    if after.is_older_than(&before) {
                        Stored::Unchanged
                    } else {
                        held.detail = call.detail;
                        held.row = call.row.or(held.row.take());
                        if before == after {
                            Stored::Unchanged
                        } else {
                            held.changes += 1;
                            Stored::Changed
                        }
                    }
                }
            };
            stored.push(outcome);
        }
        for failure in batch.failures {
            let id = failure.row.row.id.clone();
            let entry = state
                .failures
                .entry(id)
                .or_insert((failure.row.clone(), 0, None));
            entry.0 = failure.row;
            entry.1 += 1;
            entry.2 = batch.context.run_id;
        }
        for row in batch.rows_to_fill {
            if let Some(call) = state.calls.get_mut(&row.row.id) {
                call.row.get_or_insert(row);
            }
        }
        stored
    }
}

/// A sink in memory; cheap to clone (clones share the contents).
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    state: Arc<Mutex<State>>,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl MemorySink {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a verified webhook of `call_id` (what a receiver does), opening the ledger at
    /// `at` the first time.
    pub fn record_webhook(&self, call_id: &CallId, at: DateTime<Utc>) {
        self.state().record_webhook(call_id, at);
    }

    /// The calls held.
    pub fn calls(&self) -> HashMap<CallId, MemoryCall> {
        self.state().calls.clone()
    }

    /// The watermark of `source`.
    pub fn watermark_of(&self, source: &CallSource) -> Option<DateTime<Utc>> {
        self.state().watermarks.get(source.as_str()).copied()
    }

    /// The reports of finished runs, in order (`None` for a run still going or killed).
    pub fn runs(&self) -> Vec<Option<RunReport>> {
        self.state().runs.clone()
    }
}

impl Sink for MemorySink {
    type Error = MemoryError;
    type Lock = tokio::sync::OwnedMutexGuard<()>;

    async fn lock(&self, wait: Duration) -> Result<Self::Lock, LockError<MemoryError>> {
        tokio::time::timeout(wait, self.lock.clone().lock_owned())
            .await
            .map_err(|_| LockError::Busy("another run holds the memory sink's lock".into()))
    }

    async fn watermark(&self, source: &CallSource) -> Result<Option<DateTime<Utc>>, MemoryError> {
        Ok(self.watermark_of(source))
    }

    async fn known_calls(&self, ids: &[CallId]) -> Result<HashMap<CallId, KnownCall>, MemoryError> {
        let state = self.state();
        Ok(ids
            .iter()
            .filter_map(|id| {
                let call = state.calls.get(id)?;
                let known = KnownCall {
                    scored_at: call.detail.detail.row.scored_at.clone(),
                    has_row: call.row.is_some(),
                };
                Some((id.clone(), known))
            })
            .collect())
    }

    async fn store_batch(&self, batch: Batch) -> Result<Vec<Stored>, MemoryError> {
        Ok(self.state().store(batch))
    }

    async fn store_delivered(&self, delivered: Delivered) -> Result<Stored, MemoryError> {
        let mut state = self.state();
        let ledger_since =
            state.record_webhook(&delivered.detail.detail.row.id, delivered.received_at);
        let batch = Batch::delivered(delivered.detail, Utc::now(), Some(ledger_since));
        Ok(state.store(batch).pop().unwrap_or(Stored::Unchanged))
    }

    async fn record_window(
        &self,
        source: &CallSource,
        _run_id: Option<RunId>,
        _at: DateTime<Utc>,
        end: WindowEnd<'_>,
    ) -> Result<(), MemoryError> {
        if let WindowEnd::Complete(Some(watermark)) = end {
            self.state()
                .watermarks
                .insert(source.as_str().to_owned(), watermark);
        }
        Ok(())
    }

    async fn start_run(
        &self,
        _started_at: DateTime<Utc>,
        _options: &crate::Options,
    ) -> Result<Option<RunId>, MemoryError> {
        let mut state = self.state();
        state.runs.push(None);
        let id = i64::try_from(state.runs.len()).map_err(|e| MemoryError(e.to_string()))?;
        Ok(Some(RunId(id)))
    }

    async fn finish_run(&self, run_id: RunId, report: &RunReport) -> Result<(), MemoryError> {
        let mut state = self.state();
        let slot = usize::try_from(run_id.0 - 1)
            .ok()
            .and_then(|i| state.runs.get_mut(i))
            .ok_or_else(|| MemoryError(format!("no run {}", run_id.0)))?;
        *slot = Some(report.clone());
        Ok(())
    }

    fn keeps_failures(&self) -> bool {
        true
    }

    async fn failures_to_retry(
        &self,
        source: &CallSource,
        max_attempts: u32,
        run_id: Option<RunId>,
    ) -> Result<Vec<RawCallRow>, MemoryError> {
        Ok(self
            .state()
            .failures
            .values()
            .filter(|(row, attempts, last)| {
                row.row.source == *source
                    && *attempts < max_attempts
                    && (run_id.is_none() || *last != run_id)
            })
            .map(|(row, _, _)| row.clone())
            .collect())
    }

    async fn ledger_since(&self) -> Result<Option<DateTime<Utc>>, MemoryError> {
        Ok(self.state().ledger_since)
    }

    async fn settle_awaiting(
        &self,
        missed_before: DateTime<Utc>,
        _run_id: Option<RunId>,
        _now: DateTime<Utc>,
        sources: &[CallSource],
    ) -> Result<Vec<(CallId, CallSource)>, MemoryError> {
        let mut state = self.state();
        let State {
            calls, webhooks, ..
        } = &mut *state;
        let mut recovered = Vec::new();
        for (id, call) in calls.iter_mut() {
            if call.arrival != Arrival::Awaiting {
                continue;
            }
            if webhooks.contains_key(id) {
                call.arrival = Arrival::Webhook;
            } else if sources.contains(&call.detail.detail.row.source)
                && first_scored(&call.detail).is_some_and(|at| at <= missed_before)
            {
                call.arrival = Arrival::Recovered;
                recovered.push((id.clone(), call.detail.detail.row.source.clone()));
            }
        }
        Ok(recovered)
    }

    async fn awaiting(
        &self,
        sources: &[CallSource],
    ) -> Result<Vec<(CallSource, u64)>, MemoryError> {
        let state = self.state();
        Ok(sources
            .iter()
            .map(|source| {
                let n = state
                    .calls
                    .values()
                    .filter(|c| {
                        c.arrival == Arrival::Awaiting && c.detail.detail.row.source == *source
                    })
                    .count();
                (source.clone(), n as u64)
            })
            .collect())
    }
}
