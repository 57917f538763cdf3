//! The shared pieces of the Roleplay and Call-Scoring Service v1 contract, with no I/O: what
//! the typed client, the webhook receiver and the service all speak.
//!
//! - [`signature`]: [`sign`] and the strict `X-Service-Signature` parser (its policy is
//!   documented there).
//! - `secret`: [`SigningSecret`] (its keyed HMAC state, kept for every verification) and the
//!   [`Keyring`] of accepted secrets (with expiry, for rotation), replaceable at run time
//!   through a [`SharedKeyring`]. Secrets never appear in `Debug`, `Display` or errors.
//! - `verify`: the framework-agnostic [`Verifier`]: raw bytes + header + now →
//!   [`VerifiedDelivery`]; [`verify_request`], headers + body → [`CallScored`] in one call.
//! - `error`: [`VerifyError`] and its one mapping to HTTP statuses (`http::StatusCode`).
//! - `event`: the typed [`CallScored`] body, with open [`CallSource`] and [`FailureReason`]
//!   sets.
//! - `webhook_id`: [`WebhookId`], the delivery's idempotency key.
//! - `clock`: the injectable [`Clock`] every time rule reads.
//!
//! # What a delivery is checked for
//!
//! 1. `X-Service-Signature` is present once and strictly `t=<digits>,v1=<64 hex>` (policy in
//!    [`signature`]) → else 400.
//! 2. `t` is within the tolerance of now, 5 minutes either way by default
//!    ([`Tolerance::Disabled`] is the only way to turn the check off) → else 401.
//! 3. Some `v1` equals HMAC-SHA256 of `<t>.<raw body bytes>` under an active key of the
//!    [`Keyring`], compared in constant time → else 401. The key is the **whole** `whsec_…`
//!    string exactly as issued (its UTF-8 bytes, prefix included; nothing is decoded).
//! 4. Only then is the body decoded into [`CallScored`] → else 400 (an event other than
//!    `call.scored` too, unless the verifier acknowledges unknown events: [`UnknownEvents`]).
//!
//! A receiver (`svc-receiver`) adds the body's size limit, deduplication on the webhook id and
//! replay protection on the signature.

#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod signature;

mod clock;
mod delivery;
mod error;
mod event;
mod secret;
mod verify;
mod webhook_id;

pub use clock::{Clock, ManualClock, SystemClock};
pub use delivery::VerifiedDelivery;
pub use error::{MalformedHeader, MismatchHint, VerifyError};
pub use event::{CALL_SCORED, CallScored, CallSource, FailureReason};
pub use secret::{Keyring, SECRET_PREFIX, SecretError, SharedKeyring, SigningSecret};
pub use signature::sign;
pub use verify::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_TOLERANCE, SIGNATURE_HEADER, Tolerance, UnknownEvents,
    Verifier, WEBHOOK_ID_HEADER, signature_header, verify_request,
};
pub use webhook_id::{InvalidWebhookId, MAX_WEBHOOK_ID_LEN, WebhookId};
