//! [`SinkHandler`]: the webhook path into the same [`Sink`] reconcile writes, so that a tenant
//! writes one thing (a sink over its own tables) and each scored call lands there once,
//! whichever path brings it first.
//!
//! `SinkHandler` is an `svc_receiver::EventHandler`: hand it to any of `svc-receiver`'s
//! integrations (the SQLite or PostgreSQL inbox's workers, or the direct route). For each
//! verified `call.scored` event with `success: true` it reads the call's detail
//! (`GET /calls/{callId}`, through the [`Client`]) and stores it with
//! [`Sink::store_delivered`], one transaction of the sink's own. An event with
//! `success: false` stores nothing: such a call is never readable (the contract answers 404
//! `CALL_NOT_FOUND`) and is never listed, so reconcile will not bring it either.
//!
//! # Once per call, whichever path
//! The key both paths share is the **call id**, not the webhook id: reconcile stores calls that
//! never had a delivery, and the receiver hands the same event over again after a crash (its
//! inbox is at-least-once). A sink answers [`Stored::New`] for a call only the first time it
//! stores it, inside the transaction that stores it; an effect keyed to that answer (credit
//! the rep, enqueue a coaching task, in the same transaction) happens once per call, whether
//! the webhook or a reconcile run brought the call, and however often either ran. The worked
//! examples `examples/own_table.rs` and `examples/own_table_webhooks.rs` do exactly that with a
//! `rep_scores` table.
//!
//! Why not `svc-receiver`'s exactly once here (a recorder's `record` of the *webhook id* in the
//! tenant's transaction): a call reconcile stored has no webhook id at all, so the key that
//! both paths share must be the call's. Record the webhook id for effects of the delivery
//! itself; use this handler for the call.
//!
//! A detail that cannot be read for now (the service unreachable, a 5xx or 429 still failing
//! after the client's retries) is an error: the inbox retries the event with its backoff. One
//! the service refuses for good (a 404, a body that is not a call) is logged and left to
//! reconcile, which lists the call and stores it or keeps it as a failure; retrying would not
//! heal it. Either way a delivery that never stores its call is recovered by the next run.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use svc_client::{CallId, Client, ClientError, ErrorClass};
use svc_receiver::{EventHandler, Received};

use crate::sink::{Delivered, Sink, Stored};

/// Stores the call of each verified `call.scored` event through a [`Sink`] (see the module
/// docs). Cheap to clone.
pub struct SinkHandler<S> {
    client: Client,
    sink: Arc<S>,
}

impl<S> Clone for SinkHandler<S> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            sink: Arc::clone(&self.sink),
        }
    }
}

impl<S> std::fmt::Debug for SinkHandler<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkHandler")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// Why an event's call was not stored; the integration logs it and the event is retried.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError<E> {
    /// The call's detail could not be read.
    #[error("reading call {call_id}: {source}")]
    Read {
        /// The call.
        call_id: CallId,
        /// What the client reported.
        source: ClientError,
    },
    /// The sink failed to store it.
    #[error("storing call {call_id}: {source}")]
    Sink {
        /// The call.
        call_id: CallId,
        /// What the sink reported.
        source: E,
    },
}

impl<S: Sink> SinkHandler<S> {
    /// A handler reading details with `client` and storing them in `sink` (the sink a
    /// `Reconciler` of the same tables is built with).
    pub fn new(client: Client, sink: Arc<S>) -> Self {
        Self { client, sink }
    }

    /// Stores the call of one event: what storing it did, or `None` when nothing was stored:
    /// an event with `success: false`, or a detail the service refused for good (a 404, a body
    /// that is not a call), which is logged and left to reconcile.
    pub async fn store(
        &self,
        received: &Received,
    ) -> Result<Option<Stored>, WebhookError<S::Error>> {
        let event = &received.event;
        if !event.success {
            tracing::debug!(call_id = %event.call_id, "not scored: nothing to store");
            return Ok(None);
        }
        // The service is the authority on its ids (a signed event): taken as is.
        let call_id = CallId::from_service(event.call_id.clone());
        let detail = match self.client.call_raw(&call_id).await {
            Ok(detail) => detail,
            // A 404 or a body that is not a call will not heal by retrying now: the next
            // reconcile run lists the call and stores it (or keeps it as a failure).
            Err(error) if error.class() == ErrorClass::Failure => {
                tracing::warn!(%call_id, %error, "call detail not stored; reconcile will store it");
                return Ok(None);
            }
            Err(source) => return Err(WebhookError::Read { call_id, source }),
        };
        let delivered = Delivered::new(
            received.webhook_id.as_str(),
            received.event.clone(),
            Arc::clone(&received.body),
            received_at(received),
            detail,
        );
        let stored = self
            .sink
            .store_delivered(delivered)
            .await
            .map_err(|source| WebhookError::Sink {
                call_id: call_id.clone(),
                source,
            })?;
        tracing::debug!(%call_id, ?stored, "stored from its webhook");
        Ok(Some(stored))
    }
}

impl<S: Sink> EventHandler for SinkHandler<S> {
    type Error = WebhookError<S::Error>;

    async fn handle(&self, received: Received) -> Result<(), Self::Error> {
        self.store(&received).await.map(|_| ())
    }
}

/// When the delivery was verified, as a time (now, for a value out of range).
fn received_at(received: &Received) -> DateTime<Utc> {
    DateTime::from_timestamp(received.received_at, 0).unwrap_or_else(Utc::now)
}
