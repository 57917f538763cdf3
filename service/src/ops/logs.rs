//! `serve --log-format text|json`: plain text by default, or one JSON object per line for a
//! log pipeline: `time` (RFC 3339, UTC, ms), `level`, `target`, `message` and `fields` (the
//! event's own and those of the spans it is in; the event's win on a clash). The same shape as
//! `svc-cli`'s `--log-format json` ([`svc_ops::logs`] writes both), so one pipeline reads both.

pub use svc_ops::logs::JsonLines;

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line: time, level, target, message, fields.
    Json,
}

/// Installs the process's log subscriber on stderr, filtered by `RUST_LOG` (default: `info`),
/// in colour only when stderr is a terminal and `NO_COLOR` is unset. A second call does nothing.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    match format {
        LogFormat::Text => {
            // Colour only on a terminal, and never with NO_COLOR (as svc-cli): a log sent to a
            // file or a journal stays plain text.
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none();
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .try_init();
        }
        LogFormat::Json => svc_ops::logs::init_json(filter),
    }
}
