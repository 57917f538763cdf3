//! The process's metrics recorder: `metrics-exporter-prometheus`, installed once as the
//! `metrics` facade's global recorder, so that what `svc-receiver` counts (its feature
//! `metrics`) is rendered in the Prometheus text format by `GET /metrics`.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// The `Content-Type` of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How often histogram samples are folded into their buckets between scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The installed recorder's handle; rendering takes a snapshot.
#[derive(Debug, Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
}

impl Metrics {
    /// The process's recorder, installed on first use. Latencies (`*_seconds`) are true
    /// histograms with `svc_receiver::metrics::LATENCY_BUCKETS`. If another recorder was
    /// installed first (an application embedding this crate), this one renders nothing of
    /// what is recorded, and says so in the log once.
    pub fn get() -> Self {
        static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
        let handle = HANDLE.get_or_init(|| {
            let builder = PrometheusBuilder::new();
            let builder = match builder.set_buckets_for_metric(
                Matcher::Suffix("_seconds".into()),
                &svc_receiver::metrics::LATENCY_BUCKETS,
            ) {
                Ok(builder) => builder,
                // Only an empty bucket list is refused; ours is not empty.
                Err(_) => PrometheusBuilder::new(),
            };
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("another metrics recorder is installed; /metrics will be empty");
            }
            svc_receiver::metrics::describe();
            handle
        });
        Self {
            handle: handle.clone(),
        }
    }

    /// Everything recorded so far, in the Prometheus text format.
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// Folds histogram samples into buckets every few seconds, for as long as the returned
    /// task runs (abort it, or let the runtime end it).
    pub fn spawn_upkeep(&self) -> tokio::task::JoinHandle<()> {
        let handle = self.handle.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(UPKEEP_EVERY).await;
                handle.run_upkeep();
            }
        })
    }
}
