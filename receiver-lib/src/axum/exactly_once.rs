//! Exactly-once direct mode: verify, then record the delivery and run your code in one
//! transaction of your database ([`crate::exactly_once`]), answering 200 only after it
//! committed.

use std::sync::Arc;
use std::time::Duration;

use ::axum::body::Bytes;
use ::axum::extract::rejection::BytesRejection;
use ::axum::extract::{DefaultBodyLimit, State};
use ::axum::http::HeaderMap;
use ::axum::routing::{MethodRouter, post};
use tokio::time::Instant;
use tracing::Instrument;

use super::direct::DEFAULT_HANDLER_DEADLINE;
use super::request::{Answered, ReceiveError, answer, check, delivery_span, webhook_id};
use crate::clock::{Clock, SystemClock};
use crate::dedup::WebhookId;
use crate::exactly_once::{Applied, EffectError, Transactional};
use crate::handler::Received;
use crate::metrics::Mode;
use crate::verify::Verifier;

/// What the exactly-once direct route needs: verifier, driver
/// (`PgExactlyOnce` or `SqliteExactlyOnce`) and clock.
#[derive(Clone)]
pub struct ExactlyOnceReceiver<X> {
    verifier: Verifier,
    driver: X,
    clock: Arc<dyn Clock>,
    deadline: Duration,
}

impl<X: std::fmt::Debug> std::fmt::Debug for ExactlyOnceReceiver<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExactlyOnceReceiver")
            .field("verifier", &self.verifier)
            .field("driver", &self.driver)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<X: Transactional> ExactlyOnceReceiver<X> {
    /// A receiver using the system clock and the default deadline (8 s).
    pub fn new(verifier: Verifier, driver: X) -> Self {
        Self {
            verifier,
            driver,
            clock: Arc::new(SystemClock),
            deadline: DEFAULT_HANDLER_DEADLINE,
        }
    }

    /// Reads "now" from `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Sets how long a request may take, from its arrival, before it answers 503 (8 s by
    /// default), waiting for a concurrent delivery of the same id included. Past it the
    /// request stops waiting: on PostgreSQL its delivery is left out of its batch if its
    /// effect has not started yet, and otherwise commits or rolls back with the batch; on
    /// SQLite the queued transaction still runs. Either way the sender's retry finds the
    /// delivery done (a duplicate, 200) or runs it.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    async fn receive(
        &self,
        headers: HeaderMap,
        webhook_id: Option<WebhookId>,
        body: Result<Bytes, BytesRejection>,
    ) -> Result<Answered, ReceiveError> {
        let arrived = Instant::now();
        let now = self.clock.now();
        let (checked, body) = check(
            Mode::Direct,
            &self.verifier,
            &headers,
            webhook_id,
            body,
            now,
        )?;
        let received = Received {
            webhook_id: checked.webhook_id,
            event: checked.event,
            attempt: 1,
            body: body.as_ref().into(),
            received_at: now,
        };
        let left = self.deadline.saturating_sub(arrived.elapsed());
        let applied =
            tokio::time::timeout(left, self.driver.apply_direct(received, checked.signature))
                .await
                .map_err(|_| ReceiveError::HandlerTimedOut)?;
        match applied {
            Ok(Applied::Done) => Ok(Answered::Accepted),
            Ok(Applied::Duplicate) => Ok(Answered::Duplicate),
            Ok(Applied::Replayed) => Err(ReceiveError::Replayed),
            Err(EffectError::Store(err)) => Err(ReceiveError::Store(err)),
            Err(EffectError::Effect(text)) => Err(ReceiveError::Handler(text)),
        }
    }
}

/// A POST route for exactly-once direct mode: answers 200 once your code's writes and the
/// record of the delivery committed together, or when the delivery was already recorded
/// (duplicate); the status of [`ReceiveError::http_status`] otherwise (500 when your code
/// failed: nothing of it was committed, and the sender retries). Concurrent deliveries of one
/// id wait for each other instead of answering 409. Every log event of a delivery is recorded
/// in a `webhook_delivery` span carrying its `webhook_id`.
pub fn exactly_once_route<X, T>(receiver: ExactlyOnceReceiver<X>) -> MethodRouter<T>
where
    X: Transactional,
    T: Clone + Send + Sync + 'static,
{
    crate::metrics::describe();
    let limit = receiver.verifier.max_body_bytes();
    post(
        |State(receiver): State<Arc<ExactlyOnceReceiver<X>>>,
         headers: HeaderMap,
         body: Result<Bytes, BytesRejection>| async move {
            let id = webhook_id(&headers);
            let span = delivery_span(id.as_ref());
            async move { answer(Mode::Direct, receiver.receive(headers, id, body).await) }
                .instrument(span)
                .await
        },
    )
    .layer(DefaultBodyLimit::max(limit))
    .with_state(Arc::new(receiver))
}
