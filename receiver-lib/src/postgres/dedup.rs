//! A [`DedupStore`] in PostgreSQL that several replicas share: each claim is one row of a
//! batched call of `svc_receiver_dedup_many` (one round trip and one commit, shared by the
//! claims and completions that arrived together: see the `batch` module), atomic across
//! processes through the rows `svc_receiver_claim` locks; a completion is a row of such a
//! batch too, and a release one update. Entries past retention are pruned at most once a minute
//! per process.

use std::sync::Arc;

use super::PgDatabase;
use super::batch::{BatchStatement, Batcher};
use crate::StoreError;
use crate::dedup::{Claim, DedupPolicy, DedupStore};
use crate::pruner::Pruner;
use svc_contract::WebhookId;

/// Durable dedup store in a PostgreSQL database, shared by every replica that opens it.
#[derive(Debug, Clone)]
pub struct PgDedupStore {
    database: PgDatabase,
    policy: DedupPolicy,
    pruner: Arc<Pruner>,
    /// Combines concurrent claims and completions into one call of `svc_receiver_dedup_many`.
    batcher: Arc<Batcher<DedupMany>>,
}

/// What a row of `svc_receiver_dedup_many` does.
#[derive(Debug, Clone, Copy)]
enum Operation {
    Claim {
        signature: [u8; 32],
        now: i64,
        cutoff: i64,
        lease_until: i64,
    },
    Complete,
}

/// One claim or completion, as a row of `svc_receiver_dedup_many`.
#[derive(Debug)]
struct DedupRow {
    id: String,
    operation: Operation,
}

/// The dedup store's batched statement.
#[derive(Debug)]
struct DedupMany;

impl BatchStatement for DedupMany {
    type Row = DedupRow;

    fn key(row: &DedupRow) -> &str {
        &row.id
    }

    async fn run(
        database: &PgDatabase,
        client: &deadpool_postgres::Client,
        rows: &[&DedupRow],
    ) -> Result<Vec<String>, tokio_postgres::Error> {
        let n = rows.len();
        let (mut ops, mut ids, mut signatures) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let (mut nows, mut cutoffs, mut lease_untils) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for row in rows {
            ids.push(row.id.as_str());
            let (op, signature, now, cutoff, lease_until): (_, &[u8], _, _, _) =
                match &row.operation {
                    Operation::Claim {
                        signature,
                        now,
                        cutoff,
                        lease_until,
                    } => ("claim", &signature[..], *now, *cutoff, *lease_until),
                    Operation::Complete => ("complete", &[], 0, 0, 0),
                };
            ops.push(op);
            signatures.push(signature);
            nows.push(now);
            cutoffs.push(cutoff);
            lease_untils.push(lease_until);
        }
        let statement = client
            .prepare_cached(&format!(
                "SELECT {}($1::TEXT[], $2::TEXT[], $3::BYTEA[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[])",
                database.qualified("svc_receiver_dedup_many")
            ))
            .await?;
        client
            .query_one(
                &statement,
                &[&ops, &ids, &signatures, &nows, &cutoffs, &lease_untils],
            )
            .await?
            .try_get(0)
    }
}

impl PgDedupStore {
    /// A store in `database` (already migrated when it was opened).
    pub fn new(database: PgDatabase, policy: DedupPolicy) -> Self {
        Self {
            batcher: Arc::new(Batcher::new(database.clone())),
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
            .answer(
                client.execute(
                    &self
                        .database
                        .sql("DELETE FROM {s}.webhook_claims WHERE claimed_at <= $1"),
                    &[&cutoff],
                ),
            )
            .await?;
        client
            .answer(
                client.execute(
                    &self
                        .database
                        .sql("DELETE FROM {s}.webhook_claim_signatures WHERE seen_at <= $1"),
                    &[&cutoff],
                ),
            )
            .await?;
        Ok(claims)
    }

    /// The number of remembered deliveries that were completed.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn completed_count(&self) -> Result<u64, StoreError> {
        let client = self.database.client().await?;
        let row = client
            .answer(
                client.query_one(
                    &self
                        .database
                        .sql("SELECT COUNT(*) FROM {s}.webhook_claims WHERE state = 'done'"),
                    &[],
                ),
            )
            .await?;
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
        let answer = self
            .batcher
            .call(DedupRow {
                id: id.as_str().to_owned(),
                operation: Operation::Claim {
                    signature: *signature,
                    now,
                    cutoff,
                    lease_until,
                },
            })
            .await?;
        match answer.as_str() {
            "new" => Ok(Claim::New),
            "duplicate" => Ok(Claim::Duplicate),
            "in_flight" => Ok(Claim::InFlight),
            "replayed" => Ok(Claim::Replayed),
            other => Err(StoreError::database(format!(
                "svc_receiver_claim answered {other:?}"
            ))),
        }
    }

    async fn complete(&self, id: &WebhookId, _now: i64) -> Result<(), StoreError> {
        self.batcher
            .call(DedupRow {
                id: id.as_str().to_owned(),
                operation: Operation::Complete,
            })
            .await
            .map(drop)
    }

    async fn release(&self, id: &WebhookId) -> Result<(), StoreError> {
        let client = self.database.client().await?;
        let statement = client.answer(client.prepare_cached(
                &self.database.sql("UPDATE {s}.webhook_claims SET state = 'released' WHERE id = $1 AND state = 'in_flight'"),
            )).await?;
        client
            .answer(client.execute(&statement, &[&id.as_str()]))
            .await?;
        Ok(())
    }
}
