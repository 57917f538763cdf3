//! Scoring finished calls and announcing the outcome.
//!
//! Layout:
//! - [`evaluate`]: the pure step: a finished call's transcript in, a score or a failure reason
//!   out, plus the `call.scored` webhook body for that outcome.
//! - [`real_call`]: the pure step for a real call: transcript, disposition and product line in,
//!   a score (with the compliance scorecard on a default-rubric health-plan sale) out.
//! - [`worker`]: scores ended calls and records each outcome with its queued webhook.

pub mod evaluate;
pub mod real_call;
pub mod worker;
