//! The parts of the reconcile benchmark (`benches/reconcile.rs`).
//!
//! # Layout
//! - [`service`]: the compact service in this process, its tenants, seeding, re-dispositions
//!   and the ceiling pass.
//! - [`bare_sink`]: the least a SQLite sink can be (a detail per id in a bare table).
//! - [`calls`]: the scored calls seeded (transcripts, scores, times).
//! - [`child`]: one `svc-cli` process, its wall time, peak RSS and output.
//! - [`machine`]: `uptime` and where the CPU time went over the run.

pub(crate) mod bare_sink;
pub(crate) mod calls;
pub(crate) mod child;
pub(crate) mod machine;
pub(crate) mod service;
