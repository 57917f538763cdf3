//! Receive `call.scored` webhooks from the Roleplay and Call-Scoring Service: signature
//! verification, deduplication on `X-Service-Webhook-Id`, replay protection, typed events, a
//! durable inbox and axum integration.
//!
//! With the default features, the crate's README follows: the durable inbox example, direct
//! mode, the verify-only path, rotation, logs, the statuses answered and the benchmark
//! figures. Its examples are compiled as this crate's doc tests.
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
//! 1. The body is at most [`Verifier::max_body_bytes`] (64 KiB by default) → else 413.
//! 2. `X-Service-Signature` is present once and strictly `t=<digits>,v1=<64 hex>` (policy in
//!    [`signature`]) → else 400.
//! 3. `t` is within the tolerance of now, 5 minutes either way by default
//!    ([`Tolerance::Disabled`] is the only way to turn the check off) → else 401.
//! 4. Some `v1` equals HMAC-SHA256 of `<t>.<raw body bytes>` under an active key of the
//!    [`Keyring`], compared in constant time → else 401. The key is the **whole** `whsec_…`
//!    string exactly as issued (its UTF-8 bytes, prefix included; nothing is decoded).
//! 5. Only then is the body decoded into [`CallScored`] → else 400 (an event other than
//!    `call.scored` too, unless the verifier acknowledges unknown events: [`UnknownEvents`]).
//! 6. The webhook id is claimed in a [`dedup::DedupStore`] (or stored in the inbox): a
//!    duplicate answers 200 without running user code again; the same signature under another
//!    id is a replay → 401. For exactly-once effects your code also records the delivery in
//!    its own transaction ([`exactly_once`]).
//!
//! Detailed reasons (with hints such as "the body looks re-serialised") go to `tracing`, each
//! event of a delivery inside a `webhook_delivery` span carrying its `webhook_id`; the sender
//! only ever gets a fixed status and a fixed short text.
//!
//! # Layout
//!
//! - [`signature`]: [`sign`] and the strict `X-Service-Signature` parser (its policy is
//!   documented there), with a fast path for the form the service sends.
//! - `secret`: [`SigningSecret`] (its keyed HMAC state, kept for every verification) and the
//!   [`Keyring`] of accepted secrets (with expiry, for rotation), replaceable at run time
//!   through a [`SharedKeyring`].
//! - [`reload`]: [`reload::SecretFile`], a secret file reloaded into a [`SharedKeyring`] on
//!   change and on SIGHUP; how rotation, the sender's retry and reconcile fit together.
//! - `verify`: the framework-agnostic [`Verifier`]: raw bytes + header + now →
//!   [`VerifiedDelivery`]; [`verify_request`], headers + body → [`CallScored`] in one call.
//! - `delivery`: [`VerifiedDelivery`] and decoding it into the typed event.
//! - `error`: [`VerifyError`] and its mapping to HTTP statuses (`http::StatusCode`).
//! - `clock`: the injectable [`Clock`] every time rule reads.
//! - [`dedup`]: the [`dedup::DedupStore`] trait (claim → new / duplicate / in flight / replayed,
//!   complete, release) and the bounded, expiring in-memory store.
//! - `inbox` (feature `sqlite` or `postgres`): the `inbox::Inbox` trait every durable inbox
//!   implements, its shared types, and the workers that hand inbox entries to user code.
//! - `sqlite` (feature `sqlite`): the durable dedup store and the durable inbox, written
//!   through one group-commit thread per file (`synchronous=FULL`).
//! - `postgres` (feature `postgres`): the same two stores in a PostgreSQL database that
//!   several replicas share (a queue their workers drain together, leases that another
//!   replica takes over), migrated on open.
//! - [`postgres_url`] (every feature set): telling a database URL from a file path, and
//!   writing one with every credential hidden.
//! - `exactly_once` (feature `sqlite` or `postgres`): your code records the delivery in its
//!   own transaction, beside its writes, so that they commit exactly once.
//! - `handler`: the [`EventHandler`] user code implements (any async closure) and [`Received`].
//! - `axum` (feature `axum`): ready POST routes (direct mode, durable inbox mode), the
//!   `VerifiedWebhook` extractor, and `Server`, which serves them with connection limits and
//!   stops them and the inbox workers under one graceful shutdown.
//! - `event`: the typed [`CallScored`] body, with open [`CallSource`] and [`FailureReason`] sets.
//! - [`metrics`]: the names of what the routes, stores and workers count and measure, through
//!   the `metrics` facade with the feature `metrics` (off by default).

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
pub mod postgres_url;
pub mod reload;
pub mod signature;
#[cfg(feature = "sqlite")]
pub mod sqlite;

mod clock;
mod delivery;
mod error;
mod event;
mod handler;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod pruner;
mod secret;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod throttle;
mod verify;

pub use clock::{Clock, ManualClock, SystemClock};
pub use delivery::VerifiedDelivery;
pub use error::{MalformedHeader, MismatchHint, VerifyError};
pub use event::{CALL_SCORED, CallScored, CallSource, FailureReason};
pub use handler::{EventHandler, Received};
pub use secret::{Keyring, SECRET_PREFIX, SecretError, SharedKeyring, SigningSecret};
pub use signature::sign;
pub use verify::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_TOLERANCE, SIGNATURE_HEADER, Tolerance, UnknownEvents,
    Verifier, WEBHOOK_ID_HEADER, verify_request,
};
