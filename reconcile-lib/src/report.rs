//! A run's report: what each source's window held and what the run did with it, typed, and
//! serialised as one JSON object with stable keys (`svc-cli reconcile --json` prints it; its keys
//! are documented in `tenant-cli/REFERENCE.md`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use svc_client::{CallId, CallSource};

use crate::sink::RunId;
use crate::time::format_ts;

/// How many call ids a report lists per kind (recovered, changed, failed); the counts are
/// always complete.
pub const LISTED_IDS: usize = 1_000;

/// Counts of one source, or of the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// `GET /calls` pages read.
    pub pages: u64,
    /// Distinct calls listed.
    pub listed: u64,
    /// Calls stored for the first time (those recovered or backfilled as they are stored
    /// included). A call stored by an earlier run while awaiting its webhook and recovered by
    /// this one counts in `recovered` only: `recovered` can exceed `new`.
    pub new: u64,
    /// Listed calls already stored, unchanged.
    pub known: u64,
    /// Calls stored by reconcile whose webhook never came: a missed delivery.
    pub recovered: u64,
    /// Calls stored with no webhook that were scored before a receiver started writing to the
    /// store's ledger: history, not missed deliveries.
    pub backfilled: u64,
    /// Listed calls whose `scoredAt` moved since they were stored; their detail is read again.
    pub moved: u64,
    /// Stored calls whose score, `scoredAt` or `updatedAt` changed with no webhook (logged).
    pub changed_silently: u64,
    /// Listed calls whose detail could not be stored (recorded; retried by later runs).
    pub failed: u64,
    /// Call details read.
    pub details_fetched: u64,
    /// Calls of the source stored and still awaiting their webhook when the run ended: scored
    /// within the delivery grace, so neither delivered nor yet counted as missed. A later run
    /// settles each (delivered, or recovered if its webhook never comes). Not a count of this
    /// run's work; 0 in a dry run. With a sink that keeps no ledger (and
    /// `Options::webhooks_since`): the new calls listed within the grace, left for a later run
    /// to store unless their webhook does first (counted in a dry run too).
    pub awaiting: u64,
}

impl Counts {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &Counts) {
        self.pages += other.pages;
        self.listed += other.listed;
        self.new += other.new;
        self.known += other.known;
        self.recovered += other.recovered;
        self.backfilled += other.backfilled;
        self.moved += other.moved;
        self.changed_silently += other.changed_silently;
        self.failed += other.failed;
        self.details_fetched += other.details_fetched;
        self.awaiting += other.awaiting;
    }
}

/// What a run did for one source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceReport {
    /// The source.
    pub source: CallSource,
    /// The window's `from`.
    #[serde(serialize_with = "timestamp")]
    pub from: DateTime<Utc>,
    /// The window's `to`.
    #[serde(serialize_with = "timestamp")]
    pub to: DateTime<Utc>,
    /// Whether this was the source's first run.
    pub first_run: bool,
    /// Whether every page of the window was stored.
    pub completed: bool,
    /// The watermark after the run.
    #[serde(serialize_with = "opt_timestamp")]
    pub watermark: Option<DateTime<Utc>>,
    /// The service's clock when it answered the window's first page (the watermark never
    /// passes it).
    #[serde(skip)]
    pub service_clock: Option<ServiceClock>,
    /// The counts.
    #[serde(flatten)]
    pub counts: Counts,
}

/// A listed call whose detail could not be stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedCall {
    /// The call.
    pub call_id: CallId,
    /// Why.
    pub error: String,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Every window completed and nothing needs attention.
    Clean,
    /// Every window completed, and calls were recovered (their webhook never arrived) or
    /// changed with no webhook: something to alert on.
    Found,
    /// The windows completed but some listed calls could not be stored (kept, or listed again
    /// by the next run).
    CallsFailed,
    /// The run stopped early ([`RunReport::error`] says why); what was stored stays and no
    /// watermark moved past what was stored.
    Stopped,
}

impl Outcome {
    /// `ok`, or `failed` for a run that stopped (the report's JSON `outcome`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stopped => "failed",
            Self::Clean | Self::Found | Self::CallsFailed => "ok",
        }
    }
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The report of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    /// The run's id in the sink (`None` for a dry run, or a sink that keeps no runs).
    pub run_id: Option<RunId>,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// When the run started.
    #[serde(serialize_with = "timestamp")]
    pub started_at: DateTime<Utc>,
    /// When it finished.
    #[serde(serialize_with = "timestamp")]
    pub finished_at: DateTime<Utc>,
    /// How long it took.
    #[serde(rename = "durationMs", serialize_with = "millis")]
    pub duration: Duration,
    /// Its request bound ([`crate::Reconciler::stop_bound`]): the longest one request may take,
    /// retries and waits included, so how soon the run stops after meeting a network or
    /// service fault that does not heal.
    #[serde(rename = "requestBoundMs", serialize_with = "millis")]
    pub request_bound: Duration,
    /// The service's clock (`Date`) when it answered the run's first page; `None` when no
    /// page was read.
    #[serde(serialize_with = "opt_timestamp")]
    pub service_time: Option<DateTime<Utc>>,
    /// How far the local clock was ahead of the service's then, in milliseconds (negative:
    /// behind; whole seconds, as `Date` has them).
    pub clock_skew_ms: Option<i64>,
    /// How it ended.
    pub outcome: Outcome,
    /// Why the run stopped, when it did.
    pub error: Option<String>,
    /// HTTP requests sent, retries included.
    pub requests: u64,
    /// Per source.
    pub sources: Vec<SourceReport>,
    /// All sources together.
    pub totals: Counts,
    /// Recovered calls (at most [`LISTED_IDS`]).
    pub recovered_call_ids: Vec<CallId>,
    /// Calls that changed silently (at most [`LISTED_IDS`]).
    pub changed_call_ids: Vec<CallId>,
    /// Calls whose detail failed (at most [`LISTED_IDS`]).
    pub failed_calls: Vec<FailedCall>,
}

fn timestamp<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_ts(*at))
}

fn opt_timestamp<S: Serializer>(at: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => s.serialize_str(&format_ts(*at)),
        None => s.serialize_none(),
    }
}

fn millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The service's clock as one of its responses said (`Date`), and the local clock then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceClock {
    /// The service's time (whole seconds).
    pub at: DateTime<Utc>,
    /// The local time when the answer was read.
    pub local: DateTime<Utc>,
}

impl ServiceClock {
    /// How far the local clock is ahead of the service's (negative: behind), to the second.
    pub fn skew(&self) -> chrono::Duration {
        self.local - self.at
    }
}
