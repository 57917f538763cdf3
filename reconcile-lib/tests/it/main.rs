//! Tests of `svc-reconcile`.
//!
//! - [`sink_suite`]: the conformance suite of the [`svc_reconcile::Sink`] trait
//!   (`svc_reconcile::testing`), run over the memory sink and a tenant's minimal sink.
//! - [`engine`]: runs against `svc-fixtures`' mocks into the memory sink: what a run stores,
//!   when it stops, what the watermark does.
//! - [`webhook`]: `SinkHandler` behind `svc-receiver`'s direct route, against the same mocks.
//! - [`own_sink`]: a tenant's sink with only the required methods, fed by both paths: lost
//!   webhooks reported as recovered with no ledger of its own.

mod engine;
mod own_sink;
mod sink_suite;
mod webhook;
