//! `svc-ops`: what the long-running processes of the workspace (`svc-service serve`, and
//! `svc-cli webhook serve`, `reconcile` and `sandbox`) share with their operators, written once.
//! The signal that stops them is `svc_server::shutdown_signal`.
//!
//! # Layout
//! - [`logs`]: one JSON object per log line (`time`, `level`, `target`, `message`, `fields`),
//!   the same shape from every process so that one pipeline reads them all.
//! - [`errors`]: an error and its causes on one line, each said once.
//! - [`traces`]: spans exported over OTLP (feature `otlp`) and the W3C `traceparent` that
//!   carries a trace across processes and queues.

pub mod errors;
pub mod logs;
pub mod traces;
