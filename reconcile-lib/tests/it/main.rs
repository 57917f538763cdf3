//! Tests of `svc-reconcile`.
//!
//! - [`sink_suite`]: one conformance suite of the [`svc_reconcile::Sink`] trait, run over the
//!   memory sink, the SQLite store and the PostgreSQL store.
//! - [`engine`]: runs against `svc-fixtures`' mocks into the memory sink: what a run stores,
//!   when it stops, what the watermark does.

mod engine;
mod sink_suite;
