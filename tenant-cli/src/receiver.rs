//! The webhook receiver behind `svc-cli webhook serve`, usable on its own (tests embed it on
//! port 0): `svc-receiver`'s durable inbox in the store file, and workers that record each
//! verified delivery in the store's ledger (and, with a client, store the call's detail).
//!
//! A delivery is verified over its raw body, deduplicated on `X-Service-Webhook-Id` and
//! committed to the inbox (tables of the store file, `synchronous=FULL`) before the `200`; a
//! worker then records it in the ledger, retrying from the inbox when that fails. Failure
//! events (`success: false`) are recorded with their `reason` and `reasonMessage`: they are the
//! only trace of the attempt.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use svc_receiver::axum::{InboxReceiver, inbox_route};
use svc_receiver::sqlite::{InboxPolicy, SqliteInbox, Step, process_next, run_inbox_workers};
use svc_receiver::{Clock, Keyring, Received, SystemClock, Verifier};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::client::{CallId, Client, ErrorClass};
use crate::store::Store;
use crate::store::calls::Writer;
use crate::store::deliveries::NewDelivery;
use crate::time::format_ts;

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
}

/// Serves deliveries on `listener` until `shutdown` resolves, then answers the requests in
/// flight and records the deliveries not yet in the ledger (for up to 10 s; an entry whose
/// recording fails stays in the inbox and is recorded at the next start).
///
/// # Errors
/// The inbox cannot be opened in the store's file, or the server fails.
pub async fn run(
    config: ReceiverConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let inbox = SqliteInbox::open(config.store.path(), InboxPolicy::default())
        .with_context(|| format!("opening the inbox in {}", config.store.path().display()))?;
    // From now on a scored call's webhook is expected in the ledger: one that never arrives,
    // even before the first delivery, is a loss reconcile reports.
    let opened = format_ts(Utc::now());
    config
        .store
        .blocking(move |s| s.mark_ledger_open(&opened))
        .await
        .context("marking the ledger open")?;
    let receiver = InboxReceiver::new(Verifier::new(config.keyring), inbox.clone());
    let app = axum::Router::new().route(&config.path, inbox_route(receiver));
    let (stop, mut stopping) = watch::channel(false);
    let handler = {
        let (store, client) = (config.store.clone(), config.client.clone());
        move |received: Received| {
            let (store, client) = (store.clone(), client.clone());
            async move { record(&store, client.as_ref(), received).await }
        }
    };
    let workers = tokio::spawn(run_inbox_workers(
        inbox.clone(),
        handler.clone(),
        SystemClock,
        WORKERS,
        async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        },
    ));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("serving webhooks");
    // Requests in flight are answered; let the workers finish the entries in hand, then
    // record what arrived meanwhile, so that the ledger holds every delivery acknowledged.
    let _ = stop.send(true);
    let _ = workers.await;
    let deadline = Instant::now() + DRAIN;
    while Instant::now() < deadline {
        match process_next(&inbox, &handler, SystemClock.now()).await {
            Ok(Step::Settled(_)) => {}
            Ok(_) => break,
            Err(e) => {
                tracing::warn!(error = %e, "could not drain the inbox; entries stay for the next start");
                break;
            }
        }
    }
    served
}

/// Records one verified delivery in the ledger and, with a client, stores the call's detail.
/// An `Err` leaves the entry in the inbox, retried later.
async fn record(store: &Store, client: Option<&Client>, received: Received) -> Result<(), String> {
    let event = received.event.clone();
    let verified_at = DateTime::<Utc>::from_timestamp(received.received_at, 0).unwrap_or_default();
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
            .await
            .map_err(|e| format!("recording the delivery: {e}"))?
    };
    if inserted {
        if event.success {
            tracing::info!(webhook_id = %received.webhook_id, call_id = %event.call_id,
                source = %event.source, "call scored");
        } else {
            tracing::warn!(webhook_id = %received.webhook_id, call_id = %event.call_id,
                reason = event.reason.as_ref().map(|r| r.as_str()).unwrap_or("-"),
                reason_message = event.reason_message.as_deref().unwrap_or("-"),
                "call not scored");
        }
    }
    let Some(client) = client.filter(|_| event.success) else {
        return Ok(());
    };
    let call_id = CallId::from_service(event.call_id.clone());
    match client.call_raw(&call_id).await {
        Ok(detail) => {
            let writer = Writer {
                by: "webhook",
                run_id: None,
                now: format_ts(Utc::now()),
                ledger_since_ms: None,
                missed_before_ms: i64::MIN,
            };
            store
                .blocking(move |s| s.store_calls(&[(None, detail)], &writer))
                .await
                .map(drop)
                .map_err(|e| format!("storing call {call_id}: {e}"))
        }
        // Scored calls are readable; a 404 or a malformed detail will not heal by retrying
        // now. Reconcile stores the call from its listing.
        Err(e) if e.class() == ErrorClass::Failure => {
            tracing::warn!(call_id = %call_id, error = %e,
                "call detail not stored; reconcile will store it");
            Ok(())
        }
        Err(e) => Err(format!("reading call {call_id}: {e:#}")),
    }
}
