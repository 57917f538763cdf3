//! The user code a receiver hands verified events to, whichever integration runs it.

use std::future::Future;

use crate::dedup::WebhookId;
use crate::event::CallScored;

/// A verified, deduplicated event handed to user code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The delivery's `X-Service-Webhook-Id` (the idempotency key).
    pub webhook_id: WebhookId,
    /// The decoded body.
    pub event: CallScored,
    /// Which attempt this is at handing the event to user code, from 1 (inbox mode retries).
    pub attempt: u32,
}

/// User code that processes events. Any `Fn(Received) -> impl Future<Output = Result<(), E>>`
/// with a displayable `E` is one; an `Err` means "not processed" (the claim is released so the
/// sender's retry is processed, or the inbox retries later).
pub trait EventHandler: Send + Sync + 'static {
    /// The handler's failure, logged by the integration.
    type Error: std::fmt::Display + Send;

    /// Processes one event.
    fn handle(&self, received: Received) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

impl<F, Fut, E> EventHandler for F
where
    F: Fn(Received) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send,
    E: std::fmt::Display + Send,
{
    type Error = E;

    fn handle(&self, received: Received) -> impl Future<Output = Result<(), E>> + Send {
        self(received)
    }
}
