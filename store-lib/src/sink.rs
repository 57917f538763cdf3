//! The store as a [`Sink`]: what reconcile needs, on the store's own tables (calls, the
//! change log, failures, the ledger of deliveries, runs and sync state), each call run on a
//! blocking thread.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use svc_client::{CallId, CallSource, RawCallRow};

use super::calls::Writer;
use super::deliveries::NewDelivery;
use super::lock::{RunLock, RunLockError};
use super::runs::RunOutcome;
use super::{Store, StoreError};
use svc_reconcile::time::{format_ts, parse_ts};
use svc_reconcile::{
    Batch, Delivered, KnownCall, LockError, Options, Outcome, RunId, RunReport, Sink, Stored,
    WindowEnd,
};

/// The exit code `svc-cli reconcile` documents for a run that ended so (a run that stopped is
/// recorded as 1 here; the command line records its own code for it once it knows why).
fn exit_code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Clean => 0,
        Outcome::Found => 3,
        // `CallsFailed`, `Stopped`, and whatever a later svc-reconcile adds (`Outcome` is
        // non-exhaustive).
        _ => 1,
    }
}

impl Sink for Store {
    type Error = StoreError;
    type Lock = RunLock;

    async fn lock(&self, wait: Duration) -> Result<RunLock, LockError<StoreError>> {
        RunLock::acquire(self.location(), wait)
            .await
            .map_err(|e| match e {
                e if e.is_busy() => LockError::Busy(e.to_string()),
                RunLockError::Database { source, .. } => LockError::Sink(source),
                e => LockError::Sink(StoreError::Lock(e.to_string())),
            })
    }

    async fn watermark(&self, source: &CallSource) -> Result<Option<DateTime<Utc>>, StoreError> {
        let name = source.as_str().to_owned();
        let state = self.blocking(move |s| s.sync_state(&name)).await?;
        state
            .watermark
            .map(|text| {
                parse_ts(&text)
                    .ok_or_else(|| StoreError::Corrupt(format!("the watermark {text:?}")))
            })
            .transpose()
    }

    async fn known_calls(&self, ids: &[CallId]) -> Result<HashMap<CallId, KnownCall>, StoreError> {
        let ids: Vec<String> = ids.iter().map(|id| id.as_str().to_owned()).collect();
        let known = self.blocking(move |s| s.known_calls(&ids)).await?;
        Ok(known
            .into_iter()
            .map(|(id, call)| (CallId::from_service(id), call))
            .collect())
    }

    async fn store_batch(&self, batch: Batch) -> Result<Vec<Stored>, StoreError> {
        let Batch {
            calls,
            failures,
            rows_to_fill,
            context,
        } = batch;
        let writer = Writer {
            by: "reconcile",
            run_id: context.run_id.map(|r| r.0),
            now: format_ts(context.now),
            ledger_since_ms: context.ledger_since.map(|at| at.timestamp_millis()),
            missed_before_ms: context.missed_before.timestamp_millis(),
        };
        let calls: Vec<_> = calls.into_iter().map(|c| (c.row, c.detail)).collect();
        self.blocking(move |s| {
            let fills: Vec<&RawCallRow> = rows_to_fill.iter().collect();
            s.store_batch(&calls, &failures, &fills, &writer)
        })
        .await
    }

    async fn store_delivered(&self, delivered: Delivered) -> Result<Stored, StoreError> {
        let writer = Writer::webhook();
        self.blocking(move |s| {
            let delivery = NewDelivery {
                webhook_id: &delivered.webhook_id,
                event: &delivered.event,
                body: &delivered.body,
                verified_at: &format_ts(delivered.received_at),
            };
            s.record_delivered_call(&delivery, &delivered.detail, &writer)
        })
        .await
    }

    async fn record_window(
        &self,
        source: &CallSource,
        run_id: Option<RunId>,
        at: DateTime<Utc>,
        end: WindowEnd<'_>,
    ) -> Result<(), StoreError> {
        let (name, at) = (source.as_str().to_owned(), format_ts(at));
        let run_id = run_id.map_or(0, |r| r.0);
        let result = match end {
            WindowEnd::Complete(watermark) => Ok(watermark.map(format_ts)),
            WindowEnd::Stopped(reason) => Err(reason.to_owned()),
        };
        self.blocking(move |s| {
            let result = match &result {
                Ok(watermark) => Ok(watermark.as_deref()),
                Err(reason) => Err(reason.as_str()),
            };
            s.record_sync(&name, run_id, &at, result)
        })
        .await
    }

    async fn start_run(
        &self,
        started_at: DateTime<Utc>,
        options: &Options,
    ) -> Result<Option<RunId>, StoreError> {
        // As earlier versions wrote them (a dry run records nothing, so `dryRun` is false).
        let mut text = serde_json::to_value(options).unwrap_or_default();
        if let Some(map) = text.as_object_mut() {
            map.insert("dryRun".into(), false.into());
        }
        let (at, text) = (format_ts(started_at), text.to_string());
        let id = self.blocking(move |s| s.start_run(&at, &text)).await?;
        Ok(Some(RunId(id)))
    }

    async fn finish_run(&self, run_id: RunId, report: &RunReport) -> Result<(), StoreError> {
        let outcome = match report.outcome {
            Outcome::Stopped => RunOutcome::Failed,
            _ => RunOutcome::Ok,
        };
        let code = exit_code(report.outcome);
        let finished = format_ts(report.finished_at);
        // As earlier versions kept it: the report as printed, exit code included.
        let mut text = serde_json::to_value(report).unwrap_or_default();
        if let Some(map) = text.as_object_mut() {
            map.insert("exitCode".into(), code.into());
        }
        let text = text.to_string();
        self.blocking(move |s| s.finish_run(run_id.0, &finished, outcome, code, &text))
            .await
    }

    fn keeps_failures(&self) -> bool {
        true
    }

    async fn failures_to_retry(
        &self,
        source: &CallSource,
        max_attempts: u32,
        run_id: Option<RunId>,
    ) -> Result<Vec<RawCallRow>, StoreError> {
        let source = source.clone();
        let run_id = run_id.map_or(0, |r| r.0);
        self.blocking(move |s| s.failures_to_retry(&source, max_attempts, run_id))
            .await
    }

    async fn ledger_since(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let since = self.blocking(Store::ledger_since_ms).await?;
        Ok(since.and_then(DateTime::from_timestamp_millis))
    }

    async fn settle_awaiting(
        &self,
        missed_before: DateTime<Utc>,
        run_id: Option<RunId>,
        now: DateTime<Utc>,
        sources: &[CallSource],
    ) -> Result<Vec<(CallId, CallSource)>, StoreError> {
        let Some(run_id) = run_id else {
            return Ok(Vec::new());
        };
        let names: Vec<String> = sources.iter().map(|s| s.as_str().to_owned()).collect();
        let now = format_ts(now);
        let missed = missed_before.timestamp_millis();
        let recovered = self
            .blocking(move |s| s.settle_awaiting(missed, run_id.0, &now, &names))
            .await?;
        Ok(recovered
            .into_iter()
            .map(|(id, source)| (CallId::from_service(id), CallSource::from(source.as_str())))
            .collect())
    }

    async fn awaiting(&self, sources: &[CallSource]) -> Result<Vec<(CallSource, u64)>, StoreError> {
        let names: Vec<String> = sources.iter().map(|s| s.as_str().to_owned()).collect();
        let counts = self.blocking(move |s| s.awaiting(&names)).await?;
        Ok(counts
            .into_iter()
            .map(|(source, n)| (CallSource::from(source.as_str()), n))
            .collect())
    }
}
