//! `--log-format` of the long-running commands (`webhook serve`, `reconcile`): plain text by
//! default, or one JSON object per line for a log pipeline: `time` (RFC 3339, UTC, ms),
//! `level`, `target`, `message` and `fields` (the event's own, and those of the spans it is in,
//! such as the `webhook_id` of a delivery; the event's win on a clash).
//!
//! In JSON mode every line on stderr is such an object: the command's own messages ("receiving
//! webhooks on …", a run's notes, a fatal error) are logged as events instead of printed, and
//! the default level is `info` (`RUST_LOG` still decides). Nothing logged carries a credential.

use std::fmt;

use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use crate::commands::Command;
use crate::commands::webhook::WebhookCommand;
use crate::output::Output;

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (colour only on a terminal, never with `NO_COLOR`).
    #[default]
    Text,
    /// One JSON object per line: time, level, target, message, fields.
    Json,
}

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

/// The log flags of `command`: its own for the long-running ones, plain text for the others.
pub fn of(command: &Command) -> LogArgs {
    match command {
        Command::Reconcile(args) => args.log(),
        Command::Webhook(WebhookCommand::Serve(args)) => args.log(),
        _ => LogArgs::default(),
    }
}

/// Installs the process's log subscriber on stderr, filtered by `RUST_LOG` (default: `warn`
/// in text mode, `info` in JSON mode). A second call does nothing.
pub fn init(format: LogFormat) {
    let default = match format {
        LogFormat::Text => "warn",
        LogFormat::Json => "info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    match format {
        LogFormat::Text => {
            // Colour only on a terminal, and never with NO_COLOR: logs sent to a file stay
            // plain text.
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none();
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .try_init();
        }
        LogFormat::Json => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .fmt_fields(JsonFields::new())
                .event_format(JsonLines)
                .try_init();
        }
    }
}

/// Writes each event as one JSON object on one line. Span fields are read as the JSON objects
/// [`JsonFields`] records them as.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Map::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let recorded = extensions
                    .get::<FormattedFields<N>>()
                    .and_then(|f| serde_json::from_str::<Map<String, Value>>(f).ok());
                fields.extend(recorded.unwrap_or_default());
            }
        }
        let mut visitor = Fields::default();
        event.record(&mut visitor);
        fields.extend(visitor.fields);
        let metadata = event.metadata();
        let line = Line {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            level: metadata.level().as_str(),
            target: metadata.target(),
            message: visitor.message.unwrap_or_default(),
            fields,
        };
        let line = serde_json::to_string(&line).map_err(|_| fmt::Error)?;
        writeln!(writer, "{line}")
    }
}

/// One line, its keys in this order.
#[derive(Serialize)]
struct Line<'a> {
    time: String,
    level: &'a str,
    target: &'a str,
    message: String,
    fields: Map<String, Value>,
}

/// An event's message and its other fields as JSON values.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    fields: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                Value::String(text) => text,
                other => other.to_string(),
            });
        } else {
            self.fields.insert(field.name().to_owned(), value);
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
}
