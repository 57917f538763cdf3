//! The conformance suite of the [`svc_reconcile::Sink`] trait (`svc_reconcile::testing`) over
//! this crate's sinks: every behaviour over the memory sink, and those every sink owes over a
//! tenant's sink that implements only the required methods (`own_sink`).

use svc_reconcile::MemorySink;
use svc_reconcile::testing::sink_suite;

async fn memory(_: &str) -> Option<MemorySink> {
    Some(MemorySink::default())
}

async fn own_sink(_: &str) -> Option<super::own_sink::OwnSink> {
    Some(super::own_sink::OwnSink::default())
}

sink_suite!(on_memory, memory);
sink_suite!(on_own_sink, own_sink; required);
