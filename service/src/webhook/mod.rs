//! The `call.scored` webhook: the HTTP client that makes one signed delivery attempt.
//!
//! Layout:
//! - [`client`]: URL policy (HTTPS only unless allowed), one attempt with a fresh signature,
//!   10-second timeout, no redirects; reports status, latency and error for the delivery log.
//! - [`outbox`]: the worker that delivers the durable outbox with one retry.

pub mod client;
pub mod outbox;
