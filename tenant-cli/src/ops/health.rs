//! The operations endpoints of `webhook serve`: `GET /healthz` (the process answers),
//! `GET /readyz` (the store takes a write within [`READY_DEADLINE`]) and `GET /metrics` (the
//! Prometheus text format). Never authenticated, and they log nothing about the request.
//!
//! Readiness probes every path a delivery takes: the inbox's writer (acknowledging it), then
//! the store's own connection (recording it in the ledger; on PostgreSQL a connection apart
//! from the inbox's pool, reconnected when the server closed it), each with a write that
//! changes a row on SQLite ([`Store::check_writable`], `SqliteInbox::check_writable`), so that
//! a full disk makes it not ready. Each probe waits behind the
//! operations queued before it and for another connection holding the write lock. One
//! probe at a time reaches the store, so that probes of a stuck store do not pile up in its
//! queue; a request arriving meanwhile waits for that probe's turn within its own deadline.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use svc_receiver::inbox::Inbox;
use tokio::sync::Mutex;

use super::prometheus::{CONTENT_TYPE, Metrics};
use svc_store::Store;
use svc_store::inbox::StoreInbox;

/// How long `/readyz` waits for the store to take a write before answering 503.
pub const READY_DEADLINE: Duration = Duration::from_secs(2);

/// The paths of the operations endpoints.
pub const HEALTHZ: &str = "/healthz";
/// See [`HEALTHZ`].
pub const READYZ: &str = "/readyz";
/// See [`HEALTHZ`].
pub const METRICS: &str = "/metrics";

/// What the endpoints read: the inbox and the store (readiness), the inbox (gauges) and the
/// recorder.
#[derive(Debug, Clone)]
pub struct Ops {
    inbox: StoreInbox,
    store: Store,
    metrics: Metrics,
    /// Held while one store operation of these endpoints is queued or running.
    in_store: Arc<Mutex<()>>,
    deadline: Duration,
}

impl Ops {
    /// Endpoints over `inbox` and `store` (where the inbox's workers record deliveries),
    /// rendering the process's recorder.
    pub fn new(inbox: StoreInbox, store: Store, metrics: Metrics) -> Self {
        Self {
            inbox,
            store,
            metrics,
            in_store: Arc::default(),
            deadline: READY_DEADLINE,
        }
    }

    /// `/healthz` and `/readyz`, plus `/metrics` when `with_metrics`.
    pub fn router(&self, with_metrics: bool) -> Router {
        let router = Router::new()
            .route(HEALTHZ, get(|| async { "ok\n" }))
            .route(READYZ, get(readyz));
        let router = if with_metrics {
            router.route(METRICS, get(metrics))
        } else {
            router
        };
        router.with_state(self.clone())
    }

    /// Whether the inbox and the store both take a write within the deadline.
    ///
    /// # Errors
    /// Why not, in a few words.
    pub async fn ready(&self) -> Result<(), String> {
        let probe = async {
            let turn = Arc::clone(&self.in_store).lock_owned().await;
            let (inbox, store) = (self.inbox.clone(), self.store.clone());
            // On its own task, so that a request giving up does not free the turn before the
            // probe it queued is answered.
            tokio::spawn(async move {
                let written = match inbox.check_writable().await {
                    Ok(()) => store
                        .blocking(|s| s.check_writable())
                        .await
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                drop(turn);
                written
            })
            .await
        };
        match tokio::time::timeout(self.deadline, probe).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(err))) => Err(format!("the store refused a write: {err}")),
            Ok(Err(join)) => Err(format!("the probe failed: {join}")),
            Err(_) => Err(format!(
                "the store did not take a write within {:?}",
                self.deadline
            )),
        }
    }

    /// Sets the inbox gauges from the file, unless a store operation of these endpoints is
    /// already under way or the store does not answer within the deadline (the gauges then
    /// keep the values the workers last set).
    async fn refresh_gauges(&self) {
        let Ok(turn) = Arc::clone(&self.in_store).try_lock_owned() else {
            return;
        };
        let inbox = self.inbox.clone();
        let refresh = tokio::spawn(async move {
            let published = inbox.publish_metrics(chrono::Utc::now().timestamp()).await;
            drop(turn);
            published
        });
        if let Ok(Ok(Err(err))) = tokio::time::timeout(self.deadline, refresh).await {
            tracing::warn!(error = %err, "webhook inbox gauges not updated");
        }
    }
}

async fn readyz(State(ops): State<Ops>) -> Response {
    match ops.ready().await {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(reason) => {
            tracing::warn!(%reason, "not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {reason}\n"),
            )
                .into_response()
        }
    }
}

async fn metrics(State(ops): State<Ops>) -> Response {
    ops.refresh_gauges().await;
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], ops.metrics.render()).into_response()
}
