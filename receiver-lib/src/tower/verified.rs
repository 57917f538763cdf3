//! [`Verified`]: what the tower layer puts in a request's extensions for the inner service.

use std::sync::Arc;

use crate::handler::Received;
use crate::receive::Checked;
use svc_contract::CallScored;
use svc_contract::WebhookId;

/// A delivery the layer verified and decoded, in the extensions of the request it hands the
/// inner service: `request.extensions().get::<Verified>()`, or the axum extractor (feature
/// `axum`). There is no attempt number: the contract sends none. The sender signs every
/// attempt afresh, so [`timestamp`](Self::timestamp) and [`signature`](Self::signature) differ
/// from one attempt to the next, while [`webhook_id`](Self::webhook_id) stays the same.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified {
    /// The `X-Service-Webhook-Id` (the idempotency key: the same on the sender's retry).
    pub webhook_id: WebhookId,
    /// The signed timestamp of this attempt (unix seconds), within the verifier's tolerance.
    pub timestamp: i64,
    /// When the layer verified it (unix seconds, from the layer's clock).
    pub received_at: i64,
    /// The signature that matched: what replay protection remembers (not a secret: it was on
    /// the wire).
    pub signature: [u8; 32],
    /// The decoded event.
    pub event: CallScored,
}

impl Verified {
    pub(crate) fn new(checked: Checked, received_at: i64) -> Self {
        Self {
            webhook_id: checked.webhook_id,
            timestamp: checked.timestamp,
            received_at,
            signature: checked.signature,
            event: checked.event,
        }
    }

    /// This delivery as user code of the crate's other integrations takes it (an
    /// [`EventHandler`](crate::EventHandler), a recorder of `exactly_once`), with its
    /// signature, so that a recorder finds a replay of it under another webhook id. `body` is
    /// the request's body, the bytes the layer verified.
    pub fn received(&self, body: impl Into<Arc<[u8]>>) -> Received {
        Received::new(
            self.webhook_id.clone(),
            self.event.clone(),
            body,
            self.received_at,
        )
        .with_signature(self.signature)
    }
}
