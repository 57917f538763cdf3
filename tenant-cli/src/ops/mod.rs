//! What operators run the long-lived commands with: logs they can ship, endpoints they can
//! probe and scrape, and a file their node_exporter can read.
//!
//! - [`logs`]: `--log-format text|json` and the subscriber behind it.
//! - [`prometheus`]: the process's `metrics` recorder, rendered in the Prometheus text format.
//! - [`health`]: `webhook serve`'s `/healthz`, `/readyz` and `/metrics`.
//! - [`textfile`]: `reconcile --metrics-file`, the run's figures written atomically.

pub mod health;
pub mod logs;
pub mod prometheus;
pub mod textfile;
