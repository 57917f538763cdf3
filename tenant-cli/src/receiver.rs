//! The webhook receiver behind `svc-cli webhook serve`, usable on its own (tests embed it on
//! port 0): `svc-receiver`'s durable inbox in the store file, and workers that record each
//! verified delivery in the store's ledger (and, with a client, store the call through
//! `svc_reconcile::SinkHandler`, as a tenant embedding the library would).
//!
//! A delivery is verified over its raw body, deduplicated on `X-Service-Webhook-Id` and
//! committed to the inbox (tables of the store file, `synchronous=FULL`) before the `200`; a
//! worker then records it in the ledger, retrying from the inbox when that fails. Failure
//! events (`success: false`) are recorded with their `reason` and `reasonMessage`: they are the
//! only trace of the attempt.
//!
//! Each delivery is one trace with the service's attempt when the service sent a
//! `traceparent` and spans are exported (`OTEL_EXPORTER_OTLP_ENDPOINT`): the route's and the
//! worker's `webhook_delivery` spans are children of the attempt, and the worker's holds the
//! `ledger_commit` (and, with `--fetch`, `call_store`) span.
//!
//! The same listener answers `GET /healthz`, `GET /readyz` and `GET /metrics` (see
//! [`crate::ops::health`]; [`Listeners::metrics`] moves them, `/metrics` included, to another
//! address), with what `svc-receiver` counts (its feature `metrics`) rendered by the process's
//! recorder.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use svc_contract::{Keyring, SharedKeyring, SystemClock, Verifier};
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, inbox_route};
use svc_receiver::inbox::InboxPolicy;
use svc_receiver::inbox::run_inbox_workers_until_drained;
use svc_receiver::reload::SecretFile;
use svc_server::Server;
use tokio::net::TcpListener;
use tracing::Instrument as _;

use crate::ops::health::{HEALTHZ, METRICS, Ops, READYZ};
use crate::ops::prometheus::Metrics;
use svc_client::Client;
use svc_reconcile::SinkHandler;
use svc_reconcile::time::format_ts;
use svc_store::Store;
use svc_store::deliveries::NewDelivery;
use svc_store::inbox::StoreInbox;

/// Inbox entries handled at once (each records a delivery and, with a client, reads a call).
const WORKERS: usize = 4;
/// How long a stopping receiver keeps recording the deliveries that arrived last; what is left
/// stays in the inbox for the next start.
const DRAIN: Duration = Duration::from_secs(10);

/// What a receiver runs with.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    /// The store deliveries are recorded in (its file also holds the inbox).
    pub store: Store,
    /// The accepted signing secrets.
    pub keyring: Keyring,
    /// The path deliveries are POSTed to (starts with `/`).
    pub path: String,
    /// When set, the detail of each scored call is read and stored.
    pub client: Option<Client>,
    /// How long a handed-out inbox entry is reserved for its worker (5 minutes by default):
    /// after a crash, another replica takes it once this runs out.
    pub inbox_lease: Duration,
}

/// The listeners a receiver serves on.
#[derive(Debug)]
pub struct Listeners {
    /// Deliveries (at [`ReceiverConfig::path`]), `/healthz`, `/readyz`, and `/metrics` unless
    /// [`Listeners::metrics`] is given.
    pub webhooks: TcpListener,
    /// When given, `/metrics` is served here instead (with `/healthz` and `/readyz` too), so
    /// that it can stay on an internal address (`webhook serve --metrics-listen`).
    pub metrics: Option<TcpListener>,
}

impl From<TcpListener> for Listeners {
    fn from(webhooks: TcpListener) -> Self {
        Self {
            webhooks,
            metrics: None,
        }
    }
}

impl Listeners {
    /// Why `path` cannot receive deliveries on these listeners: it is one of the operations
    /// endpoints served beside it.
    ///
    /// # Errors
    /// The message to show.
    pub fn check_path(&self, path: &str) -> Result<(), String> {
        let taken = [HEALTHZ, READYZ]
            .into_iter()
            .chain(self.metrics.is_none().then_some(METRICS));
        match taken.into_iter().find(|taken| *taken == path) {
            Some(taken) => Err(format!(
                "--path {taken} is taken by the operations endpoints; choose another path"
            )),
            None => Ok(()),
        }
    }
}

/// Serves deliveries on `listener` until `shutdown` resolves, then answers the requests in
/// flight and records the deliveries not yet in the ledger (for up to 10 s; an entry whose
/// recording fails stays in the inbox and is recorded at the next start).
///
/// The server is `svc-receiver`'s [`Server`]: its connection limits (header-read, request and
/// keep-alive idle timeouts, a cap on connections) apply.
///
/// # Errors
/// The inbox cannot be opened in the store's file, or the server fails.
pub async fn run(
    config: ReceiverConfig,
    listener: impl Into<Listeners>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let keys = SharedKeyring::new(config.keyring.clone());
    serve(config, keys, listener.into(), shutdown).await
}

/// Like [`run`], with the keys of `secret_file` (its secret, and the keys added to it with
/// `with_key`) instead of `config.keyring`, which is not read: the file is read again when it
/// changes and on SIGHUP, and a new secret takes effect at once (`webhook serve
/// --secret-file`). Call it inside a Tokio runtime: the SIGHUP handler is installed when it is
/// called, so a SIGHUP sent after that never ends the process.
///
/// # Errors
/// As [`run`].
pub fn run_with_secret_file(
    config: ReceiverConfig,
    secret_file: SecretFile,
    listener: impl Into<Listeners>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = anyhow::Result<()>> + Send + 'static {
    let listener = listener.into();
    let keys = secret_file.keys();
    let (stop_watching, stopped) = tokio::sync::oneshot::channel::<()>();
    let watch = secret_file.watch(async move {
        let _ = stopped.await;
    });
    async move {
        let watching = tokio::spawn(watch);
        let served = serve(config, keys, listener, shutdown).await;
        let _ = stop_watching.send(());
        let _ = watching.await;
        served
    }
}

async fn serve(
    config: ReceiverConfig,
    keys: SharedKeyring,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    listeners
        .check_path(&config.path)
        .map_err(anyhow::Error::msg)?;
    let policy = InboxPolicy {
        lease: config.inbox_lease,
        ..InboxPolicy::default()
    };
    let inbox = StoreInbox::open_beside(&config.store, policy)
        .await
        .with_context(|| format!("opening the inbox in {}", config.store.location()))?;
    // From now on a scored call's webhook is expected in the ledger: one that never arrives,
    // even before the first delivery, is a loss reconcile reports.
    let opened = format_ts(Utc::now());
    config
        .store
        .blocking(move |s| s.mark_ledger_open(&opened))
        .await
        .context("marking the ledger open")?;
    let receiver = InboxReceiver::new(Verifier::with_shared_keyring(keys), inbox.clone());
    let metrics = Metrics::get();
    let upkeep = metrics.spawn_upkeep();
    let ops = Ops::new(inbox.clone(), config.store.clone(), metrics);
    let app = axum::Router::new()
        .route(&config.path, inbox_route(receiver))
        .merge(ops.router(listeners.metrics.is_none()));
    let handler = {
        let store = config.store.clone();
        let calls = config
            .client
            .clone()
            .map(|client| SinkHandler::new(client, Arc::new(store.clone())));
        move |received: Received| {
            let (store, calls) = (store.clone(), calls.clone());
            async move { record(&store, calls.as_ref(), received).await }
        }
    };
    // One signal stops both servers.
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let stopped = move || {
        let mut stopping = stopping.clone();
        async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        }
    };
    let metrics_server = listeners
        .metrics
        .map(|listener| tokio::spawn(Server::new(ops.router(true)).run(listener, stopped())));
    // On shutdown: requests in flight are answered, then the workers finish the entries in
    // hand and record what arrived meanwhile, so that the ledger holds every delivery
    // acknowledged (within the drain time).
    let webhooks = Server::new(app)
        .with_background(move |draining| {
            run_inbox_workers_until_drained(inbox, handler, SystemClock, WORKERS, draining)
        })
        .drain_timeout(DRAIN)
        .run(listeners.webhooks, stopped());
    let served = {
        let signal = async {
            shutdown.await;
            let _ = stop.send(true);
        };
        let (mut webhooks, mut signal) = (std::pin::pin!(webhooks), std::pin::pin!(signal));
        tokio::select! {
            served = &mut webhooks => served,
            () = &mut signal => webhooks.await,
        }
    };
    // Also when the webhook server ended on its own.
    let _ = stop.send(true);
    if let Some(metrics_server) = metrics_server {
        metrics_server
            .await
            .context("the metrics server failed")??;
    }
    upkeep.abort();
    served.context("serving webhooks")
}

/// Records one verified delivery in the ledger (every delivery, scored or not, in a transaction
/// of its own, so that reconcile counts it delivered even while its call cannot be read) and,
/// with `--fetch`, stores the call through the same `SinkHandler` a tenant embeds (which reads
/// the detail, leaves a 404 to reconcile, and stores the call with its delivery in one
/// transaction). An `Err` leaves the entry in the inbox, retried later.
async fn record(
    store: &Store,
    calls: Option<&SinkHandler<Store>>,
    received: Received,
) -> Result<(), String> {
    let event = received.event.clone();
    let verified_at = DateTime::<Utc>::from_timestamp(received.received_at, 0).unwrap_or_default();
    // Inside the inbox worker's `webhook_delivery` span: with traces exported, the commit is
    // the last span of the delivery's trace, which starts at the service's scoring.
    let commit = tracing::info_span!("ledger_commit", call_id = %event.call_id, inserted = tracing::field::Empty);
    let inserted = {
        let received = received.clone();
        store
            .blocking(move |s| {
                s.record_delivery(&NewDelivery {
                    webhook_id: received.webhook_id.as_str(),
                    event: &received.event,
                    body: &received.body,
                    verified_at: &format_ts(verified_at),
                })
            })
            .instrument(commit.clone())
            .await
            .map_err(|e| format!("recording the delivery: {e}"))?
    };
    commit.record("inserted", inserted);
    if inserted {
        if event.success {
            // The inbox worker's span carries the webhook id.
            tracing::info!(call_id = %event.call_id, source = %event.source, "call scored");
        } else {
            tracing::warn!(call_id = %event.call_id,
                reason = event.reason.as_ref().map(|r| r.as_str()).unwrap_or("-"),
                reason_message = event.reason_message.as_deref().unwrap_or("-"),
                "call not scored");
        }
    }
    match calls {
        Some(calls) => calls
            .store(&received)
            .instrument(tracing::info_span!("call_store", call_id = %event.call_id))
            .await
            .map(drop)
            .map_err(|e| e.to_string()),
        None => Ok(()),
    }
}
