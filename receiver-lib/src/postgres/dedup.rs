//! A [`DedupStore`] in PostgreSQL that several replicas share: each claim is one call of
//! `svc_receiver_claim` (one round trip, one commit), atomic across processes through the
//! rows it locks; completions and releases are one update each. Entries past retention are
//! pruned at most once a minute per process.

use std::sync::Arc;

use super::{PgDatabase, db_error};
use crate::dedup::{Claim, DedupPolicy, DedupStore, StoreError, WebhookId};
use crate::pruner::Pruner;

/// Durable dedup store in a PostgreSQL database, shared by every replica that opens it.
#[derive(Debug, Clone)]
pub struct PgDedupStore {
    database: PgDatabase,
    policy: DedupPolicy,
    pruner: Arc<Pruner>,
}

impl PgDedupStore {
    /// A store in `database` (already migrated when it was opened).
    pub fn new(database: PgDatabase, policy: DedupPolicy) -> Self {
        Self {
            database,
            policy,
            pruner: Arc::default(),
        }
    }

    /// Connects to the database at `url` (see [`PgDatabase::connect`]) and opens the store.
    ///
    /// # Errors
    /// As [`PgDatabase::connect`].
    pub async fn connect(url: &str, policy: DedupPolicy) -> Result<Self, StoreError> {
        Ok(Self::new(PgDatabase::connect(url).await?, policy))
    }

    /// Deletes claims and signatures first seen more than the retention before `now`; returns
    /// how many claims. Claims also prune, at most once a minute, so calling this is optional.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn prune(&self, now: i64) -> Result<u64, StoreError> {
        let cutoff = now.saturating_sub(self.policy.retention_secs());
        let client = self.database.client().await?;
        let claims = client
            .execute(
                "DELETE FROM webhook_claims WHERE claimed_at <= $1",
                &[&cutoff],
            )
            .await
            .map_err(|e| db_error(&e))?;
        client
            .execute(
                "DELETE FROM webhook_claim_signatures WHERE seen_at <= $1",
                &[&cutoff],
            )
            .await
            .map_err(|e| db_error(&e))?;
        Ok(claims)
    }

    /// The number of remembered deliveries that were completed.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn completed_count(&self) -> Result<u64, StoreError> {
        let client = self.database.client().await?;
        let row = client
            .query_one(
                "SELECT COUNT(*) FROM webhook_claims WHERE state = 'done'",
                &[],
            )
            .await
            .map_err(|e| db_error(&e))?;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }
}

impl DedupStore for PgDedupStore {
    async fn claim(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        now: i64,
    ) -> Result<Claim, StoreError> {
        if self.pruner.due(now) {
            self.prune(now).await?;
        }
        let cutoff = now.saturating_sub(self.policy.retention_secs());
        let lease_until = now.saturating_add(self.policy.lease_secs());
        let client = self.database.client().await?;
        let statement = client
            .prepare_cached("SELECT svc_receiver_claim($1, $2, $3, $4, $5)")
            .await
            .map_err(|e| db_error(&e))?;
        let row = client
            .query_one(
                &statement,
                &[&id.as_str(), &&signature[..], &now, &cutoff, &lease_until],
            )
            .await
            .map_err(|e| db_error(&e))?;
        match row.get::<_, &str>(0) {
            "new" => Ok(Claim::New),
            "duplicate" => Ok(Claim::Duplicate),
            "in_flight" => Ok(Claim::InFlight),
            "replayed" => Ok(Claim::Replayed),
            other => Err(StoreError::Database(format!(
                "svc_receiver_claim answered {other:?}"
            ))),
        }
    }

    async fn complete(&self, id: &WebhookId, _now: i64) -> Result<(), StoreError> {
        let client = self.database.client().await?;
        let statement = client
            .prepare_cached("UPDATE webhook_claims SET state = 'done' WHERE id = $1")
            .await
            .map_err(|e| db_error(&e))?;
        client
            .execute(&statement, &[&id.as_str()])
            .await
            .map_err(|e| db_error(&e))?;
        Ok(())
    }

    async fn release(&self, id: &WebhookId) -> Result<(), StoreError> {
        let client = self.database.client().await?;
        let statement = client
            .prepare_cached(
                "UPDATE webhook_claims SET state = 'released' WHERE id = $1 AND state = 'in_flight'",
            )
            .await
            .map_err(|e| db_error(&e))?;
        client
            .execute(&statement, &[&id.as_str()])
            .await
            .map_err(|e| db_error(&e))?;
        Ok(())
    }
}
