//! `--log-format` of the long-running commands (`webhook serve`, `reconcile`): plain text by
//! default, or one JSON object per line for a log pipeline: `time` (RFC 3339, UTC, ms),
//! `level`, `target`, `message` and `fields` (the event's own, and those of the spans it is in,
//! such as the `webhook_id` of a delivery; the event's win on a clash).
//!
//! In JSON mode every line on stderr is such an object: the command's own messages ("receiving
//! webhooks on …", a run's notes, a fatal error) are logged as events instead of printed, and
//! the default level is `info` (`RUST_LOG` still decides). Nothing logged carries a credential.
//! The lines are written by [`svc_ops::logs`], as the service's are.

use clap::Args;
pub use svc_ops::logs::LogFormat;

use crate::output::Output;

/// The `--log-format` flag, flattened into each long-running command's flags.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct LogArgs {
    /// How logs are written on stderr: plain text, or one JSON object per line (time, level,
    /// target, message, fields; the command's own messages too, and the default level is info)
    #[arg(long, value_enum, default_value_t = LogFormat::Text, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

impl LogArgs {
    /// A message for whoever runs the command: a line on stderr in text mode, an `info`
    /// event in JSON mode (so that stderr stays one JSON object per line).
    pub fn note(&self, out: &Output, message: &str) {
        match self.log_format {
            LogFormat::Text => out.note(message),
            LogFormat::Json => tracing::info!(target: "svc_cli", "{message}"),
        }
    }

    /// Something to fix that does not stop the command: a line on stderr in text mode, a
    /// `warn` event in JSON mode.
    pub fn warn(&self, message: &str) {
        match self.log_format {
            LogFormat::Text => crate::output::stderr_line(message),
            LogFormat::Json => tracing::warn!(target: "svc_cli", "{message}"),
        }
    }

    /// Why the command failed: a line on stderr in text mode, an `error` event in JSON mode.
    pub fn error(&self, message: &str) {
        match self.log_format {
            LogFormat::Text => crate::output::stderr_line(message),
            LogFormat::Json => tracing::error!(target: "svc_cli", "{message}"),
        }
    }
}

/// Installs the process's log subscriber on stderr, filtered by `RUST_LOG` (default: `warn`
/// in text mode, `info` in JSON mode), and exports its spans as `svc-cli` when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set (see [`svc_ops::traces`]; keep the returned guard until
/// the process ends: dropping it sends the last spans). A second call installs nothing.
///
/// # Errors
/// The OTLP variables ask for what this build cannot do (a gRPC protocol, say).
pub fn init(format: LogFormat) -> Result<svc_ops::traces::Traces, svc_ops::traces::TracesError> {
    let default = match format {
        LogFormat::Text => "warn",
        LogFormat::Json => "info",
    };
    svc_ops::logs::init_with_traces(format, default, "svc-cli")
}
