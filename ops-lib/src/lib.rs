//! `svc-ops`: what the long-running processes of the workspace (`svc-service serve`, and
//! `svc-cli webhook serve`, `reconcile` and `sandbox`) share with their operators, written once.
//!
//! # Layout
//! - [`logs`]: one JSON object per log line (`time`, `level`, `target`, `message`, `fields`),
//!   the same shape from every process so that one pipeline reads them all.
//! - [`shutdown`]: the signal that stops a server: Ctrl-C or SIGTERM.
//! - [`errors`]: an error and its causes on one line, each said once.

pub mod errors;
pub mod logs;
pub mod shutdown;
