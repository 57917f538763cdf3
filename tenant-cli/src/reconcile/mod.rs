//! Reconcile: list scored calls with `GET /calls` over a window per source and store every
//! call the store is missing, with its detail, so that no scored call is lost whatever happened
//! to its webhook; and find real calls whose score changed with no webhook (a re-disposition).
//!
//! # How a run goes
//! For each source, every page of the source's [`window::Window`] is listed (`limit=100`,
//! following `nextCursor` to `null`, never looking inside it), and for each page:
//! - a call the store does not hold is read with `GET /calls/{callId}` and stored;
//! - a stored call whose `scoredAt` moved is read again; a change of its score, `scoredAt` or
//!   `updatedAt` is logged as a silent change;
//! - any other stored call costs nothing more than its list row.
//!
//! Then the calls whose detail failed in earlier runs, and that this listing did not reach, are
//! read again.
//!
//! Details are read [`Options::concurrency`] at a time across pages, while the next pages are
//! listed; each page's calls are stored in one transaction. Only once every page of a window
//! is stored does the source's watermark move (to the window's end), so a run killed at any
//! point and run again stores the same calls as one clean run. A listed call whose detail
//! answers 404 or is not a call detail is recorded and read again by the next runs (up to
//! [`MAX_FAILURE_ATTEMPTS`] times); the window still completes. A refused key, or a service
//! still failing after the client's retries, stops the run: what was stored stays, the
//! watermark does not move.
//!
//! A call reconcile stores without its webhook in the store's ledger (written by `webhook
//! serve`) is *recovered* once it was scored more than [`Options::delivery_grace`] ago (30
//! minutes: the contract's missed-delivery fallback); until then its webhook may still come.
//! A call scored before a receiver started writing to the ledger is *backfilled*: history, or a
//! store that no `webhook serve` writes to, where no webhook was expected.
//!
//! # Layout
//! - [`window`]: the window of each source.
//! - [`report`]: the run's report (table or JSON).

pub mod report;
pub mod window;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::{StreamExt, stream};
use indicatif::ProgressBar;
use serde::Serialize;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use crate::client::{
    CallQuery, CallSource, Client, ClientError, ErrorClass, RawCallDetail, RawCallRow,
};
use crate::exit;
use crate::store::calls::{Delivery, KnownCall, Stored, Writer};
use crate::store::runs::RunOutcome;
use crate::store::{Store, StoreError};
use crate::time::{before, format_duration, format_ts, parse_ts};
use report::{Counts, FailedCall, LISTED_IDS, Report, SourceReport};
use window::{Window, WindowInputs};

/// Details read at once by default.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// How long after a call was scored its webhook may still arrive (the contract's
/// missed-delivery fallback: read the call 30 minutes after it ended).
pub const DEFAULT_DELIVERY_GRACE: Duration = Duration::from_secs(30 * 60);
/// Runs in which a listed call's detail may fail before later runs stop reading it.
pub const MAX_FAILURE_ATTEMPTS: u32 = 5;
/// The page size asked for (the contract's largest).
const PAGE_LIMIT: u32 = 100;
/// Pages whose details are read or stored at once.
const PAGES_IN_FLIGHT: usize = 4;

/// What a run does.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Options {
    /// The sources to list, in order.
    pub sources: Vec<CallSource>,
    /// How far before the watermark each window starts; `None`: each source's default
    /// ([`window::default_overlap`]).
    #[serde(serialize_with = "opt_duration")]
    pub overlap: Option<Duration>,
    /// Start every window here instead.
    pub since: Option<DateTime<Utc>>,
    /// End every window here instead of at the run's start.
    pub until: Option<DateTime<Utc>>,
    /// How far back real calls are listed again for re-dispositions (zero: not at all).
    #[serde(serialize_with = "duration")]
    pub refresh_real: Duration,
    /// List only: read no detail, write nothing.
    pub dry_run: bool,
    /// Details read at once.
    pub concurrency: usize,
    /// How long after it was scored a call's webhook may still arrive.
    #[serde(serialize_with = "duration")]
    pub delivery_grace: Duration,
}

fn duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

fn opt_duration<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&format_duration(*d)),
        None => s.serialize_none(),
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            sources: vec![CallSource::Roleplay, CallSource::RealCall],
            overlap: None,
            since: None,
            until: None,
            refresh_real: window::DEFAULT_REFRESH_REAL,
            dry_run: false,
            concurrency: DEFAULT_CONCURRENCY,
            delivery_grace: DEFAULT_DELIVERY_GRACE,
        }
    }
}

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The service refused or kept failing.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RunError {
    /// The exit code of a run stopped by this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Client(e) => exit::client_code(e),
            Self::Store(StoreError::Busy) => exit::TEMPORARY,
            Self::Store(e) if e.is_usage() => exit::USAGE,
            Self::Store(_) => exit::FAILURE,
        }
    }
}

/// Counts and the ids behind them, for a batch, a source or the run.
#[derive(Debug, Default)]
struct Tally {
    counts: Counts,
    recovered: Vec<String>,
    changed: Vec<String>,
    failed: Vec<FailedCall>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.counts.add(&other.counts);
        let room = |have: usize| LISTED_IDS.saturating_sub(have);
        self.recovered
            .extend(other.recovered.into_iter().take(room(self.recovered.len())));
        self.changed
            .extend(other.changed.into_iter().take(room(self.changed.len())));
        self.failed
            .extend(other.failed.into_iter().take(room(self.failed.len())));
    }
}

/// What every batch of a run shares.
struct Run {
    client: Client,
    store: Store,
    options: Options,
    run_id: Option<i64>,
    /// A call scored at or before this (unix ms) with no webhook missed its delivery.
    missed_before_ms: i64,
    /// Since when a receiver writes to the store's ledger (unix ms).
    ledger_since_ms: Option<i64>,
    details: Semaphore,
}

/// Runs one reconcile of `store` from the service behind `client`, and returns its report
/// (a run that stopped on an error reports it, with its exit code). The caller holds the
/// store's run lock, unless this is a dry run.
pub async fn run(
    client: &Client,
    store: &Store,
    options: &Options,
    progress: &ProgressBar,
) -> Report {
    let started = Instant::now();
    let run_start = Utc::now();
    let started_at = format_ts(run_start);
    let requests_before = client.requests_sent();
    let mut run_id = None;
    let mut error = None;
    if !options.dry_run {
        let text = serde_json::to_string(options).unwrap_or_default();
        let at = started_at.clone();
        match store.blocking(move |s| s.start_run(&at, &text)).await {
            Ok(id) => run_id = Some(id),
            Err(e) => error = Some(RunError::from(e)),
        }
    }
    let missed_before_ms = before(run_start, options.delivery_grace).timestamp_millis();
    let ledger_since_ms = match store.blocking(Store::ledger_since_ms).await {
        Ok(since) => since,
        Err(e) => {
            error.get_or_insert(e.into());
            None
        }
    };
    let run = Arc::new(Run {
        client: client.clone(),
        store: store.clone(),
        options: options.clone(),
        run_id,
        missed_before_ms,
        ledger_since_ms,
        details: Semaphore::new(options.concurrency.max(1)),
    });
    let mut sources = Vec::new();
    let mut tallies = Vec::new();
    if error.is_none() {
        for source in &options.sources {
            let (report, tally, stopped) = source_pass(&run, source, run_start, progress).await;
            sources.push(report);
            tallies.push(tally);
            if let Some(stopped) = stopped {
                error = Some(stopped);
                break;
            }
        }
    }
    if let Some(run_id) = run_id {
        let now = format_ts(Utc::now());
        let reported: Vec<String> = sources.iter().map(|s| s.source.clone()).collect();
        match store
            .blocking(move |s| s.settle_awaiting(missed_before_ms, run_id, &now, &reported))
            .await
        {
            Ok(recovered) => {
                for (id, source) in recovered {
                    if let Some(i) = sources.iter().position(|s| s.source == source) {
                        tallies[i].counts.recovered += 1;
                        tallies[i].merge(Tally {
                            recovered: vec![id],
                            ..Tally::default()
                        });
                    }
                }
            }
            Err(e) => {
                error.get_or_insert(e.into());
            }
        }
    }
    let mut total = Tally::default();
    for (report, tally) in sources.iter_mut().zip(tallies) {
        report.counts = tally.counts;
        total.merge(tally);
    }
    let exit_code = match &error {
        Some(e) => e.exit_code(),
        None if total.counts.failed > 0 => exit::FAILURE,
        None if total.counts.recovered > 0 || total.counts.changed_silently > 0 => exit::FOUND,
        None => exit::OK,
    };
    let report = Report {
        run_id,
        dry_run: options.dry_run,
        started_at,
        finished_at: format_ts(Utc::now()),
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        outcome: if error.is_some() { "failed" } else { "ok" }.into(),
        error: error.as_ref().map(|e| format!("{e:#}")),
        exit_code,
        requests: client.requests_sent() - requests_before,
        sources,
        totals: total.counts,
        recovered_call_ids: total.recovered,
        changed_call_ids: total.changed,
        failed_calls: total.failed,
    };
    if let Some(run_id) = run_id {
        let outcome = if error.is_some() {
            RunOutcome::Failed
        } else {
            RunOutcome::Ok
        };
        let (finished, text) = (
            report.finished_at.clone(),
            serde_json::to_string(&report).unwrap_or_default(),
        );
        if let Err(e) = store
            .blocking(move |s| s.finish_run(run_id, &finished, outcome, exit_code, &text))
            .await
        {
            tracing::warn!(error = %e, "could not record the end of the run");
        }
    }
    report
}

/// Lists one source's window and stores what is missing or moved.
async fn source_pass(
    run: &Arc<Run>,
    source: &CallSource,
    run_start: DateTime<Utc>,
    progress: &ProgressBar,
) -> (SourceReport, Tally, Option<RunError>) {
    let name = source.as_str().to_owned();
    let state = {
        let name = name.clone();
        run.store.blocking(move |s| s.sync_state(&name)).await
    };
    let state = match state {
        Ok(state) => state,
        Err(e) => {
            let report = SourceReport {
                source: name,
                from: String::new(),
                to: String::new(),
                first_run: false,
                completed: false,
                watermark: None,
                counts: Counts::default(),
            };
            return (report, Tally::default(), Some(e.into()));
        }
    };
    let window = Window::of(&WindowInputs {
        source,
        watermark: state.watermark.as_deref().and_then(parse_ts),
        run_start,
        since: run.options.since,
        until: run.options.until,
        overlap: run.options.overlap,
        refresh_real: run.options.refresh_real,
    });
    let first_run = state.watermark.is_none();
    let mut report = SourceReport {
        source: name.clone(),
        from: format_ts(window.from),
        to: format_ts(window.to),
        first_run,
        completed: false,
        watermark: state.watermark.clone(),
        counts: Counts::default(),
    };
    let mut tally = Tally::default();
    let mut stopped = list_window(run, source, &window, &mut tally, progress).await;
    // Then the calls earlier runs could not store and this listing did not reach.
    if stopped.is_none()
        && let Some(run_id) = run.run_id
    {
        let source = source.clone();
        match run
            .store
            .blocking(move |s| s.failures_to_retry(&source, MAX_FAILURE_ATTEMPTS, run_id))
            .await
        {
            Ok(rows) if !rows.is_empty() => {
                let (batch, error) = process_rows(run.clone(), rows).await;
                tally.merge(batch);
                stopped = error;
            }
            Ok(_) => {}
            Err(e) => stopped = Some(e.into()),
        }
    }
    if !run.options.dry_run
        && let Some(run_id) = run.run_id
    {
        let watermark = (stopped.is_none() && window.advances).then(|| format_ts(window.watermark));
        let reason = stopped.as_ref().map(|e| format!("{e:#}"));
        let at = format_ts(run_start);
        let recorded = {
            let (name, watermark) = (name.clone(), watermark.clone());
            run.store
                .blocking(move |s| {
                    let result = match &reason {
                        None => Ok(watermark.as_deref()),
                        Some(reason) => Err(reason.as_str()),
                    };
                    s.record_sync(&name, run_id, &at, result)
                })
                .await
        };
        if let Err(e) = recorded {
            stopped.get_or_insert(e.into());
        }
        if stopped.is_none() {
            report.watermark = watermark.or(report.watermark);
        }
    }
    report.completed = stopped.is_none();
    (report, tally, stopped)
}

/// Lists every page of `window`, handing each to a batch task; returns why it stopped early.
async fn list_window(
    run: &Arc<Run>,
    source: &CallSource,
    window: &Window,
    tally: &mut Tally,
    progress: &ProgressBar,
) -> Option<RunError> {
    let mut query = CallQuery::new(source.clone(), format_ts(window.from));
    query.to = Some(format_ts(window.to));
    query.limit = Some(PAGE_LIMIT);
    // The pages are listed on their own task, a page or two ahead of the batches.
    let (pages_tx, mut pages) = mpsc::channel(2);
    let pages_stream = run.client.calls_raw_pages(query);
    let lister = tokio::spawn(async move {
        let mut stream = std::pin::pin!(pages_stream);
        while let Some(page) = stream.next().await {
            let failed = page.is_err();
            if pages_tx.send(page).await.is_err() || failed {
                break;
            }
        }
    });
    let mut batches = JoinSet::new();
    let mut stopped = None;
    let merge =
        |tally: &mut Tally, joined: Result<(Tally, Option<RunError>), tokio::task::JoinError>| {
            match joined {
                Ok((batch, error)) => {
                    tally.merge(batch);
                    if let Some(error) = error {
                        return Some(error);
                    }
                }
                Err(e) => {
                    return Some(StoreError::Corrupt(format!("a batch task failed: {e}")).into());
                }
            }
            None
        };
    while let Some(page) = pages.recv().await {
        let rows = match page {
            Ok(rows) => rows,
            Err(e) => {
                stopped = Some(e.into());
                break;
            }
        };
        tally.counts.pages += 1;
        tally.counts.listed += rows.len() as u64;
        // A batch that stopped (a refused key, a failing service) stops the listing too.
        while let Some(joined) = batches.try_join_next() {
            if let Some(error) = merge(tally, joined) {
                stopped.get_or_insert(error);
            }
        }
        while stopped.is_none() && batches.len() >= PAGES_IN_FLIGHT {
            if let Some(joined) = batches.join_next().await
                && let Some(error) = merge(tally, joined)
            {
                stopped.get_or_insert(error);
            }
        }
        if stopped.is_some() {
            break;
        }
        batches.spawn(process_rows(run.clone(), rows));
        progress.set_message(format!(
            "{}: {} pages, {} calls listed, {} details read",
            source, tally.counts.pages, tally.counts.listed, tally.counts.details_fetched
        ));
    }
    drop(pages);
    lister.abort();
    while let Some(joined) = batches.join_next().await {
        if let Some(error) = merge(tally, joined) {
            stopped.get_or_insert(error);
        }
    }
    progress.set_message(format!(
        "{}: {} pages, {} calls listed, {} details read",
        source, tally.counts.pages, tally.counts.listed, tally.counts.details_fetched
    ));
    stopped
}

/// Whether a row's `scoredAt` differs from the stored one (as instants when both read as
/// timestamps, else as text).
fn moved(known: &KnownCall, listed: Option<&str>) -> bool {
    match (known.scored_at.as_deref(), listed) {
        (Some(a), Some(b)) => match (parse_ts(a), parse_ts(b)) {
            (Some(a), Some(b)) => a != b,
            _ => a != b,
        },
        (a, b) => a != b,
    }
}

/// Whether a detail error concerns that call only (recorded, the run goes on) rather than the
/// service or the key (the run stops). A detail over the client's body limit is that call's:
/// stopping on it would stop every later run at the same call.
fn call_failure(error: &ClientError) -> Option<Option<u16>> {
    match error {
        ClientError::Decode(_) | ClientError::BodyTooLarge { .. } => Some(None),
        ClientError::Api(api) if error.class() == ErrorClass::Failure => Some(Some(api.status)),
        _ => None,
    }
}

/// Handles one batch of listed rows (a page, or the failures of earlier runs): reads the
/// details needed and stores them in one transaction.
async fn process_rows(run: Arc<Run>, rows: Vec<RawCallRow>) -> (Tally, Option<RunError>) {
    let mut tally = Tally::default();
    let ids: Vec<String> = rows.iter().map(|r| r.row.id.as_str().to_owned()).collect();
    let known = match run.store.blocking(move |s| s.known_calls(&ids)).await {
        Ok(known) => known,
        Err(e) => return (tally, Some(e.into())),
    };
    let mut fetch = Vec::new();
    let mut fill = Vec::new();
    for row in rows {
        match known.get(row.row.id.as_str()) {
            None => fetch.push(row),
            Some(stored) if moved(stored, row.row.scored_at.as_deref()) => {
                tally.counts.moved += 1;
                fetch.push(row);
            }
            Some(stored) => {
                tally.counts.known += 1;
                if !stored.has_row {
                    fill.push(row);
                }
            }
        }
    }
    if run.options.dry_run {
        tally.counts.new += (fetch.len() as u64).saturating_sub(tally.counts.moved);
        return (tally, None);
    }
    let fetched: Vec<(RawCallRow, Result<RawCallDetail, ClientError>)> = stream::iter(fetch)
        .map(|row| {
            let run = run.clone();
            async move {
                let _permit = run.details.acquire().await;
                let detail = run.client.call_raw(&row.row.id).await;
                (row, detail)
            }
        })
        .buffer_unordered(usize::MAX)
        .collect()
        .await;
    tally.counts.details_fetched += fetched.len() as u64;
    let mut calls = Vec::new();
    let mut failures = Vec::new();
    let mut stopped: Option<RunError> = None;
    for (row, detail) in fetched {
        match detail {
            Ok(detail) => calls.push((Some(row), detail)),
            Err(e) => match call_failure(&e) {
                Some(status) => failures.push((row, format!("{e:#}"), status)),
                None => {
                    stopped.get_or_insert(e.into());
                }
            },
        }
    }
    let writer = Writer {
        by: "reconcile",
        run_id: run.run_id,
        now: format_ts(Utc::now()),
        ledger_since_ms: run.ledger_since_ms,
        missed_before_ms: run.missed_before_ms,
    };
    let run_id = run.run_id.unwrap_or_default();
    let written = run
        .store
        .blocking(move |s| {
            let stored = s.store_calls(&calls, &writer)?;
            for (row, error, status) in &failures {
                s.record_failure(row, error, *status, run_id, &writer.now)?;
            }
            let rows: Vec<&RawCallRow> = fill.iter().collect();
            s.fill_rows(&rows)?;
            let ids = calls
                .into_iter()
                .map(|(_, d)| d.detail.row.id.as_str().to_owned());
            let failed = failures
                .into_iter()
                .map(|(row, error, _)| FailedCall {
                    call_id: row.row.id.as_str().to_owned(),
                    error,
                })
                .collect::<Vec<_>>();
            Ok((ids.zip(stored).collect::<Vec<_>>(), failed))
        })
        .await;
    match written {
        Ok((stored, failed)) => {
            for (id, stored) in stored {
                match stored {
                    Stored::New(delivery) => {
                        tally.counts.new += 1;
                        match delivery {
                            Delivery::Recovered => {
                                tally.counts.recovered += 1;
                                tally.recovered.push(id);
                            }
                            Delivery::Backfill => tally.counts.backfilled += 1,
                            Delivery::Webhook | Delivery::Awaiting => {}
                        }
                    }
                    Stored::Changed => {
                        tally.counts.changed_silently += 1;
                        tally.changed.push(id);
                    }
                    Stored::Unchanged => tally.counts.known += 1,
                }
            }
            tally.counts.failed += failed.len() as u64;
            tally.failed = failed;
        }
        Err(e) => {
            stopped.get_or_insert(e.into());
        }
    }
    (tally, stopped)
}
