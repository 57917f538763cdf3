//! A durable [`DedupStore`] in SQLite: claims survive restarts, concurrent claims (from tasks or
//! processes) are serialised by SQLite's write lock, and entries past retention are pruned.

use std::path::Path;
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};

use super::writer::{Pruner, Writer};
use crate::dedup::{Claim, DedupPolicy, DedupStore, StoreError, WebhookId};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS webhook_claims (
    id          TEXT PRIMARY KEY,
    signature   BLOB NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('in_flight', 'released', 'done')),
    lease_until INTEGER NOT NULL,
    claimed_at  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_claims_signature ON webhook_claims (signature);
CREATE INDEX IF NOT EXISTS webhook_claims_claimed_at ON webhook_claims (claimed_at);
";

/// Durable dedup store backed by one SQLite file (WAL, `synchronous=FULL`, group commit).
#[derive(Debug, Clone)]
pub struct SqliteDedupStore {
    writer: Writer,
    policy: DedupPolicy,
    pruner: Arc<Pruner>,
}

impl SqliteDedupStore {
    /// Opens or creates the store at `path`.
    ///
    /// # Errors
    /// [`StoreError::Database`] when the file cannot be opened or migrated.
    pub fn open(path: impl AsRef<Path>, policy: DedupPolicy) -> Result<Self, StoreError> {
        Ok(Self {
            writer: Writer::open(path.as_ref(), SCHEMA)?,
            policy,
            pruner: Arc::default(),
        })
    }

    /// Deletes entries first claimed more than the retention before `now`; returns how many.
    /// Claims also prune, at most once a minute, so calling this is optional.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn prune(&self, now: i64) -> Result<usize, StoreError> {
        let cutoff = now.saturating_sub(self.policy.retention_secs());
        self.writer
            .run(move |conn| {
                conn.execute(
                    "DELETE FROM webhook_claims WHERE claimed_at <= ?1",
                    [cutoff],
                )
            })
            .await
    }

    /// The number of remembered deliveries that were completed.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn completed_count(&self) -> Result<u64, StoreError> {
        self.writer
            .run(|conn| {
                conn.query_row(
                    "SELECT COUNT(*) FROM webhook_claims WHERE state = 'done'",
                    [],
                    |r| r.get::<_, i64>(0),
                )
            })
            .await
            .map(|n| u64::try_from(n).unwrap_or(0))
    }
}

fn claim_in(
    conn: &Connection,
    id: &str,
    signature: &[u8; 32],
    now: i64,
    policy: DedupPolicy,
    prune: bool,
) -> rusqlite::Result<Claim> {
    let cutoff = now.saturating_sub(policy.retention_secs());
    let lease_until = now.saturating_add(policy.lease_secs());
    if prune {
        conn.prepare_cached("DELETE FROM webhook_claims WHERE claimed_at <= ?1")?
            .execute([cutoff])?;
    }
    let existing: Option<(String, i64, i64)> = conn
        .prepare_cached("SELECT state, lease_until, claimed_at FROM webhook_claims WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    match existing {
        Some((_, _, claimed_at)) if claimed_at <= cutoff => {
            conn.prepare_cached("DELETE FROM webhook_claims WHERE id = ?1")?
                .execute([id])?;
        }
        Some((state, held, _)) => {
            return match state.as_str() {
                "done" => Ok(Claim::Duplicate),
                "in_flight" if held > now => Ok(Claim::InFlight),
                _ => {
                    conn.prepare_cached(
                        "UPDATE webhook_claims SET state = 'in_flight', lease_until = ?2 WHERE id = ?1",
                    )?
                    .execute(params![id, lease_until])?;
                    Ok(Claim::New)
                }
            };
        }
        None => {}
    }
    let replayed = conn
        .prepare_cached(
            "SELECT 1 FROM webhook_claims WHERE signature = ?1 AND id <> ?2 AND claimed_at > ?3 LIMIT 1",
        )?
        .query_row(params![&signature[..], id, cutoff], |_| Ok(()))
        .optional()?
        .is_some();
    if replayed {
        return Ok(Claim::Replayed);
    }
    conn.prepare_cached(
        "INSERT INTO webhook_claims (id, signature, state, lease_until, claimed_at)
         VALUES (?1, ?2, 'in_flight', ?3, ?4)",
    )?
    .execute(params![id, &signature[..], lease_until, now])?;
    Ok(Claim::New)
}

impl DedupStore for SqliteDedupStore {
    async fn claim(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        now: i64,
    ) -> Result<Claim, StoreError> {
        let (id, signature, policy) = (id.as_str().to_owned(), *signature, self.policy);
        let prune = self.pruner.due(now);
        self.writer
            .run(move |conn| claim_in(conn, &id, &signature, now, policy, prune))
            .await
    }

    async fn complete(&self, id: &WebhookId, _now: i64) -> Result<(), StoreError> {
        let id = id.as_str().to_owned();
        self.writer
            .run(move |conn| {
                conn.prepare_cached("UPDATE webhook_claims SET state = 'done' WHERE id = ?1")?
                    .execute([id])
                    .map(drop)
            })
            .await
    }

    async fn release(&self, id: &WebhookId) -> Result<(), StoreError> {
        let id = id.as_str().to_owned();
        self.writer
            .run(move |conn| {
                conn.prepare_cached(
                    "UPDATE webhook_claims SET state = 'released' WHERE id = ?1 AND state = 'in_flight'",
                )?
                .execute([id])
                .map(drop)
            })
            .await
    }
}
