//! `svc-reconcile`: reconcile the scored calls of the Roleplay and Call-Scoring Service v1 API
//! into storage you choose, so that no scored call is lost whatever happened to its webhook,
//! and re-scored calls (a re-disposition sends no webhook) are found.
//!
//! A [`Reconciler`] lists each source's calls over a window (`GET /calls`, through
//! `svc-client`), reads the detail of every call the [`Sink`] does not hold yet (or whose
//! `scoredAt` moved), and hands them to the sink page by page; once a window is stored, the
//! source's watermark moves. Implement [`Sink`] over your own tables, and hold it to the
//! conformance suite in your tests (`testing`, feature `testing`); [`MemorySink`] keeps
//! everything in memory. No feature links a database: `svc-cli`'s own SQLite/PostgreSQL store
//! is the workspace's `svc-store`, one more implementation of [`Sink`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use svc_client::{ApiKey, Client};
//! use svc_reconcile::{MemorySink, Options, Reconciler};
//!
//! let client = Client::builder("http://127.0.0.1:8787/v1")
//!     .api_key(ApiKey::new("svc_live_…"))
//!     .build()?;
//! let reconciler = Reconciler::new(client, Arc::new(MemorySink::default()), Options::default());
//! let guard = reconciler.lock(Duration::ZERO).await?;
//! let report = reconciler.run(&guard, &()).await?;
//! println!("{} new calls, {} recovered", report.totals.new, report.totals.recovered);
//! # Ok(()) }
//! ```
//!
//! # What is here
//! Everything is at the crate's root, but for two modules:
//! - [`Reconciler`], its [`Options`], the run lock as a type ([`RunGuard`]), progress
//!   ([`Progress`]) and why a run stops ([`RunError`]); how a run goes is on [`Reconciler`].
//! - [`Sink`], the trait a storage implements, and what passes through it ([`Batch`],
//!   [`Stored`], [`Arrival`], …); [`MemorySink`], a sink in memory (tests, dry runs,
//!   examples).
//! - [`RunReport`], the typed report of a run.
//! - [`SinkHandler`], the webhook path into the same [`Sink`]: an `svc_receiver::EventHandler`
//!   that reads each announced call and stores it, so a call lands in the tenant's tables once
//!   whichever path brings it.
//! - [`time`]: timestamps and durations as the contract and the store write them.
//! - `testing` (feature `testing`): the conformance suite of the [`Sink`] trait, for a
//!   tenant's tests of its own sink.
//!
//! Receiving itself (verification, dedupe, the durable inbox, the HTTP route) is
//! `svc-receiver`'s: a tenant hands it a [`SinkHandler`] over its sink. `svc-cli webhook serve`
//! is the same receiver with a [`SinkHandler`] over `svc-cli`'s store (its `--fetch`), which
//! first records every delivery, scored or not, in the store's ledger; and health and metrics
//! endpoints.

#![warn(missing_docs)]

/// The crate's README, whose examples are compiled as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod engine;
mod memory;
mod report;
mod sink;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;
mod webhook;
mod window;

pub use engine::{
    CLOCK_SKEW_WARNING, DEFAULT_CONCURRENCY, DEFAULT_DELIVERY_GRACE, MAX_FAILURE_ATTEMPTS,
    MAX_PLAUSIBLE_SKEW, Options, Progress, Reconciler, RunError, RunGuard, StopReason,
};
pub use memory::{MemoryCall, MemoryError, MemorySink};
pub use report::{Counts, FailedCall, LISTED_IDS, Outcome, RunReport, ServiceClock, SourceReport};
pub use sink::{
    Arrival, Batch, BatchContext, CallFailure, Delivered, FetchedCall, KnownCall, LockError, RunId,
    Sink, Stored, Version, WindowEnd, first_scored, listed_at, scored_at,
};
pub use webhook::{SinkHandler, WebhookError};
pub use window::{
    DEFAULT_FIRST_RUN, DEFAULT_OVERLAP_REAL, DEFAULT_OVERLAP_ROLEPLAY, DEFAULT_REFRESH_REAL,
    default_overlap,
};
