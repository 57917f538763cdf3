//! What this workspace's own tests share, and tenants' tests do not need (those use the
//! published `svc-fixtures`): starting the service and `svc-cli webhook serve`, a retry policy
//! that records its waits, log capture, a fault-injecting proxy, a tmpfs that fills up, a fresh
//! PostgreSQL schema per test, and the skip line of a test that cannot run here.
//!
//! # Layout
//! - `service` (feature `service`): the real service on `127.0.0.1:0`, stopped when dropped.
//! - `retry` (feature `client`): svc-client's retry policy with recorded, instant sleeps, and a
//!   client for a wiremock server with the fixture key.
//! - [`logs`]: the log lines written on this thread while a test runs.
//! - [`webhook_serve`]: `svc-cli webhook serve` (or any command that logs
//!   `receiving webhooks on …`) started as a process, waited for until it listens.
//! - `postgres` (feature `postgres`): a fresh PostgreSQL schema per test, on the server named by
//!   `SVC_TEST_POSTGRES_URL` (tests skip loudly without it, and fail with
//!   `SVC_REQUIRE_POSTGRES=1`), and the URL of that server through a [`proxy`].
//! - [`ports`]: loopback ports named before their server starts, out of the range port 0 and
//!   outgoing connections take from.
//! - [`proxy`]: a fault-injecting TCP proxy (latency, a stall mid-body, resets, a black hole),
//!   switched at run time, for tests of a slow or lossy network.
//! - [`tmpfs`]: a small real file system for full-disk tests, mounted by the test, filled to
//!   its last byte and freed again (skipped with a [`skip`] line where it cannot be mounted).
//! - [`skip`]: how a test that cannot run here says so, past the test harness's capture.

#![warn(missing_docs)]

pub mod logs;
pub mod ports;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod proxy;
#[cfg(feature = "client")]
pub mod retry;
#[cfg(feature = "service")]
pub mod service;
pub mod skip;
pub mod tmpfs;
pub mod webhook_serve;
