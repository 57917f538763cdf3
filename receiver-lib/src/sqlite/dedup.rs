//! A durable [`DedupStore`] in SQLite: claims survive restarts, concurrent claims (from tasks or
//! processes) are serialised by the writer thread and SQLite's write lock, and entries past
//! retention are pruned. Processes sharing a file pay for it: see [`super`].

use std::path::Path;
use std::sync::Arc;

use foldhash::HashMap;
use rusqlite::{Connection, params};

use super::writer::{Index, Writer};
use crate::StoreError;
use crate::dedup::{Claim, DedupPolicy, DedupStore};
use crate::pruner::Pruner;
use svc_contract::WebhookId;

// Rows are appended in claim order (`seq`, the rowid). An id has a row per signature it was
// claimed with, so files of the first release, whose table was keyed by id, are rebuilt in
// this layout when they open ([`ClaimIndex::upgrade`]). Ids and signatures are looked up in
// the writer's in-memory [`ClaimIndex`], not in B-trees keyed by them (see `writer`).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS webhook_claims (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL,
    signature   BLOB NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('in_flight', 'released', 'done')),
    lease_until INTEGER NOT NULL,
    claimed_at  INTEGER NOT NULL
);
DROP INDEX IF EXISTS webhook_claims_signature;
DROP INDEX IF EXISTS webhook_claims_claimed_at;
";

/// One remembered claim, as the index holds it.
#[derive(Debug, Clone, Copy)]
struct ClaimRow {
    seq: i64,
    state: ClaimState,
    lease_until: i64,
    claimed_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClaimState {
    InFlight,
    Released,
    Done,
}

impl ClaimState {
    fn as_str(self) -> &'static str {
        match self {
            Self::InFlight => "in_flight",
            Self::Released => "released",
            Self::Done => "done",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "done" => Self::Done,
            "in_flight" => Self::InFlight,
            // The table's CHECK admits nothing else.
            _ => Self::Released,
        }
    }
}

/// A remembered signature: the row that recorded it last, when, and under which id.
#[derive(Debug, Clone)]
struct SignatureRow {
    seq: i64,
    claimed_at: i64,
    id: Arc<str>,
}

/// Every remembered claim and signature, kept by the writer thread (about 100 bytes each).
/// An id has one row per signature it was claimed with (the sender signs each attempt
/// afresh); its latest row carries its state.
#[derive(Debug, Default)]
struct ClaimIndex {
    claims: HashMap<Arc<str>, ClaimRow>,
    signatures: HashMap<[u8; 32], SignatureRow>,
}

impl ClaimIndex {
    fn insert(&mut self, id: &str, signature: &[u8], row: ClaimRow) {
        let id: Arc<str> = match self.claims.get_key_value(id) {
            Some((known, _)) => Arc::clone(known),
            None => id.into(),
        };
        if let Ok(signature) = <[u8; 32]>::try_from(signature) {
            let seen = SignatureRow {
                seq: row.seq,
                claimed_at: row.claimed_at,
                id: Arc::clone(&id),
            };
            self.signatures.insert(signature, seen);
        }
        self.claims.insert(id, row);
    }

    /// Forgets row `seq`: its id and signature only where they still point at it (a later
    /// claim may have recorded the same signature again).
    fn remove(&mut self, seq: i64, id: &str, signature: &[u8]) {
        if self.claims.get(id).is_some_and(|row| row.seq == seq) {
            self.claims.remove(id);
        }
        if let Ok(signature) = <[u8; 32]>::try_from(signature)
            && self
                .signatures
                .get(&signature)
                .is_some_and(|seen| seen.seq == seq)
        {
            self.signatures.remove(&signature);
        }
    }
}

impl Index for ClaimIndex {
    const STORE: &'static str = "dedup";

    /// A file of the first release keyed its claims by id (`id TEXT PRIMARY KEY`, no `seq`),
    /// which refuses the second row an id gets when it is claimed again with a fresh signature
    /// (every retry is signed afresh): such a table is rebuilt in the current layout, its rows
    /// copied in claim order, in one transaction that also keeps other processes out meanwhile.
    fn upgrade(conn: &Connection) -> rusqlite::Result<()> {
        let tx =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
        let (columns, with_seq): (i64, i64) = tx.query_row(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE name = 'seq')
             FROM pragma_table_info('webhook_claims')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if columns > 0 && with_seq == 0 {
            tx.execute_batch("ALTER TABLE webhook_claims RENAME TO webhook_claims_first_layout")?;
            tx.execute_batch(SCHEMA)?;
            tx.execute_batch(
                "INSERT INTO webhook_claims (id, signature, state, lease_until, claimed_at)
                     SELECT id, signature, state, lease_until, claimed_at
                     FROM webhook_claims_first_layout ORDER BY rowid;
                 DROP TABLE webhook_claims_first_layout;",
            )?;
        }
        tx.commit()
    }

    fn load(conn: &Connection) -> rusqlite::Result<Self> {
        let mut index = Self::default();
        let mut stmt = conn.prepare(
            "SELECT rowid, id, signature, state, lease_until, claimed_at FROM webhook_claims ORDER BY rowid",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let claim = ClaimRow {
                seq: row.get(0)?,
                state: ClaimState::parse(row.get_ref(3)?.as_str()?),
                lease_until: row.get(4)?,
                claimed_at: row.get(5)?,
            };
            index.insert(row.get_ref(1)?.as_str()?, row.get_ref(2)?.as_blob()?, claim);
        }
        Ok(index)
    }
}

/// Durable dedup store backed by one SQLite file (WAL, `synchronous=FULL`, group commit).
#[derive(Debug, Clone)]
pub struct SqliteDedupStore {
    writer: Writer<ClaimIndex>,
    policy: DedupPolicy,
    pruner: Arc<Pruner>,
}

impl SqliteDedupStore {
    /// Opens or creates the store at `path`.
    ///
    /// # Errors
    /// [`StoreError::Database`] when the file cannot be opened or migrated.
    pub fn open(path: impl AsRef<Path>, policy: DedupPolicy) -> Result<Self, StoreError> {
        crate::metrics::describe();
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
            .run(move |conn, index| prune_in(conn, index, cutoff))
            .await
    }

    /// The number of remembered deliveries that were completed.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn completed_count(&self) -> Result<u64, StoreError> {
        self.writer
            .run(|_, index| {
                let done = index
                    .claims
                    .values()
                    .filter(|c| c.state == ClaimState::Done);
                Ok(u64::try_from(done.count()).unwrap_or(u64::MAX))
            })
            .await
    }
}

/// Forgets claims first made at or before `cutoff`; returns how many. Rows are in claim order,
/// so only the prefix before the first row claimed after the cutoff is visited.
fn prune_in(conn: &Connection, index: &mut ClaimIndex, cutoff: i64) -> rusqlite::Result<usize> {
    let mut stmt = conn.prepare_cached(
        "DELETE FROM webhook_claims
         WHERE rowid < COALESCE(
                 (SELECT rowid FROM webhook_claims WHERE claimed_at > ?1 ORDER BY rowid LIMIT 1),
                 9223372036854775807)
           AND claimed_at <= ?1
         RETURNING rowid, id, signature",
    )?;
    let mut rows = stmt.query([cutoff])?;
    let mut pruned = 0;
    while let Some(row) = rows.next()? {
        index.remove(
            row.get(0)?,
            row.get_ref(1)?.as_str()?,
            row.get_ref(2)?.as_blob()?,
        );
        pruned += 1;
    }
    Ok(pruned)
}

/// Writes a claim's new state; the index follows once the write succeeded.
fn set_state(
    conn: &Connection,
    index: &mut ClaimIndex,
    id: &str,
    state: ClaimState,
    lease_until: Option<i64>,
) -> rusqlite::Result<()> {
    let Some(row) = index.claims.get_mut(id) else {
        return Ok(());
    };
    let lease_until = lease_until.unwrap_or(row.lease_until);
    conn.prepare_cached("UPDATE webhook_claims SET state = ?2, lease_until = ?3 WHERE rowid = ?1")?
        .execute(params![row.seq, state.as_str(), lease_until])?;
    row.state = state;
    row.lease_until = lease_until;
    Ok(())
}

fn claim_in(
    conn: &Connection,
    index: &mut ClaimIndex,
    id: &str,
    signature: &[u8; 32],
    now: i64,
    policy: DedupPolicy,
    prune: bool,
) -> rusqlite::Result<Claim> {
    let cutoff = now.saturating_sub(policy.retention_secs());
    let lease_until = now.saturating_add(policy.lease_secs());
    if prune {
        prune_in(conn, index, cutoff)?;
    }
    // A signature remembered under another id is a replay, whatever this id's state.
    if index
        .signatures
        .get(signature)
        .is_some_and(|seen| seen.claimed_at > cutoff && *seen.id != *id)
    {
        return Ok(Claim::Replayed);
    }
    match index.claims.get(id).copied() {
        Some(expired) if expired.claimed_at <= cutoff => {
            let signature: Vec<u8> = conn
                .prepare_cached("DELETE FROM webhook_claims WHERE rowid = ?1 RETURNING signature")?
                .query_row([expired.seq], |r| r.get(0))?;
            index.remove(expired.seq, id, &signature);
        }
        Some(row) => {
            let (claim, state, lease) = match row.state {
                ClaimState::Done => (Claim::Duplicate, ClaimState::Done, row.lease_until),
                ClaimState::InFlight if row.lease_until > now => {
                    (Claim::InFlight, ClaimState::InFlight, row.lease_until)
                }
                _ => (Claim::New, ClaimState::InFlight, lease_until),
            };
            if index.signatures.contains_key(signature) {
                if claim == Claim::New {
                    set_state(conn, index, id, state, Some(lease))?;
                }
            } else {
                // Another attempt of this delivery, signed afresh: its signature gets a row of
                // its own, which carries the id's state from now on, so that a replay of this
                // attempt under another id is caught too.
                insert_claim(conn, index, id, signature, state, lease, now)?;
            }
            return Ok(claim);
        }
        None => {}
    }
    insert_claim(
        conn,
        index,
        id,
        signature,
        ClaimState::InFlight,
        lease_until,
        now,
    )?;
    Ok(Claim::New)
}

/// Appends a row recording `id` claimed with `signature`; the index follows once it is written.
fn insert_claim(
    conn: &Connection,
    index: &mut ClaimIndex,
    id: &str,
    signature: &[u8; 32],
    state: ClaimState,
    lease_until: i64,
    now: i64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO webhook_claims (id, signature, state, lease_until, claimed_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        id,
        &signature[..],
        state.as_str(),
        lease_until,
        now
    ])?;
    let row = ClaimRow {
        seq: conn.last_insert_rowid(),
        state,
        lease_until,
        claimed_at: now,
    };
    index.insert(id, signature, row);
    Ok(())
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
            .run(move |conn, index| claim_in(conn, index, &id, &signature, now, policy, prune))
            .await
    }

    async fn complete(&self, id: &WebhookId, _now: i64) -> Result<(), StoreError> {
        let id = id.as_str().to_owned();
        self.writer
            .run(move |conn, index| set_state(conn, index, &id, ClaimState::Done, None))
            .await
    }

    async fn release(&self, id: &WebhookId) -> Result<(), StoreError> {
        let id = id.as_str().to_owned();
        self.writer
            .run(move |conn, index| match index.claims.get(id.as_str()) {
                Some(row) if row.state == ClaimState::InFlight => {
                    set_state(conn, index, &id, ClaimState::Released, None)
                }
                _ => Ok(()),
            })
            .await
    }
}
