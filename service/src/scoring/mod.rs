//! Scoring finished calls and announcing the outcome.
//!
//! Layout:
//! - [`evaluate`]: the pure step: a finished call's transcript in, a score or a failure reason
//!   out, plus the `call.scored` webhook body for that outcome.
//! - [`worker`]: scores ended calls and records each outcome with its queued webhook.

pub mod evaluate;
pub mod worker;
