//! The durable inbox in PostgreSQL, one queue for every replica: accepting is one row of a
//! batched call of `svc_receiver_inbox_accept_traced_many` (`svc_receiver_inbox_accept_many`,
//! then each stored row's trace context, in one transaction; one round trip, one commit before the 2xx,
//! shared by the accepts that arrived together: see the `batch` module); workers of any
//! process take the oldest due entry with `FOR UPDATE SKIP LOCKED`, so two never take the same
//! one, and push its due time past the lease, so an entry whose worker died is due again (to
//! any replica) once the lease runs out.
//!
//! A worker learns of an arrival in its own process at once; of one stored by another replica
//! at its next poll (within a second).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::PgDatabase;
use super::batch::{BatchStatement, Batcher};
use crate::inbox::{
    Accepted, DeadLetter, Inbox, InboxAdmin, InboxEntry, InboxPolicy, InboxStats, Settled,
};
use crate::pruner::Pruner;
use crate::{StoreError, TraceParent};
use svc_contract::WebhookId;

/// The durable inbox in a PostgreSQL database; cheap to clone. Every replica that opens the
/// same database shares one queue.
#[derive(Debug, Clone)]
pub struct PgInbox {
    database: PgDatabase,
    policy: InboxPolicy,
    arrived: Arc<Notify>,
    pruner: Arc<Pruner>,
    /// Entries handed out through this handle (or a clone) and not yet settled.
    in_hand: Arc<AtomicU64>,
    /// Combines concurrent accepts into one call of `svc_receiver_inbox_accept_traced_many`.
    accepts: Arc<Batcher<AcceptMany>>,
}

/// One accept, as a row of `svc_receiver_inbox_accept_traced_many`.
#[derive(Debug)]
struct AcceptRow {
    id: String,
    signature: [u8; 32],
    body: Vec<u8>,
    now: i64,
    /// The sender's trace context, as [`TraceParent::as_str`] wrote it.
    traceparent: Option<String>,
}

/// The inbox's batched statement.
#[derive(Debug)]
struct AcceptMany;

impl BatchStatement for AcceptMany {
    type Row = AcceptRow;

    fn key(row: &AcceptRow) -> &str {
        &row.id
    }

    async fn run(
        database: &PgDatabase,
        client: &deadpool_postgres::Client,
        rows: &[&AcceptRow],
    ) -> Result<Vec<String>, tokio_postgres::Error> {
        let ids: Vec<&str> = rows.iter().map(|row| row.id.as_str()).collect();
        let signatures: Vec<&[u8]> = rows.iter().map(|row| &row.signature[..]).collect();
        let bodies: Vec<&[u8]> = rows.iter().map(|row| &row.body[..]).collect();
        let nows: Vec<i64> = rows.iter().map(|row| row.now).collect();
        let traceparents: Vec<Option<&str>> =
            rows.iter().map(|row| row.traceparent.as_deref()).collect();
        let statement = client
            .prepare_cached(&format!(
                "SELECT {}($1::TEXT[], $2::BYTEA[], $3::BYTEA[], $4::BIGINT[], $5::TEXT[])",
                database.qualified("svc_receiver_inbox_accept_traced_many")
            ))
            .await?;
        client
            .query_one(
                &statement,
                &[&ids, &signatures, &bodies, &nows, &traceparents],
            )
            .await?
            .try_get(0)
    }
}

impl PgInbox {
    /// An inbox in `database` (already migrated when it was opened).
    pub fn new(database: PgDatabase, policy: InboxPolicy) -> Self {
        crate::metrics::describe();
        Self {
            policy,
            arrived: Arc::new(Notify::new()),
            pruner: Arc::default(),
            in_hand: Arc::default(),
            accepts: Arc::new(Batcher::new(database.clone())),
            database,
        }
    }

    /// Connects to the database at `url` (see [`PgDatabase::connect`]) and opens the inbox.
    ///
    /// # Errors
    /// As [`PgDatabase::connect`].
    pub async fn connect(url: &str, policy: InboxPolicy) -> Result<Self, StoreError> {
        Ok(Self::new(PgDatabase::connect(url).await?, policy))
    }

    /// The database it is in.
    pub fn database(&self) -> &PgDatabase {
        &self.database
    }

    /// Retention: forgets processed entries received at or before `cutoff` (pending and dead
    /// ones are never dropped), and the signatures seen by then: later attempts' all, and
    /// those a delivery was stored with once it is no longer stored.
    async fn prune(&self, cutoff: i64) -> Result<(), StoreError> {
        let client = self.database.client().await?;
        client
            .answer(client.execute(
                &self.database.sql(
                    "DELETE FROM {s}.webhook_inbox WHERE state = 'done' AND received_at <= $1",
                ),
                &[&cutoff],
            ))
            .await?;
        client
            .answer(client.execute(
                &self.database.sql("DELETE FROM {s}.webhook_inbox_signatures s WHERE seen_at <= $1
                 AND (NOT first OR NOT EXISTS (SELECT 1 FROM {s}.webhook_inbox i WHERE i.id = s.id))"),
                &[&cutoff],
            ))
            .await?;
        Ok(())
    }

    /// Runs one statement that changes rows; returns how many.
    async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let client = self.database.client().await?;
        let statement = client.answer(client.prepare_cached(sql)).await?;
        client.answer(client.execute(&statement, params)).await
    }
}

impl Inbox for PgInbox {
    fn policy(&self) -> InboxPolicy {
        self.policy
    }

    async fn accept(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        body: &[u8],
        now: i64,
    ) -> Result<Accepted, StoreError> {
        self.accept_traced(id, signature, body, None, now).await
    }

    async fn accept_traced(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        body: &[u8],
        traceparent: Option<&TraceParent>,
        now: i64,
    ) -> Result<Accepted, StoreError> {
        if self.pruner.due(now) {
            self.prune(now.saturating_sub(self.policy.retention_secs()))
                .await?;
        }
        let answer = self
            .accepts
            .call(AcceptRow {
                id: id.as_str().to_owned(),
                signature: *signature,
                body: body.to_vec(),
                now,
                traceparent: traceparent.map(|t| t.as_str().to_owned()),
            })
            .await?;
        let accepted = match answer.as_str() {
            "stored" => Accepted::Stored,
            "duplicate" => Accepted::Duplicate,
            "replayed" => Accepted::Replayed,
            other => {
                return Err(StoreError::database(format!(
                    "svc_receiver_inbox_accept_traced_many answered {other:?}"
                )));
            }
        };
        if accepted == Accepted::Stored {
            self.arrived.notify_one();
        }
        Ok(accepted)
    }

    async fn next_due(&self, now: i64) -> Result<Option<InboxEntry>, StoreError> {
        let lease_until = now.saturating_add(self.policy.lease_secs());
        let client = self.database.client().await?;
        let statement = client
            .answer(client.prepare_cached(&self.database.sql(
                "UPDATE {s}.webhook_inbox SET attempts = attempts + 1, due_at = $2
                 WHERE id = (SELECT id FROM {s}.webhook_inbox
                             WHERE state = 'pending' AND due_at <= $1
                             ORDER BY due_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED)
                 RETURNING id, body, attempts, received_at, traceparent",
            )))
            .await?;
        let row = client
            .answer(client.query_opt(&statement, &[&now, &lease_until]))
            .await?;
        if row.is_some() {
            self.in_hand.fetch_add(1, Ordering::Relaxed);
        }
        Ok(row.and_then(|row| {
            // Every stored id was a valid webhook id when it was accepted.
            let webhook_id = WebhookId::parse(row.get::<_, &str>(0).as_bytes()).ok()?;
            Some(InboxEntry {
                webhook_id,
                body: row.get(1),
                attempt: u32::try_from(row.get::<_, i32>(2)).unwrap_or(u32::MAX),
                received_at: row.get(3),
                // Written by `accept_traced` only, from a parsed value; anything else is ignored.
                traceparent: row
                    .get::<_, Option<&str>>(4)
                    .and_then(|t| TraceParent::parse(t.as_bytes())),
            })
        }))
    }

    async fn settle(
        &self,
        entry: &InboxEntry,
        outcome: Result<(), String>,
        now: i64,
    ) -> Result<Settled, StoreError> {
        let (settled, due_at) = self.policy.settlement(entry, &outcome, now);
        let error = outcome.err();
        self.execute(
            // A done entry stays done: another worker (of any replica) may have handed it out
            // again after this one's lease ran out and settled it first; this late outcome
            // must not bring it back.
            &self.database.sql(
                "UPDATE {s}.webhook_inbox SET state = $2, due_at = $3, last_error = $4
             WHERE id = $1 AND state <> 'done'",
            ),
            &[
                &entry.webhook_id.as_str(),
                &settled.state(),
                &due_at,
                &error,
            ],
        )
        .await?;
        Ok(settled)
    }

    fn wait_for_arrival(&self, max_wait: Duration) -> impl Future<Output = ()> + Send {
        let arrived = Arc::clone(&self.arrived);
        async move {
            let _ = tokio::time::timeout(max_wait, arrived.notified()).await;
        }
    }

    /// A committed write on a connection of the pool, as an accept would take: a connection
    /// is free, and the database answers and takes a write (the schema's version row set to
    /// what it holds: a new row version and its WAL record). A read would pass where every
    /// accept fails on a database switched read-only (a standby after a failover,
    /// `default_transaction_read_only`). It does not see a full disk: the row fits in its
    /// page, where accepts need new ones.
    async fn check_writable(&self) -> Result<(), StoreError> {
        let client = self.database.client().await?;
        client
            .answer(client.execute(
                &self.database.sql(
                    "UPDATE {s}.svc_receiver_schema SET version = version
                 WHERE version = (SELECT max(version) FROM {s}.svc_receiver_schema)",
                ),
                &[],
            ))
            .await
            .map(drop)
    }

    async fn stats(&self) -> Result<InboxStats, StoreError> {
        let client = self.database.client().await?;
        let row = client
            .answer(client.query_one(
                &self.database.sql(
                    "SELECT COUNT(*) FILTER (WHERE state = 'pending'),
                        MIN(received_at) FILTER (WHERE state = 'pending'),
                        COUNT(*) FILTER (WHERE state = 'dead')
                 FROM {s}.webhook_inbox",
                ),
                &[],
            ))
            .await?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let pending = count(row.get(0));
        // Entries in this process's hands are pending rows too, leased until settled.
        let leased = self.in_hand.load(Ordering::Relaxed).min(pending);
        Ok(InboxStats {
            pending: pending - leased,
            leased,
            dead: count(row.get(2)),
            oldest_pending_received_at: row.get(1),
        })
    }
}

impl InboxAdmin for PgInbox {
    async fn contains(&self, id: &WebhookId) -> Result<bool, StoreError> {
        let client = self.database.client().await?;
        let row = client
            .answer(
                client.query_one(
                    &self
                        .database
                        .sql("SELECT EXISTS (SELECT 1 FROM {s}.webhook_inbox WHERE id = $1)"),
                    &[&id.as_str()],
                ),
            )
            .await?;
        Ok(row.get(0))
    }

    async fn counts(&self) -> Result<(u64, u64, u64), StoreError> {
        let client = self.database.client().await?;
        let row = client
            .answer(client.query_one(
                &self.database.sql(
                    "SELECT COUNT(*) FILTER (WHERE state = 'pending'),
                        COUNT(*) FILTER (WHERE state = 'done'),
                        COUNT(*) FILTER (WHERE state = 'dead')
                 FROM {s}.webhook_inbox",
                ),
                &[],
            ))
            .await?;
        let n = |i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(0);
        Ok((n(0), n(1), n(2)))
    }

    async fn dead_letters(&self) -> Result<Vec<DeadLetter>, StoreError> {
        let client = self.database.client().await?;
        let rows = client
            .answer(client.query(
                &self.database.sql(
                    "SELECT id, attempts, COALESCE(last_error, ''), received_at, body
                 FROM {s}.webhook_inbox WHERE state = 'dead' ORDER BY seq",
                ),
                &[],
            ))
            .await?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                DeadLetter::read(
                    row.get(0),
                    i64::from(row.get::<_, i32>(1)),
                    row.get(2),
                    row.get(3),
                    row.get(4),
                )
            })
            .collect())
    }

    async fn requeue_dead_letter(&self, id: &WebhookId, now: i64) -> Result<bool, StoreError> {
        let requeued = self
            .execute(
                &self.database.sql(
                    "UPDATE {s}.webhook_inbox SET state = 'pending', attempts = 0, due_at = $2
                 WHERE id = $1 AND state = 'dead'",
                ),
                &[&id.as_str(), &now],
            )
            .await?;
        if requeued > 0 {
            self.arrived.notify_one();
        }
        Ok(requeued > 0)
    }

    async fn requeue_all_dead_letters(&self, now: i64) -> Result<u64, StoreError> {
        let requeued = self
            .execute(
                &self.database.sql(
                    "UPDATE {s}.webhook_inbox SET state = 'pending', attempts = 0, due_at = $1
                 WHERE state = 'dead'",
                ),
                &[&now],
            )
            .await?;
        if requeued > 0 {
            self.arrived.notify_waiters();
            self.arrived.notify_one();
        }
        Ok(requeued)
    }

    async fn discard_dead_letter(&self, id: &WebhookId) -> Result<bool, StoreError> {
        let discarded = self
            .execute(
                &self.database.sql(
                    "UPDATE {s}.webhook_inbox SET state = 'done' WHERE id = $1 AND state = 'dead'",
                ),
                &[&id.as_str()],
            )
            .await?;
        Ok(discarded > 0)
    }
}
