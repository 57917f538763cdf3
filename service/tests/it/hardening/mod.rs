//! The service hardened against abuse, and the contract deviations an audit found.
//! Each test failed before its fix.

mod abuse;
mod connections;
mod contract;
mod fairness;
mod links;
mod live_limits;
mod lockout;
mod pipes;
