//! What passes between a run and storage: the [`Sink`] trait a tenant implements over its own
//! tables (the way `grep-searcher` hands matches to a `Sink` its caller writes), and its types.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use svc_client::{CallId, CallRow, CallSource, RawCallDetail, RawCallRow};

/// A run's id, as the sink recorded it ([`Sink::start_run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct RunId(pub i64);

/// What the sink holds of a listed call.
///
/// What to return: `KnownCall { scored_at: <the stored detail's scoredAt>, has_row: true }`,
/// unless the sink keeps list rows apart from details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownCall {
    /// `scoredAt` as stored (text, as the service sent it): a listed row whose `scoredAt`
    /// differs is read again.
    pub scored_at: Option<String>,
    /// `false` only for a sink that stores `GET /calls` rows apart from details and lacks
    /// this call's (stored from its webhook): the run hands it in [`Batch::rows_to_fill`].
    /// Any other sink says `true`.
    pub has_row: bool,
}

/// How a stored call reached the sink.
///
/// What to return in [`Stored::New`]: a sink with no ledger of webhooks (the default
/// [`Sink::ledger_since`]) may return any, `Backfill` say, for the run decides itself; a sink
/// with one returns [`BatchContext::arrival_of`] (from [`Sink::store_delivered`]: `Webhook`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Its verified webhook is in the ledger.
    Webhook,
    /// Stored by reconcile; its webhook may still come.
    Awaiting,
    /// Stored by reconcile, with no webhook long after it was scored: a missed delivery.
    Recovered,
    /// Stored by reconcile with no webhook expected: scored before the ledger opened, or a
    /// sink with no ledger at all.
    Backfill,
}

/// What storing one fetched call did.
///
/// What to return: `New` only when the call was not held before by either path (reconcile
/// or its webhook): it is how the run tells a call no webhook had brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Stored for the first time, and how it arrived.
    New(Arrival),
    /// Already stored; its score, `scoredAt` or `updatedAt` changed with no webhook (a silent
    /// change, which the run reports).
    Changed,
    /// Already stored; nothing that matters changed.
    Unchanged,
}

/// A call to store: its detail as the service sent it, and its list row when it was listed
/// (calls retried from earlier failures carry their stored row too).
#[derive(Debug, Clone)]
pub struct FetchedCall {
    /// The `GET /calls` row.
    pub row: Option<RawCallRow>,
    /// The `GET /calls/{callId}` body.
    pub detail: RawCallDetail,
}

/// A listed call whose detail could not be read as a call (404, a body that is not a call
/// detail); kept by a sink that [keeps failures](Sink::keeps_failures) and read again by later
/// runs.
#[derive(Debug, Clone)]
pub struct CallFailure {
    /// The call's row.
    pub row: RawCallRow,
    /// What went wrong.
    pub error: String,
    /// The HTTP status, when the service answered.
    pub http_status: Option<u16>,
}

/// When a batch is stored, and the rules to classify a new call by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchContext {
    /// The run storing it.
    pub run_id: Option<RunId>,
    /// Now.
    pub now: DateTime<Utc>,
    /// Since when the sink's ledger records webhooks ([`Sink::ledger_since`]; for a sink with
    /// no ledger, [`crate::Options::webhooks_since`]).
    pub ledger_since: Option<DateTime<Utc>>,
    /// A new call with no webhook scored at or before this missed its delivery; a later one
    /// still awaits it.
    pub missed_before: DateTime<Utc>,
}

impl BatchContext {
    /// How a call first stored now, by reconcile, reached the sink, given when it was first
    /// scored and whether its webhook is in the ledger: what a sink with a ledger records.
    pub fn arrival_of(&self, first_scored: Option<DateTime<Utc>>, webhook: bool) -> Arrival {
        if webhook {
            Arrival::Webhook
        } else if self
            .ledger_since
            .is_none_or(|since| first_scored.is_none_or(|at| at < since))
        {
            Arrival::Backfill
        } else if first_scored.is_some_and(|at| at <= self.missed_before) {
            Arrival::Recovered
        } else {
            Arrival::Awaiting
        }
    }
}

/// One page's work, to store in one transaction: all of it or none.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The calls fetched, in listing order; [`Sink::store_batch`] answers one [`Stored`] each.
    pub calls: Vec<FetchedCall>,
    /// The listed calls whose detail failed (empty unless the sink keeps failures).
    pub failures: Vec<CallFailure>,
    /// List rows of calls the sink holds without one ([`KnownCall::has_row`]).
    pub rows_to_fill: Vec<RawCallRow>,
    /// When, and how to classify new calls.
    pub context: BatchContext,
}

/// A call its verified webhook announced, read and handed to [`Sink::store_delivered`] by
/// [`crate::SinkHandler`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Delivered {
    /// The delivery's `X-Service-Webhook-Id`.
    pub webhook_id: String,
    /// When the receiver verified the delivery.
    pub received_at: DateTime<Utc>,
    /// The decoded event.
    pub event: svc_contract::CallScored,
    /// The body exactly as received and verified (for a ledger or an audit trail).
    pub body: std::sync::Arc<[u8]>,
    /// The `GET /calls/{callId}` body, read after the delivery.
    pub detail: RawCallDetail,
}

impl Delivered {
    /// A delivered call: its webhook's id and event, the body as verified, when it was
    /// verified, and the detail read after it.
    pub fn new(
        webhook_id: impl Into<String>,
        event: svc_contract::CallScored,
        body: std::sync::Arc<[u8]>,
        received_at: DateTime<Utc>,
        detail: RawCallDetail,
    ) -> Self {
        Self {
            webhook_id: webhook_id.into(),
            received_at,
            event,
            body,
            detail,
        }
    }
}

impl Batch {
    /// A batch of one call its webhook brought (no list row: reconcile fills it in when it
    /// lists the call), stored at `now` by a sink whose ledger opened at `ledger_since`.
    pub fn delivered(
        detail: RawCallDetail,
        now: DateTime<Utc>,
        ledger_since: Option<DateTime<Utc>>,
    ) -> Self {
        Self {
            calls: vec![FetchedCall { row: None, detail }],
            failures: Vec::new(),
            rows_to_fill: Vec::new(),
            context: BatchContext {
                run_id: None,
                now,
                ledger_since,
                missed_before: now,
            },
        }
    }
}

/// How a source's pass ended, for [`Sink::record_window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowEnd<'a> {
    /// Every page of the window is stored: the watermark moves to this instant when given (a
    /// window that starts after the watermark leaves it where it is).
    Complete(Option<DateTime<Utc>>),
    /// The pass stopped for this reason: the watermark must not move.
    Stopped(&'a str),
}

/// Why a run lock could not be taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError<E> {
    /// Another run holds it (and kept it for the time allowed to wait): who, as the sink says.
    #[error("{0}")]
    Busy(String),
    /// The sink failed.
    #[error(transparent)]
    Sink(E),
}

/// What reconcile needs from storage: the trait a tenant implements over its own tables.
///
/// A run asks the sink for each source's watermark, which listed calls it already holds (and
/// at which `scoredAt`), hands it each page's fetched calls in one [`Batch`] to store in one
/// transaction, and tells it when a source's window is complete (the watermark may move).
/// Everything else has a default that is safe for a sink that keeps only calls and
/// watermarks:
/// - runs ([`Sink::start_run`], [`Sink::finish_run`]): not recorded;
/// - failed details ([`Sink::keeps_failures`]): not kept, so a window with a failed detail
///   does not complete and its watermark stays (the next run lists the call again);
/// - the ledger of received webhooks ([`Sink::ledger_since`], [`Sink::settle_awaiting`],
///   [`Sink::awaiting`]): none. The run then counts recovered and awaiting calls itself from
///   what [`Sink::store_batch`] answers, once [`crate::Options::webhooks_since`] says since
///   when webhooks feed the sink (without it, every new call is backfilled);
/// - a call its webhook brought ([`Sink::store_delivered`], called by
///   [`crate::SinkHandler`]): stored through [`Sink::store_batch`] like any other.
///
/// Implementations: [`crate::MemorySink`] here (tests, dry runs), and `svc-cli`'s
/// store (SQLite or PostgreSQL, in the workspace's `svc-store`). Both pass the conformance
/// suite a tenant's sink can be held to as well: `testing` (feature `testing`).
///
/// Every method may be called from several tasks at once (a run stores up to four pages
/// concurrently); [`Sink::store_batch`] must be one transaction.
pub trait Sink: Send + Sync + 'static {
    /// The sink's error.
    type Error: std::error::Error + Send + Sync + 'static;
    /// What a run holds while it writes (dropped when the run ends): a file lock, an advisory
    /// lock, or `()` for a sink whose runs never overlap.
    type Lock: Send + Sync + 'static;

    /// Takes the run lock, waiting up to `wait` for another run to release it.
    fn lock(
        &self,
        wait: Duration,
    ) -> impl Future<Output = Result<Self::Lock, LockError<Self::Error>>> + Send;

    /// The watermark of `source`: every call scored up to it is stored (`None`: first run).
    fn watermark(
        &self,
        source: &CallSource,
    ) -> impl Future<Output = Result<Option<DateTime<Utc>>, Self::Error>> + Send;

    /// What the sink holds of each of `ids` (absent ids are not stored).
    fn known_calls(
        &self,
        ids: &[CallId],
    ) -> impl Future<Output = Result<HashMap<CallId, KnownCall>, Self::Error>> + Send;

    /// Stores a batch in one transaction; one [`Stored`] per call of [`Batch::calls`], in order.
    /// A detail older than the stored one (by `updatedAt`, else `scoredAt`) must not replace it.
    fn store_batch(
        &self,
        batch: Batch,
    ) -> impl Future<Output = Result<Vec<Stored>, Self::Error>> + Send;

    /// Stores one call its webhook brought ([`crate::SinkHandler`]), in one
    /// transaction, and answers what storing it did: [`Stored::New`] only the first time the
    /// call is stored by either path, so that an effect tied to it happens once per call. The
    /// same call may be handed over again (the receiver's inbox is at-least-once).
    ///
    /// The default stores it through [`Sink::store_batch`] as [`Batch::delivered`] with no
    /// ledger. A sink with a ledger of webhooks overrides it to record the delivery in the
    /// same transaction, so that reconcile counts the call as delivered, not recovered.
    fn store_delivered(
        &self,
        delivered: Delivered,
    ) -> impl Future<Output = Result<Stored, Self::Error>> + Send {
        async move {
            let batch = Batch::delivered(delivered.detail, Utc::now(), None);
            let stored = self.store_batch(batch).await?;
            Ok(stored.into_iter().next().unwrap_or(Stored::Unchanged))
        }
    }

    /// Records how a source's pass of run `run_id` ended at `at`; with
    /// [`WindowEnd::Complete`] the watermark moves.
    fn record_window(
        &self,
        source: &CallSource,
        run_id: Option<RunId>,
        at: DateTime<Utc>,
        end: WindowEnd<'_>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Records the start of a run; `None` when the sink keeps no runs.
    fn start_run(
        &self,
        started_at: DateTime<Utc>,
        options: &crate::Options,
    ) -> impl Future<Output = Result<Option<RunId>, Self::Error>> + Send {
        let _ = (started_at, options);
        async { Ok(None) }
    }

    /// Records the end of run `run_id` with its report.
    fn finish_run(
        &self,
        run_id: RunId,
        report: &crate::RunReport,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = (run_id, report);
        async { Ok(()) }
    }

    /// Whether the sink keeps [`Batch::failures`] and hands them back through
    /// [`Sink::failures_to_retry`]. A sink that does not leaves a window with a failed detail
    /// incomplete, so that the call is listed again.
    fn keeps_failures(&self) -> bool {
        false
    }

    /// Listed calls of `source` whose detail failed fewer than `max_attempts` times, and not
    /// already in run `run_id`.
    fn failures_to_retry(
        &self,
        source: &CallSource,
        max_attempts: u32,
        run_id: Option<RunId>,
    ) -> impl Future<Output = Result<Vec<RawCallRow>, Self::Error>> + Send {
        let _ = (source, max_attempts, run_id);
        async { Ok(Vec::new()) }
    }

    /// Since when the sink's ledger records received webhooks (`None`: no ledger; the run
    /// then counts recovered and awaiting calls itself, see [`crate::Options::webhooks_since`]).
    fn ledger_since(
        &self,
    ) -> impl Future<Output = Result<Option<DateTime<Utc>>, Self::Error>> + Send {
        async { Ok(None) }
    }

    /// Settles the calls stored as [`Arrival::Awaiting`]: to webhook when it has arrived, to
    /// recovered (by `run_id`, at `now`) when scored at or before `missed_before` and of one of
    /// `sources`. Returns each call recovered now, with its source.
    fn settle_awaiting(
        &self,
        missed_before: DateTime<Utc>,
        run_id: Option<RunId>,
        now: DateTime<Utc>,
        sources: &[CallSource],
    ) -> impl Future<Output = Result<Vec<(CallId, CallSource)>, Self::Error>> + Send {
        let _ = (missed_before, run_id, now, sources);
        async { Ok(Vec::new()) }
    }

    /// How many stored calls of each of `sources` are still [`Arrival::Awaiting`] their
    /// webhook (after [`Sink::settle_awaiting`]); a source with none may be left out.
    fn awaiting(
        &self,
        sources: &[CallSource],
    ) -> impl Future<Output = Result<Vec<(CallSource, u64)>, Self::Error>> + Send {
        let _ = sources;
        async { Ok(Vec::new()) }
    }
}

/// What a sink compares to tell a changed call from an unchanged one, and an older detail
/// from a newer one: the `score` object as sent, `scoredAt` and `updatedAt`.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    /// The detail's `score`, as a JSON value.
    pub score: serde_json::Value,
    /// `scoredAt`.
    pub scored_at: Option<String>,
    /// `updatedAt`.
    pub updated_at: Option<String>,
}

impl Version {
    /// The version of a detail.
    pub fn of(detail: &RawCallDetail) -> Self {
        let score = serde_json::from_str::<serde_json::Value>(&detail.json)
            .ok()
            .and_then(|mut body| body.get_mut("score").map(serde_json::Value::take))
            .unwrap_or(serde_json::Value::Null);
        Self {
            score,
            scored_at: detail.detail.row.scored_at.clone(),
            updated_at: detail.detail.updated_at.clone(),
        }
    }

    /// Whether this version is older than `stored`: its `updatedAt` (else `scoredAt`) is
    /// before the stored one's (either missing or unreadable: not older). An older detail (a
    /// webhook worker's read that lost a race with a re-disposition) must not replace it.
    pub fn is_older_than(&self, stored: &Version) -> bool {
        is_older(
            (self.updated_at.as_deref(), self.scored_at.as_deref()),
            (stored.updated_at.as_deref(), stored.scored_at.as_deref()),
        )
    }
}

/// Whether a version given as `(updatedAt, scoredAt)` is older than a stored one: its
/// `updatedAt` (else `scoredAt`) is before the stored one's; either missing or unreadable: not
/// older. What [`Version::is_older_than`] compares.
fn is_older(incoming: (Option<&str>, Option<&str>), stored: (Option<&str>, Option<&str>)) -> bool {
    let at = |(updated, scored): (Option<&str>, Option<&str>)| {
        updated.or(scored).and_then(crate::time::parse_ts)
    };
    matches!((at(incoming), at(stored)), (Some(mine), Some(theirs)) if mine < theirs)
}

/// When a call is listed by `GET /calls`' window: `startedAt` for a real call, `endedAt` (else
/// `startedAt`) for a practice call.
pub fn listed_at(detail: &RawCallDetail) -> Option<DateTime<Utc>> {
    row_listed_at(&detail.detail.row)
}

/// [`listed_at`], from a list row.
pub(crate) fn row_listed_at(row: &CallRow) -> Option<DateTime<Utc>> {
    let parse = |t: &Option<String>| t.as_deref().and_then(crate::time::parse_ts);
    match row.source {
        CallSource::RealCall => parse(&row.started_at),
        _ => parse(&row.ended_at).or_else(|| parse(&row.started_at)),
    }
}

/// When a call was scored: `scoredAt`, else when it is listed.
pub fn scored_at(detail: &RawCallDetail) -> Option<DateTime<Utc>> {
    row_scored_at(&detail.detail.row)
}

/// [`scored_at`], from a list row.
pub(crate) fn row_scored_at(row: &CallRow) -> Option<DateTime<Utc>> {
    let scored = row.scored_at.as_deref();
    scored
        .and_then(crate::time::parse_ts)
        .or_else(|| row_listed_at(row))
}

/// When a call was first scored, which is when its `call.scored` went out: `scoredAt`, except
/// for a real call re-dispositioned since (its `scoredAt` moved, with no new delivery), whose
/// first scoring is its `createdAt` (what [`BatchContext::arrival_of`] takes).
pub fn first_scored(detail: &RawCallDetail) -> Option<DateTime<Utc>> {
    let scored = scored_at(detail);
    let created = detail
        .detail
        .created_at
        .as_deref()
        .and_then(crate::time::parse_ts);
    match (&detail.detail.row.source, created) {
        (CallSource::RealCall, Some(created)) => Some(scored.map_or(created, |s| s.min(created))),
        _ => scored,
    }
}
