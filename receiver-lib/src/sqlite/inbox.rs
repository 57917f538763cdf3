//! The durable inbox: a verified event is stored in SQLite (committed with `synchronous=FULL`)
//! before the sender gets its 2xx, then handed to user code from there, with retries and
//! backoff, so nothing acknowledged is lost even if user code is slow, fails or the process
//! dies. The inbox is also the dedup and replay record for the deliveries it stores.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use foldhash::{HashMap, HashSet};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::Notify;

use super::writer::{Index, Writer};
use crate::inbox::{
    Accepted, DeadLetter, Inbox, InboxAdmin, InboxEntry, InboxPolicy, InboxStats, Settled,
};
use crate::pruner::Pruner;
use crate::{StoreError, TraceParent};
use svc_contract::WebhookId;

// Rows are appended in arrival order (`seq`, the rowid; queries say `rowid` so that files
// written before `seq` existed, whose table was keyed by id, still work: their rowids follow
// arrival order too, and their signature index, now unused, is dropped). Ids and signatures
// are looked up in the writer's
// in-memory [`InboxIndex`], not in B-trees keyed by them (see `writer`). The one index here
// grows at its end, as new rows are pending and due now. `webhook_inbox_signatures` holds the
// signatures of later attempts of stored deliveries (the sender signs each attempt afresh),
// so that a captured retry cannot be replayed under another id; they are kept for the
// retention. `traceparent` is the sender's W3C trace context a delivery arrived with (NULL:
// none), for the worker's span; a file made before it existed gets the column when opened
// (`InboxIndex::upgrade`).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS webhook_inbox (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL,
    signature   BLOB NOT NULL,
    body        BLOB NOT NULL,
    received_at INTEGER NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'done', 'dead')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    due_at      INTEGER NOT NULL,
    last_error  TEXT,
    traceparent TEXT
);
CREATE INDEX IF NOT EXISTS webhook_inbox_due ON webhook_inbox (state, due_at);
DROP INDEX IF EXISTS webhook_inbox_signature;
CREATE TABLE IF NOT EXISTS webhook_inbox_signatures (
    seq         INTEGER PRIMARY KEY,
    signature   BLOB NOT NULL,
    seen_at     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS webhook_inbox_probe (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    probes      INTEGER NOT NULL
);
";

/// Which ids and signatures the inbox holds, kept by the writer thread (about 100 bytes per
/// stored delivery).
#[derive(Debug, Default)]
pub(super) struct InboxIndex {
    /// The row of every stored id.
    pub(super) rows: HashMap<Box<str>, i64>,
    /// Every stored signature.
    signatures: HashSet<[u8; 32]>,
}

impl InboxIndex {
    fn insert(&mut self, id: &str, signature: [u8; 32], seq: i64) {
        self.rows.insert(id.into(), seq);
        self.signatures.insert(signature);
    }

    /// Forgets row `seq`: its id only if the id still points at it.
    pub(super) fn remove(&mut self, seq: i64, id: &str, signature: &[u8]) {
        if self.rows.get(id) == Some(&seq) {
            self.rows.remove(id);
        }
        if let Ok(signature) = <[u8; 32]>::try_from(signature) {
            self.signatures.remove(&signature);
        }
    }
}

impl Index for InboxIndex {
    const STORE: &'static str = "inbox";

    /// A table made before trace contexts were kept gets their column, in a transaction that
    /// keeps other processes opening the file meanwhile out (they then find it there).
    fn upgrade(conn: &Connection) -> rusqlite::Result<()> {
        let tx =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
        let (columns, with_traceparent): (i64, i64) = tx.query_row(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE name = 'traceparent')
             FROM pragma_table_info('webhook_inbox')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if columns > 0 && with_traceparent == 0 {
            tx.execute_batch("ALTER TABLE webhook_inbox ADD COLUMN traceparent TEXT")?;
        }
        tx.commit()
    }

    fn load(conn: &Connection) -> rusqlite::Result<Self> {
        let mut index = Self::default();
        let mut stmt = conn.prepare("SELECT rowid, id, signature FROM webhook_inbox")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            // Every stored signature is 32 bytes; `accept` writes nothing else.
            if let Ok(signature) = <[u8; 32]>::try_from(row.get_ref(2)?.as_blob()?) {
                index.insert(row.get_ref(1)?.as_str()?, signature, row.get(0)?);
            }
        }
        let mut stmt = conn.prepare("SELECT signature FROM webhook_inbox_signatures")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            if let Ok(signature) = <[u8; 32]>::try_from(row.get_ref(0)?.as_blob()?) {
                index.signatures.insert(signature);
            }
        }
        Ok(index)
    }
}

/// The durable inbox; cheap to clone.
#[derive(Debug, Clone)]
pub struct SqliteInbox {
    pub(super) writer: Writer<InboxIndex>,
    policy: InboxPolicy,
    arrived: Arc<Notify>,
    pruner: Arc<Pruner>,
    /// Entries handed out by [`SqliteInbox::next_due`] and not yet settled.
    in_hand: Arc<AtomicU64>,
    /// The database file, for a recorder that keeps the records of what the inbox holds.
    path: Arc<Path>,
}

impl SqliteInbox {
    /// Opens or creates the inbox at `path`.
    ///
    /// # Errors
    /// [`StoreError::Database`] when the file cannot be opened or migrated.
    pub fn open(path: impl AsRef<Path>, policy: InboxPolicy) -> Result<Self, StoreError> {
        crate::metrics::describe();
        let writer = Writer::open(path.as_ref(), SCHEMA)?;
        Ok(Self {
            writer,
            policy,
            arrived: Arc::new(Notify::new()),
            pruner: Arc::default(),
            in_hand: Arc::default(),
            path: path.as_ref().into(),
        })
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The retention's cutoff when pruning is due at `now` (at most once a minute).
    pub(super) fn prune_cutoff(&self, now: i64) -> Option<i64> {
        self.pruner
            .due(now)
            .then(|| now.saturating_sub(self.policy.retention_secs()))
    }
}

impl Inbox for SqliteInbox {
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
        let arrival = Box::new(Arrival {
            id: id.as_str().to_owned(),
            signature: *signature,
            body: body.to_vec(),
            traceparent: traceparent.map(|t| t.as_str().to_owned()),
            now,
        });
        let cutoff = self.prune_cutoff(now);
        // The arrival comes back with the answer and is freed here, on a runtime thread,
        // rather than on the writer thread: glibc's allocator frees a buffer of another
        // thread's arena under that arena's lock, which the runtime threads allocating from it
        // then wait for (seen in the load bench's profile). Boxed, it also keeps the writer's
        // job small enough to be freed without that lock.
        let (accepted, arrival) = self
            .writer
            .run(move |conn, index| {
                accept_in(conn, index, &arrival, cutoff).map(|accepted| (accepted, arrival))
            })
            .await?;
        drop(arrival);
        if accepted == Accepted::Stored {
            self.arrived.notify_one();
        }
        Ok(accepted)
    }

    async fn next_due(&self, now: i64) -> Result<Option<InboxEntry>, StoreError> {
        let lease_until = now.saturating_add(self.policy.lease_secs());
        let row = self
            .writer
            .run(move |conn, _| {
                let row = conn
                    .prepare_cached(
                        "SELECT rowid, id, body, attempts, received_at, traceparent FROM webhook_inbox
                         WHERE state = 'pending' AND due_at <= ?1 ORDER BY due_at, rowid LIMIT 1",
                    )?
                    .query_row([now], |r| {
                        Ok(DueRow {
                            seq: r.get(0)?,
                            id: r.get(1)?,
                            body: r.get(2)?,
                            attempts: r.get(3)?,
                            received_at: r.get(4)?,
                            traceparent: r.get(5)?,
                        })
                    })
                    .optional()?;
                if let Some(row) = &row {
                    conn.prepare_cached(
                        "UPDATE webhook_inbox SET attempts = attempts + 1, due_at = ?2 WHERE rowid = ?1",
                    )?
                    .execute(params![row.seq, lease_until])?;
                }
                Ok(row)
            })
            .await?;
        if row.is_some() {
            self.in_hand.fetch_add(1, Ordering::Relaxed);
        }
        Ok(row.and_then(DueRow::into_entry))
    }

    async fn settle(
        &self,
        entry: &InboxEntry,
        outcome: Result<(), String>,
        now: i64,
    ) -> Result<Settled, StoreError> {
        let id = entry.webhook_id.as_str().to_owned();
        let (settled, due_at) = self.policy.settlement(entry, &outcome, now);
        let written = self
            .writer
            .run(move |conn, index| {
                // An id no longer stored (pruned meanwhile) has nothing left to record.
                let Some(&seq) = index.rows.get(id.as_str()) else {
                    return Ok(());
                };
                let (state, error) = match (settled, outcome) {
                    (Settled::Done, _) => ("done", None),
                    (Settled::Dead, Err(e)) => ("dead", Some(e)),
                    (_, Err(e)) => ("pending", Some(e)),
                    (_, Ok(())) => ("done", None),
                };
                conn.prepare_cached(
                    // A done entry stays done: another worker may have handed it out again
                    // after this one's lease ran out and settled it first; this late outcome
                    // must not bring it back (its handler ran, and a record of it in the
                    // tenant's transaction would answer Duplicate anyway).
                    "UPDATE webhook_inbox SET state = ?2, due_at = ?3, last_error = ?4
                     WHERE rowid = ?1 AND state <> 'done'",
                )?
                .execute(params![seq, state, due_at, error])
                .map(drop)
            })
            .await;
        // Out of this process's hands once written, or once the write failed (it then comes
        // back after its lease); not before, so that the entry is never counted in no state.
        let _ = self
            .in_hand
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        written?;
        Ok(settled)
    }

    async fn wait_for_arrival(&self, max_wait: Duration) {
        let _ = tokio::time::timeout(max_wait, self.arrived.notified()).await;
    }

    async fn stats(&self) -> Result<InboxStats, StoreError> {
        let (pending_rows, oldest, dead) = self
            .writer
            .run(|conn, _| {
                let (pending, oldest): (i64, Option<i64>) = conn
                    .prepare_cached(
                        "SELECT COUNT(*), MIN(received_at) FROM webhook_inbox WHERE state = 'pending'",
                    )?
                    .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
                let dead: i64 = conn
                    .prepare_cached("SELECT COUNT(*) FROM webhook_inbox WHERE state = 'dead'")?
                    .query_row([], |r| r.get(0))?;
                Ok((pending, oldest, dead))
            })
            .await?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        // Entries in hand are pending rows too, leased until they are settled.
        let leased = self
            .in_hand
            .load(Ordering::Relaxed)
            .min(count(pending_rows));
        Ok(InboxStats {
            pending: count(pending_rows) - leased,
            leased,
            dead: count(dead),
            oldest_pending_received_at: oldest,
        })
    }

    async fn check_writable(&self) -> Result<(), StoreError> {
        self.writer
            .run(|conn, _| {
                conn.prepare_cached(
                    "INSERT INTO webhook_inbox_probe (id, probes) VALUES (1, 1)
                     ON CONFLICT (id) DO UPDATE SET probes = probes + 1",
                )?
                .execute([])
                .map(drop)
            })
            .await
    }
}

impl InboxAdmin for SqliteInbox {
    async fn contains(&self, id: &WebhookId) -> Result<bool, StoreError> {
        let id = id.as_str().to_owned();
        self.writer
            .run(move |_, index| Ok(index.rows.contains_key(id.as_str())))
            .await
    }

    async fn counts(&self) -> Result<(u64, u64, u64), StoreError> {
        self.writer
            .run(|conn, _| {
                let count = |state: &str| -> rusqlite::Result<u64> {
                    conn.query_row(
                        "SELECT COUNT(*) FROM webhook_inbox WHERE state = ?1",
                        [state],
                        |r| r.get::<_, i64>(0),
                    )
                    .map(|n| u64::try_from(n).unwrap_or(0))
                };
                Ok((count("pending")?, count("done")?, count("dead")?))
            })
            .await
    }

    async fn dead_letters(&self) -> Result<Vec<DeadLetter>, StoreError> {
        type Row = (String, i64, String, i64, Vec<u8>);
        let rows: Vec<Row> = self
            .writer
            .run(|conn, _| {
                let mut stmt = conn.prepare(
                    "SELECT id, attempts, COALESCE(last_error, ''), received_at, body
                     FROM webhook_inbox WHERE state = 'dead' ORDER BY rowid",
                )?;
                let rows = stmt.query_map([], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })?;
                rows.collect()
            })
            .await?;
        Ok(rows
            .into_iter()
            // Every stored id was a valid webhook id when it was accepted.
            .filter_map(|(id, attempts, last_error, received_at, body)| {
                DeadLetter::read(&id, attempts, last_error, received_at, body)
            })
            .collect())
    }

    async fn requeue_dead_letter(&self, id: &WebhookId, now: i64) -> Result<bool, StoreError> {
        let id = id.as_str().to_owned();
        let requeued = self
            .writer
            .run(move |conn, index| {
                let Some(&seq) = index.rows.get(id.as_str()) else {
                    return Ok(0);
                };
                conn.prepare_cached(
                    "UPDATE webhook_inbox SET state = 'pending', attempts = 0, due_at = ?2
                     WHERE rowid = ?1 AND state = 'dead'",
                )?
                .execute(params![seq, now])
            })
            .await?;
        if requeued > 0 {
            self.arrived.notify_one();
        }
        Ok(requeued > 0)
    }

    async fn requeue_all_dead_letters(&self, now: i64) -> Result<u64, StoreError> {
        let requeued = self
            .writer
            .run(move |conn, _| {
                conn.prepare_cached(
                    "UPDATE webhook_inbox SET state = 'pending', attempts = 0, due_at = ?1
                     WHERE state = 'dead'",
                )?
                .execute([now])
            })
            .await?;
        if requeued > 0 {
            self.arrived.notify_waiters();
            self.arrived.notify_one();
        }
        Ok(u64::try_from(requeued).unwrap_or(u64::MAX))
    }

    async fn discard_dead_letter(&self, id: &WebhookId) -> Result<bool, StoreError> {
        let id = id.as_str().to_owned();
        let discarded = self
            .writer
            .run(move |conn, index| {
                let Some(&seq) = index.rows.get(id.as_str()) else {
                    return Ok(0);
                };
                conn.prepare_cached(
                    "UPDATE webhook_inbox SET state = 'done' WHERE rowid = ?1 AND state = 'dead'",
                )?
                .execute([seq])
            })
            .await?;
        Ok(discarded > 0)
    }
}

/// The entry `next_due` hands out, as read (before this attempt is counted).
struct DueRow {
    seq: i64,
    id: String,
    body: Vec<u8>,
    attempts: i64,
    received_at: i64,
    traceparent: Option<String>,
}

impl DueRow {
    /// The entry; `None` for an id that is not a webhook id (the file was edited by hand).
    fn into_entry(self) -> Option<InboxEntry> {
        Some(InboxEntry {
            webhook_id: WebhookId::parse(self.id.as_bytes()).ok()?,
            body: self.body,
            attempt: u32::try_from(self.attempts.saturating_add(1)).unwrap_or(u32::MAX),
            received_at: self.received_at,
            // Written by `accept_traced` only, from a parsed value; anything else is ignored.
            traceparent: self
                .traceparent
                .and_then(|t| TraceParent::parse(t.as_bytes())),
        })
    }
}

/// A verified delivery to store.
#[derive(Debug)]
pub(super) struct Arrival {
    pub(super) id: String,
    pub(super) signature: [u8; 32],
    pub(super) body: Vec<u8>,
    /// The sender's trace context, as [`TraceParent::as_str`] wrote it.
    pub(super) traceparent: Option<String>,
    pub(super) now: i64,
}

pub(super) fn accept_in(
    conn: &Connection,
    index: &mut InboxIndex,
    arrival: &Arrival,
    prune_before: Option<i64>,
) -> rusqlite::Result<Accepted> {
    let (id, signature, body, now) = (
        arrival.id.as_str(),
        &arrival.signature,
        arrival.body.as_slice(),
        arrival.now,
    );
    if let Some(cutoff) = prune_before {
        prune_in(conn, index, cutoff)?;
    }
    if index.rows.contains_key(id) {
        if !index.signatures.contains(signature) {
            // Another attempt of a stored delivery, signed afresh: remember its signature.
            conn.prepare_cached(
                "INSERT INTO webhook_inbox_signatures (signature, seen_at) VALUES (?1, ?2)",
            )?
            .execute(params![&signature[..], now])?;
            index.signatures.insert(*signature);
        }
        return Ok(Accepted::Duplicate);
    }
    if index.signatures.contains(signature) {
        return Ok(Accepted::Replayed);
    }
    conn.prepare_cached(
        "INSERT INTO webhook_inbox (id, signature, body, received_at, state, due_at, traceparent)
         VALUES (?1, ?2, ?3, ?4, 'pending', ?4, ?5)",
    )?
    .execute(params![id, &signature[..], body, now, arrival.traceparent])?;
    index.insert(id, *signature, conn.last_insert_rowid());
    Ok(Accepted::Stored)
}

/// Retention: forgets processed entries received at or before `cutoff` (pending and dead ones
/// are never dropped). Rows are in arrival order, so only the prefix before the first row
/// received after the cutoff is visited, not the whole table.
pub(super) fn prune_in(
    conn: &Connection,
    index: &mut InboxIndex,
    cutoff: i64,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "DELETE FROM webhook_inbox
         WHERE rowid < COALESCE(
                 (SELECT rowid FROM webhook_inbox WHERE received_at > ?1 ORDER BY rowid LIMIT 1),
                 9223372036854775807)
           AND state = 'done' AND received_at <= ?1
         RETURNING rowid, id, signature",
    )?;
    let mut rows = stmt.query([cutoff])?;
    while let Some(row) = rows.next()? {
        index.remove(
            row.get(0)?,
            row.get_ref(1)?.as_str()?,
            row.get_ref(2)?.as_blob()?,
        );
    }
    let mut stmt = conn.prepare_cached(
        "DELETE FROM webhook_inbox_signatures WHERE seen_at <= ?1 RETURNING signature",
    )?;
    let mut rows = stmt.query([cutoff])?;
    while let Some(row) = rows.next()? {
        if let Ok(signature) = <[u8; 32]>::try_from(row.get_ref(0)?.as_blob()?) {
            index.signatures.remove(&signature);
        }
    }
    Ok(())
}
