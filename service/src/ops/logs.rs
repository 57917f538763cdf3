//! `serve --log-format text|json`: plain text by default, or one JSON object per line for a
//! log pipeline, the same shape as `svc-cli`'s `--log-format json` ([`svc_ops::logs`] writes
//! both), so one pipeline reads both.

pub use svc_ops::logs::{JsonLines, LogFormat};

/// Installs the process's log subscriber on stderr, filtered by `RUST_LOG` (default: `info`).
/// A second call does nothing.
pub fn init(format: LogFormat) {
    svc_ops::logs::init(format, "info");
}
