//! The server's Prometheus recorder and what is recorded in it. Names:
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `svc_service_http_requests_total` | counter | `method`, `route` (the matched route, `/v1/calls/{callId}`; `unmatched` for a 404 of no route), `status` |
//! | `svc_service_http_request_duration_seconds` | histogram | `method`, `route` |
//! | `svc_service_webhook_deliveries_total` | counter | `tenant`, `outcome`: `delivered`, `retried` (a first attempt failed; the retry is scheduled), `failed` (the retry failed too: given up) |
//! | `svc_service_webhook_outbox_pending` | gauge | `tenant`: deliveries waiting for an attempt or a retry |
//! | `svc_service_live_calls` | gauge | `tenant`: practice calls live now |

use std::sync::Arc;
use std::time::Duration;

use metrics::{Key, Label, Level, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

use crate::db::{Db, DbError};

/// Requests by method, route and status.
pub const HTTP_REQUESTS: &str = "svc_service_http_requests_total";
/// Request latency by method and route, in seconds.
pub const HTTP_DURATION: &str = "svc_service_http_request_duration_seconds";
/// Webhook delivery attempts by tenant and outcome.
pub const DELIVERIES: &str = "svc_service_webhook_deliveries_total";
/// Deliveries pending per tenant.
pub const OUTBOX_PENDING: &str = "svc_service_webhook_outbox_pending";
/// Live practice calls per tenant.
pub const LIVE_CALLS: &str = "svc_service_live_calls";

/// Request latency buckets, in seconds: 1 ms to 10 s (the request timeout).
const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

static METADATA: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, None);

/// This server's recorder; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    recorder: Arc<PrometheusRecorder>,
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh recorder, with its names described.
    pub fn new() -> Self {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(HTTP_DURATION.into()), &LATENCY_BUCKETS)
            // Only an empty bucket list is refused.
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let help = SharedString::const_str;
        recorder.describe_counter(
            HTTP_REQUESTS.into(),
            None,
            help("HTTP requests by method, route and status"),
        );
        recorder.describe_histogram(
            HTTP_DURATION.into(),
            Some(Unit::Seconds),
            help("HTTP request latency by method and route"),
        );
        recorder.describe_counter(
            DELIVERIES.into(),
            None,
            help("Webhook delivery attempts by tenant and outcome"),
        );
        recorder.describe_gauge(
            OUTBOX_PENDING.into(),
            None,
            help("Webhook deliveries pending per tenant"),
        );
        recorder.describe_gauge(
            LIVE_CALLS.into(),
            None,
            help("Live practice calls per tenant"),
        );
        Self {
            recorder: Arc::new(recorder),
            handle,
        }
    }

    /// Counts one answered request and its latency.
    pub fn request(&self, method: &str, route: &str, status: u16, latency: Duration) {
        let (method, route) = (method.to_owned(), route.to_owned());
        let key = Key::from_parts(
            HTTP_REQUESTS,
            vec![
                Label::new("method", method.clone()),
                Label::new("route", route.clone()),
                Label::new("status", status.to_string()),
            ],
        );
        self.recorder.register_counter(&key, &METADATA).increment(1);
        let key = Key::from_parts(
            HTTP_DURATION,
            vec![Label::new("method", method), Label::new("route", route)],
        );
        self.recorder
            .register_histogram(&key, &METADATA)
            .record(latency.as_secs_f64());
    }

    /// Counts one delivery attempt of `tenant`, by its `outcome` label (`delivered`,
    /// `retried`, `failed`).
    pub fn delivery(&self, tenant: &str, outcome: &'static str) {
        let key = Key::from_parts(
            DELIVERIES,
            vec![
                Label::new("tenant", tenant.to_owned()),
                Label::new("outcome", outcome),
            ],
        );
        self.recorder.register_counter(&key, &METADATA).increment(1);
    }

    /// Reads the outbox and live-call gauges from `db`, then renders everything in the
    /// Prometheus text format.
    ///
    /// # Errors
    /// The database cannot be read.
    pub async fn render(&self, db: &Db) -> Result<String, DbError> {
        for tenant in db.ops_gauges().await? {
            let gauge = |name: &'static str, value: i64| {
                let key =
                    Key::from_parts(name, vec![Label::new("tenant", tenant.tenant_id.clone())]);
                #[allow(clippy::cast_precision_loss)]
                self.recorder
                    .register_gauge(&key, &METADATA)
                    .set(value as f64);
            };
            gauge(OUTBOX_PENDING, tenant.outbox_pending);
            gauge(LIVE_CALLS, tenant.live_calls);
        }
        self.handle.run_upkeep();
        Ok(self.handle.render())
    }

    /// Folds recorded latencies into their buckets (also done at each scrape); call it every
    /// few seconds so that an unscraped server does not keep every sample.
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }
}
