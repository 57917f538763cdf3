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
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::traces::{Traces, TracesError};

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
    install(format, default_filter, None);
}

/// Like [`init`], and exports the process's spans as `service_name` when the environment asks
/// for it (see [`crate::traces`]; feature `otlp`). Keep the returned [`Traces`] until `main`
/// returns: dropping it sends the spans not sent yet.
///
/// # Errors
/// The environment asks for an export this build cannot make (a gRPC protocol, an endpoint
/// that is not a URL); nothing is installed then.
pub fn init_with_traces(
    format: LogFormat,
    default_filter: &str,
    service_name: &str,
) -> Result<Traces, TracesError> {
    #[cfg(feature = "otlp")]
    if let Some(provider) = crate::traces::otlp::provider(service_name)? {
        let (layer, traces) = crate::traces::otlp::layer(provider, service_name);
        install(format, default_filter, Some(layer));
        return Ok(traces);
    }
    let _ = service_name;
    install(format, default_filter, None);
    Ok(Traces::off())
}

/// A layer of the process's subscriber.
type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// The log lines (filtered by `RUST_LOG` or `default_filter`) and, beside them with a filter of
/// their own, `traces`. A second call does nothing.
fn install(format: LogFormat, default_filter: &str, traces: Option<BoxedLayer>) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let lines: BoxedLayer = match format {
        LogFormat::Text => {
            // Colour only on a terminal, and never with NO_COLOR: a log sent to a file or a
            // journal stays plain text.
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none();
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .with_filter(filter)
                .boxed()
        }
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines)
            .with_filter(filter)
            .boxed(),
    };
    let layers: Vec<BoxedLayer> = std::iter::once(lines).chain(traces).collect();
    let _ = tracing_subscriber::registry().with(layers).try_init();
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
