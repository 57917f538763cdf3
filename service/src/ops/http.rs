//! The HTTP side of operations: the middleware that counts every request of the API,
//! `GET /healthz` (on the API listener, never authenticated), and the metrics server that
//! `--metrics-listen` starts (`GET /metrics`, `GET /healthz`), stopped with the API.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use super::metrics::Metrics;
use crate::db::Db;
use crate::{AppState, Stop};

/// How often recorded latencies are folded into buckets between scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// `GET /healthz`: the process serves requests. Readiness of the database is not checked
/// here: every API request reads it.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// Sets every response's `Date` (RFC 9110 IMF-fixdate) from the service's clock rather than
/// the system's, so that a client reading the service's time (reconcile bounds its watermark
/// by it) sees the same clock that stamps `scoredAt`, skewed or not.
pub async fn date_header(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let date = state
        .clock
        .now()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    if let Ok(value) = header::HeaderValue::from_str(&date) {
        response.headers_mut().insert(header::DATE, value);
    }
    response
}

/// Counts each request by method, matched route and status, with its latency.
pub async fn record(State(metrics): State<Metrics>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().as_str().to_owned();
    // The route template, not the path: ids would make every request a series of its own.
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let response = next.run(request).await;
    metrics.request(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// `router` counting its requests into `metrics`, when there are metrics.
pub fn instrument(router: Router, metrics: Option<&Metrics>) -> Router {
    match metrics {
        Some(metrics) => router.layer(axum::middleware::from_fn_with_state(
            metrics.clone(),
            record,
        )),
        None => router,
    }
}

/// Binds `--metrics-listen` (when given) and serves `GET /metrics` and `GET /healthz` there
/// until `stop`; returns the recorder the API and the outbox record into.
///
/// # Errors
/// The address cannot be bound.
pub async fn start(
    state: &AppState,
    stop: Stop,
    workers: &mut tokio::task::JoinSet<()>,
) -> anyhow::Result<Option<Metrics>> {
    let Some(address) = state.config.metrics_listen else {
        return Ok(None);
    };
    let listener = TcpListener::bind(address)
        .await
        .with_context(|| format!("binding the metrics address {address}"))?;
    let metrics = Metrics::new();
    state.practice.outbox.observe(metrics.clone());
    match listener.local_addr() {
        Ok(address) => tracing::info!(%address, "serving metrics"),
        Err(_) => tracing::info!("serving metrics"),
    }
    workers.spawn(serve(
        listener,
        metrics.clone(),
        state.db.clone(),
        state.config.http_limits,
        stop,
    ));
    Ok(Some(metrics))
}

async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    db: Db,
    limits: svc_server::ServerLimits,
    mut stop: Stop,
) {
    let upkeep = {
        let metrics = metrics.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(UPKEEP_EVERY).await;
                metrics.upkeep();
            }
        })
    };
    let app = Router::new()
        .route("/metrics", get(scrape))
        .route("/healthz", get(healthz))
        .with_state((metrics, db));
    let served = svc_server::Server::new(app)
        .limits(limits)
        .run(listener, async move { stop.requested().await })
        .await;
    upkeep.abort();
    if let Err(error) = served {
        tracing::error!(error = %error, "the metrics server failed");
    }
}

async fn scrape(State((metrics, db)): State<(Metrics, Db)>) -> Response {
    match metrics.render(&db).await {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(error = %error, "metrics: the database cannot be read");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n").into_response()
        }
    }
}
