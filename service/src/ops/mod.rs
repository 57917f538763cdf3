//! Operations: what ops scrape, probe and ship from `svc-service serve`.
//!
//! - [`metrics`]: this server's own Prometheus recorder (one per [`crate::run`], never the
//!   process-wide one, so servers embedded side by side in one process keep their figures
//!   apart): requests by route and status, their latency, webhook deliveries by outcome per
//!   tenant, and, read from the database at each scrape, the outbox's pending deliveries and
//!   the live calls per tenant.
//! - [`http`]: the middleware that counts requests, `GET /healthz`, and the `/metrics`
//!   server on `--metrics-listen` (off by default).
//! - [`logs`]: `--log-format text|json`.

pub mod http;
pub mod logs;
pub mod metrics;
