//! Tests of `svc-store` through its public API (the unit tests under `src/tests` reach into
//! its tables).
//!
//! - [`sink_suite`]: the conformance suite of the [`svc_reconcile::Sink`] trait
//!   (`svc_reconcile::testing`), every behaviour, over a SQLite store and a PostgreSQL one.

mod sink_suite;
