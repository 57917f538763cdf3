//! What this workspace's own tests share, and tenants' tests do not need (those use the
//! published `svc-fixtures`): starting the service and `svc-cli webhook serve`, a retry policy
//! that records its waits, and log capture.
//!
//! # Layout
//! - `service` (feature `service`): the real service on `127.0.0.1:0`, stopped when dropped.
//! - `retry` (feature `client`): svc-client's retry policy with recorded, instant sleeps, and a
//!   client for a wiremock server with the fixture key.
//! - [`logs`]: the log lines written on this thread while a test runs.
//! - [`webhook_serve`]: `svc-cli webhook serve` (or any command that logs
//!   `receiving webhooks on …`) started as a process, waited for until it listens.

#![warn(missing_docs)]

pub mod logs;
#[cfg(feature = "client")]
pub mod retry;
#[cfg(feature = "service")]
pub mod service;
pub mod webhook_serve;
