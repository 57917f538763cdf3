//! The W3C Trace Context a delivery arrives with: the sender's `traceparent` header, which
//! names the span of its attempt (`00-<trace id>-<span id>-<flags>`). It is not part of the
//! contract and not signed: a delivery without one, or with a malformed one, is received the
//! same way, just not linked to the sender's trace.
//!
//! The routes give the delivery's `webhook_delivery` span that parent, and the durable inboxes
//! keep it with the entry, so that the worker's span continues the same trace later. Linking
//! a `tracing` span to a remote parent is OpenTelemetry's: with the feature `opentelemetry`
//! the crate does it through `tracing-opentelemetry` (install its layer in your subscriber);
//! without it, the spans are the crate's own, unlinked.

use http::HeaderMap;

/// The header the sender's trace context arrives in.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// A well-formed W3C `traceparent` (version `00`; a later version's first four fields are kept
/// as version `00`, as the W3C recommendation asks). Not a secret: it only names spans.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TraceParent(Box<str>);

impl TraceParent {
    /// Reads a `traceparent` value: two hex digits of version (not `ff`), 32 of trace id and
    /// 16 of parent span id (neither all zeros) and 2 of flags, lowercase, separated by `-`;
    /// version `00` is exactly that, a later version may add `-`-separated fields. `None` for
    /// anything else.
    pub fn parse(value: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(value).ok()?;
        let (version, rest) = text.split_at_checked(2)?;
        if !is_hex(version) || version == "ff" {
            return None;
        }
        let fields = rest.strip_prefix('-')?;
        let (known, extra) = fields.split_at_checked(52)?;
        if version == "00" && !extra.is_empty() || !extra.is_empty() && !extra.starts_with('-') {
            return None;
        }
        let mut parts = known.split('-');
        let (trace_id, parent_id, flags) = (parts.next()?, parts.next()?, parts.next()?);
        let well_formed = parts.next().is_none()
            && trace_id.len() == 32
            && parent_id.len() == 16
            && flags.len() == 2
            && [trace_id, parent_id, flags].into_iter().all(is_hex)
            && !all_zeros(trace_id)
            && !all_zeros(parent_id);
        well_formed.then(|| Self(format!("00-{known}").into_boxed_str()))
    }

    /// The request's `traceparent`, when it carries exactly one that is well formed.
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let mut values = headers.get_all(TRACEPARENT_HEADER).iter();
        match (values.next(), values.next()) {
            (Some(value), None) => Self::parse(value.as_bytes()),
            _ => None,
        }
    }

    /// The value, as sent on (`00-<trace id>-<parent id>-<flags>`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The trace id: 32 lowercase hex digits.
    pub fn trace_id(&self) -> &str {
        &self.0[3..35]
    }

    /// The id of the sender's span (the delivery's parent): 16 lowercase hex digits.
    pub fn parent_id(&self) -> &str {
        &self.0[36..52]
    }

    /// Whether the sender recorded its span (the `sampled` flag).
    pub fn sampled(&self) -> bool {
        u8::from_str_radix(&self.0[53..55], 16).is_ok_and(|flags| flags & 1 == 1)
    }

    /// Makes `span` (just created, not yet entered) a child of the sender's span, when
    /// `tracing-opentelemetry`'s layer traces it (feature `opentelemetry`): for a span of an
    /// integration of your own; the crate's routes and workers do it for theirs. Does nothing
    /// when no OpenTelemetry layer traces `span`.
    #[cfg(feature = "opentelemetry")]
    pub fn link(&self, span: &tracing::Span) {
        use opentelemetry::trace::{
            SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
        };
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let (Ok(trace_id), Ok(span_id)) = (
            TraceId::from_hex(self.trace_id()),
            SpanId::from_hex(self.parent_id()),
        ) else {
            return;
        };
        let flags = if self.sampled() {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        let parent = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
        // Fails only when no OpenTelemetry layer traces the span: nothing to link then.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
    }
}

impl std::fmt::Display for TraceParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn is_hex(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn all_zeros(text: &str) -> bool {
    text.bytes().all(|b| b == b'0')
}

#[cfg(test)]
mod tests {
    use super::TraceParent;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_version_00_value_reads_with_its_ids_and_flags() {
        let parsed = TraceParent::parse(VALID.as_bytes()).expect("valid");
        assert_eq!(parsed.as_str(), VALID);
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parsed.parent_id(), "00f067aa0ba902b7");
        assert!(parsed.sampled());
        let unsampled = TraceParent::parse(
            &VALID.as_bytes()[..53]
                .iter()
                .chain(b"00")
                .copied()
                .collect::<Vec<_>>(),
        )
        .expect("valid");
        assert!(!unsampled.sampled());
    }

    #[test]
    fn a_later_version_keeps_its_first_fields_as_version_00() {
        let later = format!("cc{}-what-comes-next", &VALID[2..]);
        let parsed = TraceParent::parse(later.as_bytes()).expect("a later version");
        assert_eq!(parsed.as_str(), VALID);
    }

    #[test]
    fn malformed_values_are_refused() {
        for bad in [
            "",
            "00",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        ] {
            assert_eq!(TraceParent::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(TraceParent::parse(&[0xff, 0xfe]), None);
    }

    #[test]
    fn a_request_with_two_values_has_none() {
        let mut headers = http::HeaderMap::new();
        headers.append("traceparent", VALID.parse().expect("header value"));
        assert!(TraceParent::from_headers(&headers).is_some());
        headers.append("traceparent", VALID.parse().expect("header value"));
        assert_eq!(TraceParent::from_headers(&headers), None);
    }
}
