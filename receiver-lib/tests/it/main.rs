//! Integration tests of svc-receiver: one binary, one module per area.

mod axum_e2e;
mod dedup;
mod direct;
mod docs;
mod exactly_once;
mod helpers;
mod inbox;
mod logs;
#[cfg(feature = "metrics")]
mod metrics;
#[cfg(feature = "postgres")]
mod pg_batch;
#[cfg(feature = "postgres")]
mod pg_network;
mod reload;
#[cfg(feature = "postgres")]
mod replicas;
mod request;
mod rotation;
mod serve;
mod store_suite;
mod tower_axum;
mod tower_hyper;
#[cfg(feature = "opentelemetry")]
mod traces;
mod worker;
