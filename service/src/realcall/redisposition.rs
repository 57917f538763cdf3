//! A re-disposition (contract section 3): the operator changes a real call's disposition and
//! the call is scored again from its transcript. `score` (with `compliancePercent` and
//! `complianceScorecard`), `scoredAt` and `updatedAt` change; no `call.scored` is sent.

use serde_json::Value;

use crate::clock::Clock;
use crate::db::{Db, DbError};
use crate::practice::transcript::Turn;
use crate::scoring::real_call::{self, Disposition, ProductLine, RealCall};

/// Why a re-disposition was refused.
#[derive(Debug, thiserror::Error)]
pub enum RedispositionError {
    /// No real call of the tenant has that id.
    #[error("no real call {0} for this tenant")]
    NotFound(String),
    /// The call was stored not scored; it stays so.
    #[error("call {0} was not scored (its transcript has no rep turn); it cannot be re-scored")]
    NotScored(String),
    /// A stored value does not read back.
    #[error("call {0}: {1}")]
    Corrupt(String, String),
    /// Storage failure.
    #[error(transparent)]
    Db(#[from] DbError),
}

/// What a re-disposition changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Redisposed {
    /// The call.
    pub call_id: String,
    /// The disposition before.
    pub disposition_before: String,
    /// The disposition now.
    pub disposition: Disposition,
    /// The score before (as stored).
    pub score_before: Value,
    /// The score now.
    pub score: Value,
    /// The new `scoredAt` and `updatedAt` (ms).
    pub scored_at: i64,
}

/// Changes the disposition of the tenant's real call `call_id` and scores it again.
///
/// # Errors
/// [`RedispositionError`].
pub async fn redisposition(
    db: &Db,
    clock: &Clock,
    tenant_id: &str,
    call_id: &str,
    disposition: Disposition,
) -> Result<Redisposed, RedispositionError> {
    let call = db
        .real_call(tenant_id, call_id)
        .await?
        .ok_or_else(|| RedispositionError::NotFound(call_id.to_owned()))?;
    let corrupt = |what: String| RedispositionError::Corrupt(call_id.to_owned(), what);
    if call.state != "scored" {
        return Err(RedispositionError::NotScored(call_id.to_owned()));
    }
    let turns: Vec<Turn> = serde_json::from_str(call.transcript.as_deref().unwrap_or("[]"))
        .map_err(|e| corrupt(format!("its transcript does not read: {e}")))?;
    let product_line = ProductLine::parse(&call.product_line)
        .ok_or_else(|| corrupt(format!("unknown product line {:?}", call.product_line)))?;
    let score = real_call::score(RealCall {
        turns: &turns,
        disposition,
        product_line,
        rubric: call.rubric,
    })
    .map_err(|_| RedispositionError::NotScored(call_id.to_owned()))?;
    let score = serde_json::to_value(&score).map_err(|e| corrupt(e.to_string()))?;
    let score_before = serde_json::from_str(call.score.as_deref().unwrap_or("null"))
        .map_err(|e| corrupt(format!("its score does not read: {e}")))?;
    let now = clock.now().timestamp_millis();
    if !db
        .redisposition(call_id, disposition.as_str(), &score.to_string(), now)
        .await?
    {
        return Err(RedispositionError::NotScored(call_id.to_owned()));
    }
    Ok(Redisposed {
        call_id: call.id,
        disposition_before: call.disposition,
        disposition,
        score_before,
        score,
        scored_at: now,
    })
}
