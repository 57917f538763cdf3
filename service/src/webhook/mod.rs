//! The `call.scored` webhook: the HTTP client that makes one signed delivery attempt.
//!
//! Layout:
//! - [`address`]: the addresses a webhook may not reach (internal networks), checked at
//!   connect time.
//! - [`client`]: URL policy (HTTPS only unless allowed), one attempt with a fresh signature,
//!   10-second timeout, no redirects; reports status, latency and error for the delivery log.
//! - [`fate`]: what became of a webhook (delivered, lost for good, pending), from its
//!   attempt log.
//! - [`outbox`]: the worker that delivers the durable outbox with one retry.

pub mod address;
pub mod client;
pub mod fate;
pub mod outbox;
