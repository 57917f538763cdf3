//! The reconcile engine: [`Reconciler`] runs each source's window through a [`Sink`]; the
//! run lock as a type, its options, progress and why a run stops.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::{StreamExt, stream};
use serde::Serialize;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use svc_client::{
    CallId, CallQuery, CallSource, Client, ClientError, ErrorClass, RawCallDetail, RawCallRow,
};

use crate::report::{
    Counts, FailedCall, LISTED_IDS, Outcome, RunReport, ServiceClock, SourceReport,
};
use crate::sink::{
    Arrival, Batch, BatchContext, CallFailure, FetchedCall, KnownCall, LockError, RunId, Sink,
    Stored, WindowEnd, first_scored, row_listed_at, row_scored_at,
};
use crate::time::{before, format_duration, format_ts, parse_ts};
use crate::window::{Window, WindowInputs};

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
    /// ([`crate::default_overlap`]).
    #[serde(serialize_with = "opt_duration")]
    pub overlap: Option<Duration>,
    /// Start every window here instead.
    pub since: Option<DateTime<Utc>>,
    /// End every window here instead of at the run's start.
    pub until: Option<DateTime<Utc>>,
    /// How far back real calls are listed again for re-dispositions (zero: not at all).
    #[serde(serialize_with = "duration")]
    pub refresh_real: Duration,
    /// Details read at once.
    pub concurrency: usize,
    /// How long after it was scored a call's webhook may still arrive.
    #[serde(serialize_with = "duration")]
    pub delivery_grace: Duration,
    /// Since when webhooks feed a sink that keeps no ledger of them ([`Sink::ledger_since`]
    /// answers `None`), through [`crate::SinkHandler`] or its own receiver. The run then counts
    /// a call it stores for the first time ([`Stored::New`]: no webhook had brought it),
    /// scored since then, as recovered, and leaves a new call scored within
    /// [`Options::delivery_grace`] to a later run (counted awaiting; the watermark waits for
    /// it), whose webhook may still bring it. `None`: every new call is backfilled.
    #[serde(serialize_with = "opt_timestamp")]
    pub webhooks_since: Option<DateTime<Utc>>,
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

fn opt_timestamp<S: serde::Serializer>(
    at: &Option<DateTime<Utc>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => s.serialize_str(&format_ts(*at)),
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
            refresh_real: crate::DEFAULT_REFRESH_REAL,
            concurrency: DEFAULT_CONCURRENCY,
            delivery_grace: DEFAULT_DELIVERY_GRACE,
            webhooks_since: None,
        }
    }
}

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StopReason<E: std::error::Error + 'static> {
    /// The service refused the key, or kept failing after the client's retries.
    #[error(transparent)]
    Client(ClientError),
    /// The sink failed.
    #[error(transparent)]
    Sink(E),
    /// A task of the run failed (a panic in the sink's code, say).
    #[error("a task of the run failed: {0}")]
    Task(String),
}

/// A run that stopped early, with what it had done by then.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct RunError<E: std::error::Error + 'static> {
    /// Why it stopped.
    pub reason: StopReason<E>,
    /// What the run did before it stopped ([`Outcome::Stopped`]).
    pub report: Box<RunReport>,
}

/// Told how a run is going, for a progress display (`()` shows nothing).
pub trait Progress: Send + Sync {
    /// The pass over `source` has reached these counts.
    fn update(&self, source: &CallSource, counts: &Counts);
}

impl Progress for () {
    fn update(&self, _: &CallSource, _: &Counts) {}
}

/// Proof that the run lock is held: only [`Reconciler::lock`] makes one, and
/// [`Reconciler::run`] requires it. Dropping it releases the lock.
#[derive(Debug)]
pub struct RunGuard<L> {
    _lock: L,
}

/// Reconciles the calls of the service behind a client into a sink.
///
/// A run lists scored calls with `GET /calls` over a window per source and stores every call
/// the sink is missing, with its detail, so that no scored call is lost whatever happened to
/// its webhook; and it finds real calls whose score changed with no webhook (a
/// re-disposition).
///
/// # How a run goes
/// For each source, every page of the source's window is listed (`limit=100`,
/// following `nextCursor` to `null`, never looking inside it), and for each page:
/// - a call the store does not hold is read with `GET /calls/{callId}` and stored;
/// - a stored call whose `scoredAt` moved is read again; a change of its score, `scoredAt` or
///   `updatedAt` is logged as a silent change;
/// - any other stored call costs nothing more than its list row.
///
/// Then the calls whose detail failed in earlier runs, and that this listing did not reach, are
/// read again.
///
/// Details are read [`Options::concurrency`] at a time across pages, while the next pages are
/// listed; each page's calls are stored in one transaction ([`Sink::store_batch`]). Only once
/// every page of a window is stored does the source's watermark move (to the window's end), so
/// a run killed at any point and run again stores the same calls as one clean run. A listed
/// call whose detail answers 404 or is not a call detail is kept by a sink that
/// [keeps failures](Sink::keeps_failures) and read again by the next runs (up to
/// [`MAX_FAILURE_ATTEMPTS`] times), and the window still completes; with a sink that keeps
/// none, the window stays incomplete so the call is listed again. A refused key, or a service
/// still failing after the client's retries, stops the run at the first such failure: no
/// further request starts, those in flight are abandoned, what was stored stays, and the
/// watermark does not move.
///
/// A call reconcile stores without its webhook in the store's ledger (written by `webhook
/// serve`) is *recovered* once it was scored more than [`Options::delivery_grace`] ago (30
/// minutes: the contract's missed-delivery fallback); until then its webhook may still come.
/// A call scored before a receiver started writing to the ledger is *backfilled*: history, or a
/// store that no `webhook serve` writes to, where no webhook was expected.
///
/// A sink that keeps no ledger ([`Sink::ledger_since`] answers `None`) gets the same counts
/// from [`Options::webhooks_since`] and what [`Sink::store_batch`] answers: a call it stores
/// for the first time ([`Stored::New`]) is one no webhook had brought, recovered when scored
/// since webhooks feed the sink; a new call scored within the grace is not read yet but left
/// for a later run (counted awaiting, and the watermark waits for it), by when its webhook has
/// stored it or it is recovered.
///
/// The run lock is a type: [`Reconciler::run`] takes the [`RunGuard`] that only
/// [`Reconciler::lock`] hands out, so two runs never write into one sink at once.
#[derive(Debug)]
pub struct Reconciler<S> {
    client: Client,
    sink: Arc<S>,
    options: Options,
}

impl<S: Sink> Reconciler<S> {
    /// A reconciler reading through `client` into `sink` with `options`.
    pub fn new(client: Client, sink: Arc<S>, options: Options) -> Self {
        Self {
            client,
            sink,
            options,
        }
    }

    /// The sink.
    pub fn sink(&self) -> &Arc<S> {
        &self.sink
    }

    /// What a run does.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The client it reads through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// How soon a run stops after it meets a fault that does not heal (a service that keeps
    /// failing, a network that is silent, stalls mid-body or resets): one request's bound,
    /// [`Client::request_bound`] (every attempt cut at the client's timeout, every wait as long
    /// as it can be). The first request to exhaust its retries stops the run, and those in
    /// flight then are abandoned, so a run never waits on a dead network longer than this. A
    /// network that is only slow (each attempt answers within the timeout) slows the run down
    /// without stopping it.
    pub fn stop_bound(&self) -> Duration {
        self.client.request_bound()
    }

    /// Takes the sink's run lock, waiting up to `wait` for another run to release it.
    ///
    /// # Errors
    /// [`LockError::Busy`] when another run holds it; the sink's error.
    pub async fn lock(&self, wait: Duration) -> Result<RunGuard<S::Lock>, LockError<S::Error>> {
        Ok(RunGuard {
            _lock: self.sink.lock(wait).await?,
        })
    }

    /// Runs one reconcile, storing what the sink is missing or what changed.
    ///
    /// # Errors
    /// [`RunError`] when the run stopped early (a refused key, a service still failing after
    /// the client's retries, the sink failing), with the report of what it did.
    pub async fn run(
        &self,
        guard: &RunGuard<S::Lock>,
        progress: &dyn Progress,
    ) -> Result<RunReport, RunError<S::Error>> {
        let _ = guard;
        self.go(false, progress).await
    }

    /// Lists every window and counts what a run would fetch and store, writing nothing (no
    /// lock needed).
    ///
    /// # Errors
    /// As [`Reconciler::run`].
    pub async fn dry_run(&self, progress: &dyn Progress) -> Result<RunReport, RunError<S::Error>> {
        self.go(true, progress).await
    }

    async fn go(
        &self,
        dry_run: bool,
        progress: &dyn Progress,
    ) -> Result<RunReport, RunError<S::Error>> {
        let started = Instant::now();
        let run_start = Utc::now();
        let requests_before = self.client.requests_sent();
        let mut run_id = None;
        let mut error: Option<StopReason<S::Error>> = None;
        if !dry_run {
            match self.sink.start_run(run_start, &self.options).await {
                Ok(id) => run_id = id,
                Err(e) => error = Some(StopReason::Sink(e)),
            }
        }
        let missed_before = before(run_start, self.options.delivery_grace);
        let sink_ledger = match self.sink.ledger_since().await {
            Ok(since) => since,
            Err(e) => {
                error.get_or_insert(StopReason::Sink(e));
                None
            }
        };
        // A sink with no ledger: the run tells how each new call arrived itself.
        let no_ledger = sink_ledger.is_none();
        let ledger_since = sink_ledger.or(self.options.webhooks_since);
        let (stop, _) = watch::channel(false);
        let run = Arc::new(Run {
            client: self.client.clone(),
            sink: self.sink.clone(),
            options: self.options.clone(),
            dry_run,
            run_id,
            missed_before,
            ledger_since,
            no_ledger,
            details: Semaphore::new(self.options.concurrency.max(1)),
            stop,
        });
        let mut sources = Vec::new();
        let mut tallies = Vec::new();
        if error.is_none() {
            for source in &self.options.sources {
                let (report, tally, stopped) = source_pass(&run, source, run_start, progress).await;
                sources.push(report);
                tallies.push(tally);
                if let Some(stopped) = stopped {
                    error = Some(stopped);
                    break;
                }
            }
        }
        if !dry_run {
            let reported: Vec<CallSource> = sources.iter().map(|s| s.source.clone()).collect();
            match self
                .sink
                .settle_awaiting(missed_before, run_id, Utc::now(), &reported)
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
                    error.get_or_insert(StopReason::Sink(e));
                }
            }
            if error.is_none() {
                match self.sink.awaiting(&reported).await {
                    Ok(counts) => {
                        for (source, n) in counts {
                            if let Some(i) = sources.iter().position(|s| s.source == source) {
                                tallies[i].counts.awaiting += n;
                            }
                        }
                    }
                    Err(e) => {
                        error.get_or_insert(StopReason::Sink(e));
                    }
                }
            }
        }
        let mut total = Tally::default();
        for (report, tally) in sources.iter_mut().zip(tallies) {
            report.counts = tally.counts;
            total.merge(tally);
        }
        let outcome = match &error {
            Some(_) => Outcome::Stopped,
            None if total.counts.failed > 0 => Outcome::CallsFailed,
            None if total.counts.recovered > 0 || total.counts.changed_silently > 0 => {
                Outcome::Found
            }
            None => Outcome::Clean,
        };
        let clock = sources.iter().find_map(|s| s.service_clock);
        if let Some(clock) = clock
            && clock
                .skew()
                .abs()
                .to_std()
                .is_ok_and(|skew| skew > CLOCK_SKEW_WARNING)
        {
            tracing::warn!(
                service_time = %format_ts(clock.at),
                local_time = %format_ts(clock.local),
                skew_seconds = clock.skew().num_seconds(),
                "the local clock and the service's differ by more than 5 minutes: windows and \
                 watermarks follow the service's clock, but webhook signatures will be refused"
            );
        }
        let report = RunReport {
            run_id,
            dry_run,
            service_time: clock.map(|c| c.at),
            clock_skew_ms: clock.map(|c| c.skew().num_milliseconds()),
            started_at: run_start,
            finished_at: Utc::now(),
            duration: started.elapsed(),
            request_bound: self.stop_bound(),
            outcome,
            error: error.as_ref().map(|e| format!("{e:#}")),
            requests: self.client.requests_sent() - requests_before,
            sources,
            totals: total.counts,
            recovered_call_ids: total.recovered,
            changed_call_ids: total.changed,
            failed_calls: total.failed,
        };
        if let Some(run_id) = run_id
            && let Err(e) = self.sink.finish_run(run_id, &report).await
        {
            tracing::warn!(error = %e, "could not record the end of the run");
        }
        match error {
            Some(reason) => Err(RunError {
                reason,
                report: Box::new(report),
            }),
            None => Ok(report),
        }
    }
}

/// How far apart the local and the service's clocks may be before a run warns: the webhook
/// signature tolerance (5 minutes), past which deliveries are refused too.
pub const CLOCK_SKEW_WARNING: Duration = Duration::from_secs(5 * 60);

/// How far the service's `Date` may be from the local clock and still be believed: a day, past
/// any clock error a host or a service runs with (a zone mistake included). A `Date` further
/// off is a broken or hostile service; trusting it would list up to its year 262142 or pull a
/// watermark back decades.
pub const MAX_PLAUSIBLE_SKEW: Duration = Duration::from_secs(24 * 3_600);

/// The client's latest `Date`, with the local time now; `None` when there is none yet, or when
/// it is implausibly far from the local clock ([`MAX_PLAUSIBLE_SKEW`]: ignored, with a warning).
fn service_clock(client: &Client) -> Option<ServiceClock> {
    let clock = ServiceClock {
        at: client.service_date()?,
        local: Utc::now(),
    };
    let plausible = clock
        .skew()
        .abs()
        .to_std()
        .is_ok_and(|skew| skew <= MAX_PLAUSIBLE_SKEW);
    if !plausible {
        tracing::warn!(
            service_time = %format_ts(clock.at),
            local_time = %format_ts(clock.local),
            "the service's Date is more than a day from the local clock: ignored; windows and \
             watermarks follow the local clock"
        );
        return None;
    }
    Some(clock)
}

/// The service's clock rounded up to the next second (its `Date` has whole seconds), at most
/// the latest time there is.
fn second_after(at: DateTime<Utc>) -> DateTime<Utc> {
    at.checked_add_signed(chrono::Duration::seconds(1))
        .unwrap_or(at)
}

/// Counts and the ids behind them, for a batch, a source or the run.
#[derive(Debug, Default)]
struct Tally {
    counts: Counts,
    recovered: Vec<CallId>,
    changed: Vec<CallId>,
    failed: Vec<FailedCall>,
    /// The earliest listing time of a new call left for a later run: the watermark waits
    /// for it.
    left_from: Option<DateTime<Utc>>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.counts.add(&other.counts);
        self.left_from = match (self.left_from, other.left_from) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
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
struct Run<S> {
    client: Client,
    sink: Arc<S>,
    options: Options,
    dry_run: bool,
    run_id: Option<RunId>,
    /// A call scored at or before this with no webhook missed its delivery.
    missed_before: DateTime<Utc>,
    /// Since when the sink's ledger records webhooks, else [`Options::webhooks_since`].
    ledger_since: Option<DateTime<Utc>>,
    /// The sink keeps no ledger: a new call is recovered or backfilled by the run's own
    /// reckoning, and one scored within the grace (since `ledger_since`) is left for later.
    no_ledger: bool,
    details: Semaphore,
    /// Set at the first failure that stops the run: no detail read starts after it, and those
    /// waiting on retries are abandoned.
    stop: watch::Sender<bool>,
}

impl<S> Run<S> {
    /// Whether a call the sink does not hold is left for a later run, and then when it is
    /// listed: with a sink that keeps no ledger, a call scored since webhooks feed it and
    /// within the grace, whose webhook may still bring it. Stored now, it would be counted
    /// neither recovered (its webhook may come) nor delivered (if it comes, the sink answers
    /// [`Stored::Unchanged`], which no run sees); left, it is either stored by its webhook
    /// meanwhile, or stored by a later run once the grace has passed: recovered.
    fn left_for_later(&self, row: &RawCallRow) -> Option<DateTime<Utc>> {
        let since = self.ledger_since.filter(|_| self.no_ledger)?;
        let scored = row_scored_at(&row.row)?;
        (scored >= since && scored > self.missed_before)
            .then(|| row_listed_at(&row.row))
            .flatten()
    }

    /// How a call the sink stored for the first time arrived: as the sink says when it keeps
    /// a ledger; else, as no webhook had brought it (the sink answered [`Stored::New`]),
    /// recovered when scored since webhooks feed the sink ([`Options::webhooks_since`]),
    /// backfilled otherwise.
    fn arrival(&self, said: Arrival, first_scored: Option<DateTime<Utc>>) -> Arrival {
        if !self.no_ledger || said == Arrival::Webhook {
            return said;
        }
        match (self.ledger_since, first_scored) {
            (Some(since), Some(at)) if at >= since => Arrival::Recovered,
            _ => Arrival::Backfill,
        }
    }
}

type Stop<E> = Option<StopReason<E>>;

/// Lists one source's window and stores what is missing or moved.
async fn source_pass<S: Sink>(
    run: &Arc<Run<S>>,
    source: &CallSource,
    run_start: DateTime<Utc>,
    progress: &dyn Progress,
) -> (SourceReport, Tally, Stop<S::Error>) {
    let watermark = match run.sink.watermark(source).await {
        Ok(watermark) => watermark,
        Err(e) => {
            let report = SourceReport {
                source: source.clone(),
                from: run_start,
                to: run_start,
                first_run: false,
                completed: false,
                watermark: None,
                service_clock: None,
                counts: Counts::default(),
            };
            return (report, Tally::default(), Some(StopReason::Sink(e)));
        }
    };
    let window = Window::of(&WindowInputs {
        source,
        watermark,
        run_start,
        since: run.options.since,
        until: run.options.until,
        overlap: run.options.overlap,
        refresh_real: run.options.refresh_real,
    });
    let mut report = SourceReport {
        source: source.clone(),
        from: window.from,
        to: window.to,
        first_run: watermark.is_none(),
        completed: false,
        watermark,
        service_clock: None,
        counts: Counts::default(),
    };
    let mut tally = Tally::default();
    let mut clock = None;
    let mut stopped = list_window(run, source, &window, &mut tally, progress, &mut clock).await;
    // A service whose clock runs ahead of this host's (by its `Date` against the host's clock
    // at the same moment, not against the window's end: a slow first page is no skew) has
    // scored calls after the window's end, the host's "now": list up to the service's own time
    // too, so they are not left for a run hours later. Only then is a second listing made.
    if stopped.is_none()
        && run.options.until.is_none()
        && let Some(ahead) = clock.filter(|c| -c.skew() > chrono::Duration::seconds(2))
    {
        let beyond = Window {
            from: window.to,
            to: second_after(ahead.at),
            ..window
        };
        let mut ignored = None;
        stopped = list_window(run, source, &beyond, &mut tally, progress, &mut ignored).await;
        report.to = beyond.to;
    }
    // The watermark never passes the service's own clock when it answered the first page (its
    // `Date`, to the second, rounded up: the window's overlap covers that second): a host clock
    // ahead of the service's would otherwise move it past calls not scored yet.
    let next = match clock {
        Some(clock) => window.watermark.min(second_after(clock.at)),
        None => window.watermark,
    };
    // Then the calls earlier runs could not store and this listing did not reach.
    if stopped.is_none() && !run.dry_run && run.sink.keeps_failures() {
        match run
            .sink
            .failures_to_retry(source, MAX_FAILURE_ATTEMPTS, run.run_id)
            .await
        {
            Ok(rows) if !rows.is_empty() => {
                let (batch, error) = process_rows(run.clone(), rows).await;
                tally.merge(batch);
                stopped = error;
            }
            Ok(_) => {}
            Err(e) => stopped = Some(StopReason::Sink(e)),
        }
    }
    // Nor past a new call left for a later run, so that run lists it again.
    let next = tally.left_from.map_or(next, |left| next.min(left));
    let advances = window.advances && watermark.is_none_or(|w| next > w);
    // A failed detail that the sink does not keep must be listed again: the window stays open.
    let unkept = (!run.sink.keeps_failures() && tally.counts.failed > 0).then(|| {
        format!(
            "{} listed call(s) could not be stored and the sink keeps no failures",
            tally.counts.failed
        )
    });
    if !run.dry_run {
        let next = (stopped.is_none() && unkept.is_none() && advances).then_some(next);
        let reason = stopped
            .as_ref()
            .map(|e| format!("{e:#}"))
            .or(unkept.clone());
        let end = match &reason {
            None => WindowEnd::Complete(next),
            Some(reason) => WindowEnd::Stopped(reason),
        };
        if let Err(e) = run
            .sink
            .record_window(source, run.run_id, run_start, end)
            .await
        {
            stopped.get_or_insert(StopReason::Sink(e));
        }
        if stopped.is_none() && unkept.is_none() {
            report.watermark = next.or(report.watermark);
        }
    }
    report.completed = stopped.is_none() && unkept.is_none();
    report.service_clock = clock;
    (report, tally, stopped)
}

/// Lists every page of `window`, handing each to a batch task; returns why it stopped early.
async fn list_window<S: Sink>(
    run: &Arc<Run<S>>,
    source: &CallSource,
    window: &Window,
    tally: &mut Tally,
    progress: &dyn Progress,
    first_clock: &mut Option<ServiceClock>,
) -> Stop<S::Error> {
    let mut query = CallQuery::new(source.clone(), format_ts(window.from));
    query.to = Some(format_ts(window.to));
    query.limit = Some(PAGE_LIMIT);
    // The pages are listed on their own task, a page or two ahead of the batches.
    let (pages_tx, mut pages) = mpsc::channel(2);
    let pages_stream = run.client.calls_raw_pages(query);
    let client = run.client.clone();
    let lister = tokio::spawn(async move {
        let mut stream = std::pin::pin!(pages_stream);
        let mut first = true;
        while let Some(page) = stream.next().await {
            // The service's clock when it answered the first page, read at once: no other
            // request of this source is in flight yet.
            let clock = first.then(|| service_clock(&client)).flatten();
            first = false;
            let failed = page.is_err();
            if pages_tx.send((page, clock)).await.is_err() || failed {
                break;
            }
        }
    });
    let mut batches = JoinSet::new();
    let mut stopped = None;
    let merge = |tally: &mut Tally,
                 joined: Result<(Tally, Stop<S::Error>), tokio::task::JoinError>| {
        match joined {
            Ok((batch, error)) => {
                tally.merge(batch);
                error
            }
            Err(e) => Some(StopReason::Task(e.to_string())),
        }
    };
    while let Some((page, clock)) = pages.recv().await {
        if clock.is_some() {
            *first_clock = clock;
        }
        let rows = match page {
            Ok(rows) => rows,
            Err(e) => {
                stopped = Some(StopReason::Client(e));
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
        progress.update(source, &tally.counts);
    }
    drop(pages);
    lister.abort();
    while let Some(joined) = batches.join_next().await {
        if let Some(error) = merge(tally, joined) {
            stopped.get_or_insert(error);
        }
    }
    progress.update(source, &tally.counts);
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

/// Reads one detail, unless the run is stopping (`None`): then no request starts, and one in
/// flight (its retries included) is abandoned.
async fn read_detail<S: Sink>(
    run: &Run<S>,
    id: &CallId,
) -> Option<Result<RawCallDetail, ClientError>> {
    let mut stop = run.stop.subscribe();
    if *stop.borrow() {
        return None;
    }
    let _permit = run.details.acquire().await;
    let detail = tokio::select! {
        biased;
        _ = stop.wait_for(|stopping| *stopping) => return None,
        detail = run.client.call_raw(id) => detail,
    };
    if let Err(e) = &detail
        && call_failure(e).is_none()
    {
        // The service or the key failed, not this call: no other read starts.
        run.stop.send_replace(true);
    }
    Some(detail)
}

/// Handles one batch of listed rows (a page, or the failures of earlier runs): reads the
/// details needed and stores them in one transaction.
async fn process_rows<S: Sink>(run: Arc<Run<S>>, rows: Vec<RawCallRow>) -> (Tally, Stop<S::Error>) {
    let mut tally = Tally::default();
    let ids: Vec<CallId> = rows.iter().map(|r| r.row.id.clone()).collect();
    let known = match run.sink.known_calls(&ids).await {
        Ok(known) => known,
        Err(e) => return (tally, Some(StopReason::Sink(e))),
    };
    let mut fetch = Vec::new();
    let mut fill = Vec::new();
    for row in rows {
        match known.get(&row.row.id) {
            None => match run.left_for_later(&row) {
                Some(listed) => {
                    tally.counts.awaiting += 1;
                    tally.left_from = Some(tally.left_from.map_or(listed, |l| l.min(listed)));
                }
                None => fetch.push(row),
            },
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
    if run.dry_run {
        tally.counts.new += (fetch.len() as u64).saturating_sub(tally.counts.moved);
        return (tally, None);
    }
    let fetched: Vec<(RawCallRow, Option<Result<RawCallDetail, ClientError>>)> =
        stream::iter(fetch)
            .map(|row| {
                let run = run.clone();
                async move {
                    let detail = read_detail(&run, &row.row.id).await;
                    (row, detail)
                }
            })
            .buffer_unordered(usize::MAX)
            .collect()
            .await;
    let mut calls = Vec::new();
    let mut failures = Vec::new();
    let mut stopped: Stop<S::Error> = None;
    for (row, detail) in fetched {
        let Some(detail) = detail else {
            continue; // not read: the run is stopping
        };
        tally.counts.details_fetched += 1;
        match detail {
            Ok(detail) => calls.push(FetchedCall {
                row: Some(row),
                detail,
            }),
            Err(e) => match call_failure(&e) {
                Some(http_status) => failures.push(CallFailure {
                    row,
                    error: format!("{e:#}"),
                    http_status,
                }),
                None => {
                    run.stop.send_replace(true);
                    stopped.get_or_insert(StopReason::Client(e));
                }
            },
        }
    }
    let ids: Vec<(CallId, Option<DateTime<Utc>>)> = calls
        .iter()
        .map(|c| (c.detail.detail.row.id.clone(), first_scored(&c.detail)))
        .collect();
    let failed: Vec<FailedCall> = failures
        .iter()
        .map(|f| FailedCall {
            call_id: f.row.row.id.clone(),
            error: f.error.clone(),
        })
        .collect();
    let batch = Batch {
        calls,
        failures: if run.sink.keeps_failures() {
            failures
        } else {
            Vec::new()
        },
        rows_to_fill: fill,
        context: BatchContext {
            run_id: run.run_id,
            now: Utc::now(),
            ledger_since: run.ledger_since,
            missed_before: run.missed_before,
        },
    };
    match run.sink.store_batch(batch).await {
        Ok(stored) => {
            for ((id, first), stored) in ids.into_iter().zip(stored) {
                match stored {
                    Stored::New(arrival) => {
                        tally.counts.new += 1;
                        match run.arrival(arrival, first) {
                            Arrival::Recovered => {
                                tally.counts.recovered += 1;
                                tally.recovered.push(id);
                            }
                            Arrival::Backfill => tally.counts.backfilled += 1,
                            Arrival::Webhook | Arrival::Awaiting => {}
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
            stopped.get_or_insert(StopReason::Sink(e));
        }
    }
    if stopped.is_some() {
        run.stop.send_replace(true);
    }
    (tally, stopped)
}
