//! Receive `call.scored` webhooks from the Roleplay and Call-Scoring Service: signature
//! verification, deduplication on `X-Service-Webhook-Id`, replay protection, typed events, a
//! durable inbox, axum integration and a tower layer.
//!
//! With the default features, the crate's README follows: the durable inbox, direct mode and
//! exactly once, with their examples compiled as this crate's doc tests. Beside it in the
//! repository, OPERATIONS.md (rotation, logs, metrics, the statuses answered) and POSTGRES.md
//! (replicas on one database).
//!
#![cfg_attr(
    all(feature = "axum", feature = "sqlite", feature = "reload"),
    doc = include_str!("../README.md")
)]
#![cfg_attr(
    not(all(feature = "axum", feature = "sqlite", feature = "reload")),
    doc = "(The README, with the examples, is part of these docs with the default features: \
           `axum`, `sqlite` and `reload`.)\n"
)]
//!
//! # What a delivery is checked for
//!
//! Verification is `svc-contract`'s ([`svc_contract::Verifier`]: the signature header, the
//! timestamp's tolerance, the HMAC under the keyring, then the typed event). The routes add:
//!
//! 1. The body is at most the verifier's `max_body_bytes` (64 KiB by default) → else 413,
//!    before anything else is read.
//! 2. After verification, the webhook id is claimed in a [`dedup::DedupStore`] (or stored in
//!    the inbox): a duplicate answers 200 without running user code again; the same signature
//!    under another id is a replay → 401. For exactly-once effects your code also records the
//!    delivery in its own transaction (`exactly_once`).
//!
//! Detailed reasons (with hints such as "the body looks re-serialised") go to `tracing`, each
//! event of a delivery inside a `webhook_delivery` span carrying its `webhook_id`; the sender
//! only ever gets a fixed status and a fixed short text.
//!
//! # Layout
//!
//! - [`dedup`]: the [`dedup::DedupStore`] trait (claim, complete, release) and the bounded,
//!   expiring in-memory store.
//! - `inbox` (feature `sqlite` or `postgres`): the `inbox::Inbox` trait of the durable
//!   inboxes, and the workers that hand their entries to user code.
//! - `sqlite` (feature `sqlite`) and `postgres` (feature `postgres`): the durable stores.
//! - `exactly_once` (feature `sqlite` or `postgres`): recording a delivery in your own
//!   transaction, beside your writes.
//! - `handler`: the [`EventHandler`] user code implements (any async closure) and [`Received`].
//! - `axum` (feature `axum`): the routes and the `VerifiedWebhook` extractor.
//! - `tower` (feature `tower`): `VerifyWebhookLayer`, verifying in front of any tower service,
//!   and `Verified`, what it hands on (an axum extractor too, with feature `axum`).
//! - `receive` (feature `axum` or `tower`): what both share: the checks of a request and
//!   `ReceiveError`, every way receiving one can fail, with its status and fixed text.
//! - [`reload`]: a secret file reloaded on change and on SIGHUP.
//! - [`metrics`]: the names of what is counted and measured (feature `metrics`).
//! - `store_error`: [`StoreError`], why a durable store could not answer.
//! - `trace_context`: [`TraceParent`], the sender's W3C trace context, linked to the delivery's
//!   span with the feature `opentelemetry` and kept with inbox entries.

#![warn(missing_docs)]

#[cfg(feature = "axum")]
pub mod axum;
pub mod dedup;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod exactly_once;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod inbox;
pub mod metrics;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod reload;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(feature = "tower")]
pub mod tower;

mod handler;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod pruner;
#[cfg(any(feature = "axum", feature = "tower"))]
mod receive;
mod record_check;
mod store_error;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod throttle;
mod trace_context;

pub use handler::{EventHandler, Received};
#[cfg(any(feature = "axum", feature = "tower"))]
pub use receive::ReceiveError;
pub use store_error::StoreError;
pub use trace_context::{TRACEPARENT_HEADER, TraceParent};

/// OPERATIONS.md (rotation, logs, metrics, answers), whose examples are compiled as doc tests.
#[doc = include_str!("../OPERATIONS.md")]
#[cfg(all(doctest, feature = "reload"))]
pub struct OperationsDoctests;

/// POSTGRES.md (replicas, exactly once on PostgreSQL), compiled as doc tests.
#[doc = include_str!("../POSTGRES.md")]
#[cfg(all(doctest, feature = "postgres"))]
pub struct PostgresDoctests;
