//! The scoring worker: picks up ended calls, scores them with [`super::evaluate`], and records
//! the outcome together with its queued webhook in one transaction, then wakes the outbox.
//! It wakes on [`Scorer::notify`] and resumes calls left `ended`/`scoring` by a restart. Each
//! call is scored in a `call_scoring` span, the root of its delivery's trace.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tracing::Instrument as _;

use super::evaluate::{self, EventIds, Outcome};
use crate::clock::Clock;
use crate::db::{Db, DbError, OutcomeRecord};
use crate::webhook::outbox::Outbox;

/// Scores calls. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Scorer {
    db: Db,
    clock: Clock,
    outbox: Outbox,
    notify: Arc<Notify>,
}

impl Scorer {
    /// A scorer that hands queued webhooks to `outbox`.
    pub fn new(db: Db, clock: Clock, outbox: Outbox) -> Self {
        Self {
            db,
            clock,
            outbox,
            notify: Arc::new(Notify::new()),
        }
    }

    /// Wakes the worker (call after a call ends).
    pub fn notify(&self) {
        self.notify.notify_one();
    }

    /// Scores every call waiting; returns how many outcomes were recorded.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn score_pending(&self) -> Result<usize, DbError> {
        let mut recorded = 0;
        for call_id in self.db.calls_to_score().await? {
            // The root of the delivery's trace: its attempts continue it from the outbox row.
            let span = tracing::info_span!("call_scoring", call_id = %call_id);
            if self.score_one(&call_id).instrument(span).await? {
                recorded += 1;
            }
        }
        Ok(recorded)
    }

    async fn score_one(&self, call_id: &str) -> Result<bool, DbError> {
        match score_call(&self.db, &self.clock, call_id).await? {
            None => Ok(false),
            Some(queued) => {
                if queued {
                    self.outbox.notify();
                }
                Ok(true)
            }
        }
    }

    /// Runs until `shutdown` resolves, scoring whenever woken (and once at start).
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send + 'static) {
        let work = async {
            loop {
                if let Err(error) = self.score_pending().await {
                    tracing::error!(error = %error, "scoring storage failure");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                self.notify.notified().await;
            }
        };
        tokio::select! {
            () = work => {}
            () = shutdown => {}
        }
    }
}

/// Scores the ended call `call_id` and records its outcome with its queued webhook, in one
/// transaction: `None` when the call was not waiting to be scored, else whether a webhook was
/// queued (the tenant has an active endpoint). The outbox is not woken: the caller does.
///
/// # Errors
/// Storage failure.
pub async fn score_call(
    db: &Db,
    clock: &Clock,
    call_id: &str,
) -> Result<Option<bool>, DbError> {
    let now = clock.now();
    let Some(call) = db.begin_scoring(call_id, now.timestamp_millis()).await? else {
        return Ok(None);
    };
    let outcome = evaluate::evaluate(call.drill_key.as_deref(), call.transcript.as_deref());
    let ids = EventIds {
        call_id,
        agent_id: &call.agent_id,
        agency_id: &call.agency_id,
        platform_agent_id: call.platform_agent_id.as_deref(),
        platform_agency_id: call.platform_agency_id.as_deref(),
        external_user_id: call.external_user_id.as_deref(),
        external_agency_id: call.external_agency_id.as_deref(),
    };
    let event = evaluate::event(
        &ids,
        &outcome,
        crate::time::format_timestamp(now),
        crate::ids::request_id(),
    );
    let body = serde_json::to_string(&event).map_err(|e| DbError::Corrupt(e.to_string()))?;
    let score_json = match &outcome {
        Outcome::Scored(score) => {
            Some(serde_json::to_string(score).map_err(|e| DbError::Corrupt(e.to_string()))?)
        }
        Outcome::NotScored(_) => None,
    };
    let queued = db
        .record_outcome(OutcomeRecord {
            call_id: call_id.to_owned(),
            tenant_id: call.tenant_id,
            score_json,
            webhook_id: crate::ids::webhook_id(),
            body,
            traceparent: svc_ops::traces::traceparent(&tracing::Span::current()),
            now: now.timestamp_millis(),
        })
        .await?;
    tracing::info!(
        call_id,
        scored = matches!(outcome, Outcome::Scored(_)),
        webhook_queued = queued,
        "call outcome recorded"
    );
    Ok(Some(queued))
}
