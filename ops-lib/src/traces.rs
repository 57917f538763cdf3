//! Traces: the spans of a process exported with OpenTelemetry's OTLP exporter, and the W3C
//! `traceparent` that carries a trace from one process (or one queued row) to the next.
//!
//! With the feature `otlp` and `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, [`crate::logs::init_with_traces`] adds an
//! OpenTelemetry layer beside the log lines: spans at `info` and above are batched and sent
//! over OTLP/HTTP, protobuf by default or JSON with `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`
//! (gRPC is not built in). The other standard variables apply (`OTEL_SERVICE_NAME`,
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_SCHEDULE_DELAY`, …). [`Traces`] flushes what is
//! left when it is dropped, at the end of `main`.
//!
//! Without the feature, or with tracing off, [`traceparent`] is `None` and
//! [`continue_trace`] does nothing: the callers need no `cfg` of their own.

use thiserror::Error;

/// The name of the W3C Trace Context header (lowercase, as HTTP/2 sends it).
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// Why tracing could not be set up as the environment asks. The process should stop with the
/// message: an operator who set the variables expects the traces.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TracesError {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` (or its `_TRACES_` form) names a protocol not built in.
    #[error("{variable}={value:?} is not supported: use http/protobuf (the default) or http/json")]
    Protocol {
        /// The variable that was read.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// The exporter could not be built (an endpoint that is not a URL, say).
    #[error("the OTLP exporter could not be built: {0}")]
    Exporter(String),
}

/// The process's trace export, flushed and shut down when dropped (keep it until `main`
/// returns). [`Traces::off`] when nothing is exported.
#[derive(Debug, Default)]
pub struct Traces {
    #[cfg(feature = "otlp")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Traces {
    /// No export.
    pub fn off() -> Self {
        Self::default()
    }

    /// Whether spans are exported.
    pub fn is_on(&self) -> bool {
        #[cfg(feature = "otlp")]
        return self.provider.is_some();
        #[cfg(not(feature = "otlp"))]
        false
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        #[cfg(feature = "otlp")]
        if let Some(provider) = self.provider.take()
            && let Err(error) = provider.shutdown()
        {
            tracing::warn!(%error, "the last spans could not be exported");
        }
    }
}

/// The `traceparent` of `span` (`00-<trace id>-<span id>-<flags>`), to send with a request or
/// keep with a queued row; `None` when spans are not traced (no feature `otlp`, tracing off, or
/// the span filtered out).
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    #[cfg(feature = "otlp")]
    return otlp::traceparent(span);
    #[cfg(not(feature = "otlp"))]
    {
        let _ = span;
        None
    }
}

/// Makes `span` (just created, not yet entered) a child of the span `traceparent` names, so
/// that it joins that trace. A malformed `traceparent` is ignored (the span starts a trace of
/// its own), as is one given when spans are not traced.
pub fn continue_trace(span: &tracing::Span, traceparent: &str) {
    #[cfg(feature = "otlp")]
    otlp::continue_trace(span, traceparent);
    #[cfg(not(feature = "otlp"))]
    let _ = (span, traceparent);
}

/// The exporter, and the layer that feeds it.
#[cfg(feature = "otlp")]
pub(crate) mod otlp {
    use std::collections::HashMap;

    use opentelemetry::propagation::TextMapPropagator as _;
    use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
    use opentelemetry_otlp::{Protocol, WithExportConfig as _};
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing::Subscriber;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    use tracing_subscriber::Layer;
    use tracing_subscriber::registry::LookupSpan;

    use super::{Traces, TracesError};

    /// The variables that switch export on, in the order they are read.
    const ENDPOINTS: [&str; 2] = [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ];
    /// The variables that choose the protocol, in the order they are read.
    const PROTOCOLS: [&str; 2] = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ];

    fn set(variable: &str) -> Option<String> {
        std::env::var(variable)
            .ok()
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
    }

    /// The protocol the environment asks for (http/protobuf when it names none).
    fn protocol() -> Result<Protocol, TracesError> {
        let Some((variable, value)) = PROTOCOLS
            .into_iter()
            .find_map(|variable| set(variable).map(|value| (variable, value)))
        else {
            return Ok(Protocol::HttpBinary);
        };
        match value.as_str() {
            "http/protobuf" => Ok(Protocol::HttpBinary),
            "http/json" => Ok(Protocol::HttpJson),
            _ => Err(TracesError::Protocol { variable, value }),
        }
    }

    /// The tracer provider the environment asks for, with `service_name` unless
    /// `OTEL_SERVICE_NAME` names the service; `None` when no endpoint is set or
    /// `OTEL_SDK_DISABLED=true`.
    pub(crate) fn provider(service_name: &str) -> Result<Option<SdkTracerProvider>, TracesError> {
        let disabled = set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if disabled
            || ENDPOINTS
                .into_iter()
                .all(|variable| set(variable).is_none())
        {
            return Ok(None);
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(protocol()?)
            .build()
            .map_err(|error| TracesError::Exporter(error.to_string()))?;
        let mut resource = opentelemetry_sdk::Resource::builder();
        if set("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(service_name.to_owned());
        }
        Ok(Some(
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource.build())
                .build(),
        ))
    }

    /// The layer that turns `tracing` spans into OpenTelemetry spans of `provider` (at `info`
    /// and above, whatever the log filter keeps), and the guard that flushes it.
    pub(crate) fn layer<S>(
        provider: SdkTracerProvider,
        service_name: &str,
    ) -> (Box<dyn Layer<S> + Send + Sync>, Traces)
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let tracer = provider.tracer(service_name.to_owned());
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO)
            .boxed();
        let traces = Traces {
            provider: Some(provider),
        };
        (layer, traces)
    }

    pub(super) fn traceparent(span: &tracing::Span) -> Option<String> {
        let context = span.context();
        let span_context = context.span().span_context().clone();
        if !span_context.is_valid() {
            return None;
        }
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&context, &mut carrier);
        carrier.remove(super::TRACEPARENT_HEADER)
    }

    pub(super) fn continue_trace(span: &tracing::Span, traceparent: &str) {
        let carrier =
            HashMap::from([(super::TRACEPARENT_HEADER.to_owned(), traceparent.to_owned())]);
        let parent = TraceContextPropagator::new().extract(&carrier);
        if parent.span().span_context().is_valid() {
            // Fails only when the span is not traced (filtered out, or no layer): nothing to join.
            let _ = span.set_parent(parent);
        }
    }
}

#[cfg(all(test, feature = "otlp"))]
mod tests {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::{continue_trace, traceparent};

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// Runs `f` with spans traced by an OpenTelemetry layer (nothing exported).
    fn traced<R>(f: impl FnOnce() -> R) -> R {
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f)
    }

    #[test]
    fn a_continued_span_is_in_the_parents_trace_under_an_id_of_its_own() {
        let own = traced(|| {
            let span = tracing::info_span!("webhook_attempt");
            continue_trace(&span, PARENT);
            traceparent(&span)
        })
        .expect("traced");
        let fields: Vec<&str> = own.split('-').collect();
        assert_eq!(fields.len(), 4, "{own}");
        assert_eq!(fields[0], "00");
        assert_eq!(
            fields[1], "4bf92f3577b34da6a3ce929d0e0e4736",
            "the parent's trace"
        );
        assert_eq!(fields[2].len(), 16);
        assert_ne!(fields[2], "00f067aa0ba902b7", "a span id of its own");
        assert_eq!(fields[3], "01", "sampled, as its parent");
    }

    #[test]
    fn a_malformed_parent_leaves_the_span_in_a_trace_of_its_own() {
        let own = traced(|| {
            let span = tracing::info_span!("webhook_attempt");
            continue_trace(&span, "00-not-a-trace-01");
            traceparent(&span)
        })
        .expect("traced");
        assert!(!own.contains("4bf92f3577b34da6a3ce929d0e0e4736"), "{own}");
    }

    #[test]
    fn an_untraced_span_has_no_traceparent() {
        let span = tracing::info_span!("webhook_attempt");
        continue_trace(&span, PARENT);
        assert_eq!(traceparent(&span), None);
    }
}
