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
//! # Layout
//! - [`engine`]: [`Reconciler`], its [`Options`], the run lock as a type ([`RunGuard`]),
//!   progress ([`Progress`]) and why a run stops ([`RunError`]).
//! - [`sink`]: the [`Sink`] trait a storage implements, and what passes through it.
//! - [`report`]: the typed report of a run ([`RunReport`]).
//! - [`window`]: which part of the listing each source's pass reads.
//! - [`memory`]: [`MemorySink`], a sink in memory (tests, dry runs, examples).
//! - `testing` (feature `testing`): the conformance suite of the [`Sink`] trait, for a
//!   tenant's tests of its own sink.
//! - [`time`]: timestamps and durations as the contract and the store write them.
//! - [`webhook`]: [`SinkHandler`], the webhook path into the same [`Sink`]: an
//!   `svc_receiver::EventHandler` that reads each announced call and stores it, so a call lands
//!   in the tenant's tables once whichever path brings it.
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

pub mod engine;
pub mod memory;
pub mod report;
pub mod sink;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;
pub mod webhook;
pub mod window;

pub use engine::{
    CLOCK_SKEW_WARNING, DEFAULT_CONCURRENCY, DEFAULT_DELIVERY_GRACE, MAX_FAILURE_ATTEMPTS,
    MAX_PLAUSIBLE_SKEW, Options, Progress, Reconciler, RunError, RunGuard, StopReason,
};
pub use memory::MemorySink;
pub use report::{Counts, FailedCall, Outcome, RunReport, ServiceClock, SourceReport};
pub use sink::{
    Batch, BatchContext, CallFailure, Delivered, Delivery, FetchedCall, KnownCall, LockError,
    RunId, Sink, Stored, Version, WindowEnd, first_scored,
};
pub use webhook::{SinkHandler, WebhookError};
