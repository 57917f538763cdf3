//! What the receiver counts and measures (feature `metrics`), through the [`metrics`] facade:
//! install a recorder (a Prometheus exporter, say) and the routes, the stores and the inbox
//! workers report to it. Without the feature nothing is measured, not even a clock read; the
//! names below are there either way, for dashboards and for exporters' bucket settings.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | [`DELIVERIES`] | counter | `mode`, `outcome` | deliveries answered, by what became of them |
//! | [`VERIFY_SECONDS`] | histogram | `mode` | checking a delivery: signature, id, decoding |
//! | [`STORE_COMMIT_SECONDS`] | histogram | `store` | one store operation, queued to committed |
//! | [`HANDLER_RUNS`] | counter | `mode`, `outcome` | runs of your code, by how they ended |
//! | [`INBOX_ENTRIES`] | gauge | `state` | inbox entries by state |
//! | [`INBOX_OLDEST_PENDING_AGE_SECONDS`] | gauge | | age of the oldest entry not yet processed |
//!
//! `mode` is `inbox` (`axum::inbox_route`), `direct` (`axum::webhook_route`), `extractor`
//! (`axum::VerifiedWebhook`) or `layer` (`tower::VerifyWebhookLayer`); the last two count
//! their rejections only: what becomes of a delivery they accept is your code's. The `outcome` of a delivery is one of [`OUTCOMES`]; of
//! a handler run, `ok`, `error`, `panic` or `timeout` (inbox mode: cancelled at 90% of the
//! lease). `store` is `inbox` or `dedup`. `state` is `pending` (waiting: due, or backing off
//! after a failure), `leased` (in the hands of this process's workers) or `dead`.
//!
//! The inbox gauges are read from the inbox's database: every 5 s by
//! the inbox workers (`inbox::run_inbox_workers` and its siblings), and whenever you call
//! `Inbox::publish_metrics` (before rendering a scrape, say). On a PostgreSQL inbox that
//! replicas share, `pending` and `dead` count the whole queue, `leased` this process's hands.
//!
//! [`metrics`]: https://docs.rs/metrics

/// Counter: deliveries answered, labelled `mode` and `outcome` (one of [`OUTCOMES`]).
pub const DELIVERIES: &str = "svc_receiver_deliveries_total";
/// Histogram, seconds: verifying and decoding one delivery (body limit, signature header,
/// timestamp, HMAC, webhook id, JSON), labelled `mode`.
pub const VERIFY_SECONDS: &str = "svc_receiver_verify_seconds";
/// Histogram, seconds: one operation of a SQLite store, from being queued to its group commit
/// being durable (what a request waits for), labelled `store` (`inbox` or `dedup`).
pub const STORE_COMMIT_SECONDS: &str = "svc_receiver_store_commit_seconds";
/// Counter: runs of your code, labelled `mode` (`inbox` or `direct`) and `outcome` (`ok`,
/// `error`, `panic`, `timeout`).
pub const HANDLER_RUNS: &str = "svc_receiver_handler_runs_total";
/// Gauge: inbox entries, labelled `state` (`pending`, `leased`, `dead`).
pub const INBOX_ENTRIES: &str = "svc_receiver_inbox_entries";
/// Gauge, seconds: how long ago the oldest entry not yet processed (pending or leased) was
/// received; 0 when there is none.
pub const INBOX_OLDEST_PENDING_AGE_SECONDS: &str = "svc_receiver_inbox_oldest_pending_age_seconds";

/// Every `outcome` of [`DELIVERIES`], with the status answered:
/// - `accepted` (200): processed in direct mode, durably stored in inbox mode;
/// - `duplicate` (200): an id already processed or stored; your code is not run again;
/// - `replayed` (401): a signature already seen under another id;
/// - `bad_signature` (401): no signature matches an accepted secret;
/// - `stale` (401): the signed timestamp is outside the tolerance;
/// - `too_large` (413): the body is over the limit;
/// - `bad_id` (400): no valid `X-Service-Webhook-Id`;
/// - `bad_header` (400): a missing or malformed `X-Service-Signature`;
/// - `bad_body` (400): an unreadable body, or a verified one that is not a `call.scored` event;
/// - `unknown_event` (400, or 200 when acknowledged by choice): a verified event this version
///   does not know;
/// - `in_flight` (409, direct mode): the same id is being processed by another request;
/// - `store_error` (503): the store failed;
/// - `handler_failed` (500, direct mode): your code failed;
/// - `handler_timed_out` (503, direct mode): your code passed the deadline.
pub const OUTCOMES: [&str; 14] = [
    "accepted",
    "duplicate",
    "replayed",
    "bad_signature",
    "stale",
    "too_large",
    "bad_id",
    "bad_header",
    "bad_body",
    "unknown_event",
    "in_flight",
    "store_error",
    "handler_failed",
    "handler_timed_out",
];

/// Histogram buckets that suit [`VERIFY_SECONDS`] and [`STORE_COMMIT_SECONDS`], in seconds:
/// 50 µs to 5 s (verifying takes microseconds; a durable commit milliseconds, more under load).
pub const LATENCY_BUCKETS: [f64; 15] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 5.0,
];

/// Registers the help text and unit of every metric above with the installed recorder. The
/// routes and stores call it when they are built; call it yourself if you install the
/// recorder later and want the descriptions.
#[cfg(feature = "metrics")]
pub fn describe() {
    use ::metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        DELIVERIES,
        "Webhook deliveries answered, by mode and outcome"
    );
    describe_histogram!(
        VERIFY_SECONDS,
        Unit::Seconds,
        "Time to verify and decode one webhook delivery"
    );
    describe_histogram!(
        STORE_COMMIT_SECONDS,
        Unit::Seconds,
        "Time from queueing a webhook store operation to its durable commit"
    );
    describe_counter!(
        HANDLER_RUNS,
        "Runs of the webhook handler, by mode and outcome"
    );
    describe_gauge!(INBOX_ENTRIES, "Webhook inbox entries by state");
    describe_gauge!(
        INBOX_OLDEST_PENDING_AGE_SECONDS,
        Unit::Seconds,
        "Age of the oldest webhook inbox entry not yet processed"
    );
}

/// No-op without the feature, so that callers need no `cfg` of their own.
#[cfg(not(feature = "metrics"))]
#[allow(dead_code)]
pub(crate) fn describe() {}

/// Which integration a delivery went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg(any(feature = "axum", feature = "tower"))]
pub(crate) enum Mode {
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    Direct,
    #[cfg_attr(
        not(all(feature = "axum", any(feature = "sqlite", feature = "postgres"))),
        allow(dead_code)
    )]
    Inbox,
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    Extractor,
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    Layer,
}

#[cfg(any(feature = "axum", feature = "tower"))]
impl Mode {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Inbox => "inbox",
            Self::Extractor => "extractor",
            Self::Layer => "layer",
        }
    }
}

/// Counts one delivery answered.
#[cfg(any(feature = "axum", feature = "tower"))]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn delivery(mode: Mode, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(DELIVERIES, "mode" => mode.as_str(), "outcome" => outcome).increment(1);
}

/// Counts one run of user code (`mode` is `inbox` or `direct`).
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "axum"))]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn handler_run(mode: &'static str, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(HANDLER_RUNS, "mode" => mode, "outcome" => outcome).increment(1);
}

/// Sets the inbox gauges.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables, dead_code))]
pub(crate) fn inbox_gauges(pending: u64, leased: u64, dead: u64, oldest_age_secs: u64) {
    #[cfg(feature = "metrics")]
    {
        #[allow(clippy::cast_precision_loss)]
        let gauge = |state: &'static str, value: u64| {
            ::metrics::gauge!(INBOX_ENTRIES, "state" => state).set(value as f64);
        };
        gauge("pending", pending);
        gauge("leased", leased);
        gauge("dead", dead);
        #[allow(clippy::cast_precision_loss)]
        ::metrics::gauge!(INBOX_OLDEST_PENDING_AGE_SECONDS).set(oldest_age_secs as f64);
    }
}

/// A stopwatch that reads the clock only with the feature.
#[derive(Debug, Clone, Copy)]
#[cfg(any(feature = "sqlite", feature = "axum", feature = "tower"))]
pub(crate) struct Stopwatch {
    #[cfg(feature = "metrics")]
    started: std::time::Instant,
}

#[cfg(any(feature = "sqlite", feature = "axum", feature = "tower"))]
impl Stopwatch {
    pub(crate) fn start() -> Self {
        Self {
            #[cfg(feature = "metrics")]
            started: std::time::Instant::now(),
        }
    }

    /// Records the time since [`Stopwatch::start`] as one verification.
    #[cfg(any(feature = "axum", feature = "tower"))]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn verified(self, mode: Mode) {
        #[cfg(feature = "metrics")]
        ::metrics::histogram!(VERIFY_SECONDS, "mode" => mode.as_str())
            .record(self.started.elapsed());
    }

    /// Records the time since [`Stopwatch::start`] as one store operation of `store`.
    #[cfg(feature = "sqlite")]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn committed(self, store: &'static str) {
        #[cfg(feature = "metrics")]
        ::metrics::histogram!(STORE_COMMIT_SECONDS, "store" => store)
            .record(self.started.elapsed());
    }
}
