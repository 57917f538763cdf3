//! The log set-up of the workspace's processes, written once: `--log-format text|json` and the
//! subscriber it installs. Text is human-readable (colour only on a terminal, never with
//! `NO_COLOR`); JSON is one object per line for a log pipeline: `time` (RFC 3339, UTC, ms),
//! `level`, `target`, `message` and `fields` (the event's own and those of the spans it is in,
//! such as the `webhook_id` of a delivery; the event's win on a clash).

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (colour only on a terminal, never with `NO_COLOR`).
    #[default]
    Text,
    /// One JSON object per line: time, level, target, message, fields.
    Json,
}

/// Installs the process's log subscriber on stderr in `format`, filtered by `RUST_LOG`, else by
/// `default_filter` (such as `info`). A second call does nothing.
pub fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    match format {
        LogFormat::Text => {
            // Colour only on a terminal, and never with NO_COLOR: a log sent to a file or a
            // journal stays plain text.
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none();
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .try_init();
        }
        LogFormat::Json => init_json(filter),
    }
}

/// Installs the process's log subscriber on stderr writing [`JsonLines`], filtered by
/// `filter`. A second call does nothing.
fn init_json(filter: EnvFilter) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .fmt_fields(JsonFields::new())
        .event_format(JsonLines)
        .try_init();
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
