//! `serve --log-format text|json`: plain text by default, or one JSON object per line for a
//! log pipeline, the same shape as `svc-cli`'s `--log-format json` ([`svc_ops::logs`] writes
//! both), so one pipeline reads both.

pub use svc_ops::logs::{JsonLines, LogFormat};

/// Installs the process's log subscriber on stderr, filtered by `RUST_LOG` (default: `info`),
/// and exports its spans as `svc-service` when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (keep the
/// returned guard until the process ends: dropping it sends the last spans). A second call
/// installs nothing.
///
/// # Errors
/// The OTLP variables ask for what this build cannot do (see [`svc_ops::traces`]).
pub fn init(format: LogFormat) -> Result<svc_ops::traces::Traces, svc_ops::traces::TracesError> {
    svc_ops::logs::init_with_traces(format, "info", "svc-service")
}
