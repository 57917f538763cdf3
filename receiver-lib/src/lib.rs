//! Receive `call.scored` webhooks from the Roleplay and Call-Scoring Service: signature
//! verification, deduplication on `X-Service-Webhook-Id`, typed events and axum integration.
//!
//! # Layout
//!
//! - [`signature`]: [`sign`] and the strict `X-Service-Signature` parser (its policy is documented there).
//! - `secret`: [`SigningSecret`] and the [`Keyring`] of accepted secrets (with expiry, for rotation).
//! - `verify`: the framework-agnostic [`Verifier`]: raw bytes + header + now → [`VerifiedDelivery`].
//! - `error`: [`VerifyError`] and its mapping to HTTP statuses.
//! - `clock`: the injectable [`Clock`] every time rule reads.
//! - [`dedup`]: the [`dedup::DedupStore`] trait (claim → new / duplicate / in flight / replayed,
//!   complete, release) and the bounded, expiring in-memory store.
//! - [`sqlite`] (feature `sqlite`): the durable dedup store and the durable inbox, written
//!   through one group-commit thread per file (`synchronous=FULL`).
//! - `handler`: the [`EventHandler`] user code implements (any async closure) and [`Received`].
//! - [`axum`] (feature `axum`): ready POST routes, direct mode and durable inbox mode.
//! - `event`: the typed [`CallScored`] body, with open [`CallSource`] and [`FailureReason`] sets.

#[cfg(feature = "axum")]
pub mod axum;
pub mod dedup;
pub mod signature;
#[cfg(feature = "sqlite")]
pub mod sqlite;

mod clock;
mod handler;

mod error;
mod event;
mod secret;
mod verify;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{MalformedHeader, MismatchHint, VerifyError};
pub use event::{CALL_SCORED, CallScored, CallSource, FailureReason};
pub use handler::{EventHandler, Received};
pub use secret::{Keyring, SECRET_PREFIX, SecretError, SigningSecret};
pub use signature::sign;
pub use verify::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_TOLERANCE, Tolerance, VerifiedDelivery, Verifier,
};
