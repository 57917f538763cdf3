//! Exactly-once effects on SQLite: [`SqliteExactlyOnce`] runs your [`SqliteEffect`] on the
//! inbox's own file, so that your tables and the inbox share one database and one transaction.
//!
//! SQLite lets one connection write at a time, and the inbox already has one writer thread
//! that commits everything queued together (group commit). A second connection for your
//! transactions would fight it for the file's write lock: every accept would wait for your
//! transaction and every transaction for the batch in progress, and each writer switch makes
//! the inbox reload its in-memory index. So your code runs **on the writer thread, inside its
//! group transaction**, each event under a savepoint of its own:
//! - the savepoint covers your writes and the "done" mark of the event; your `Err` (or panic)
//!   rolls back to it, leaving the rest of the batch (other deliveries' accepts, other
//!   events' effects) as it was;
//! - the batch commits once for everything in it (one fsync), and only then is anyone
//!   answered: the sender's 200 in direct mode, the worker's settlement in inbox mode;
//! - a crash before that commit loses the whole batch, your writes and their marks together:
//!   nothing was answered, so the sender (direct mode) or the inbox (inbox mode) tries again.
//!
//! The trade-off: your code runs one event at a time, on the thread that also stores the
//! deliveries, so while it runs nothing else is written to the file. Keep it to a few quick
//! statements (milliseconds); do no network I/O in it (do that after, from the inbox, or
//! from a table your effect fills). Writes of your own outside the effect, from other
//! connections, are safe (SQLite serialises them) but each one makes the inbox reload its
//! index before its next batch (see the `sqlite` module's costs).

use std::sync::Arc;

use rusqlite::Connection;

use super::SqliteInbox;
use crate::exactly_once::{Applied, EffectError, Transactional, panic_text};
use crate::handler::{EventHandler, Received};

/// Your code's effect of one event, written on the connection it is given, which is inside an
/// open transaction (never begin, commit or roll back yourself: return `Err` to roll back).
/// Any `Fn(&Received, &Connection) -> Result<(), E>` with a displayable `E` is one (write the
/// closure's parameter types: `|received: &Received, conn: &Connection| …`).
pub trait SqliteEffect: Send + Sync + 'static {
    /// Your code's failure (logged with `{:#}`, stored as the inbox entry's last error).
    type Error: std::fmt::Display;

    /// Writes the effect of `received` on `conn`.
    ///
    /// # Errors
    /// Your failure: every write of this call is rolled back.
    fn apply(&self, received: &Received, conn: &Connection) -> Result<(), Self::Error>;
}

impl<F, E> SqliteEffect for F
where
    F: Fn(&Received, &Connection) -> Result<(), E> + Send + Sync + 'static,
    E: std::fmt::Display,
{
    type Error = E;

    fn apply(&self, received: &Received, conn: &Connection) -> Result<(), E> {
        self(received, conn)
    }
}

/// Runs a [`SqliteEffect`] exactly once per event, in the inbox file's transaction (see the
/// module docs); cheap to clone. Use it as the handler of the workers of the inbox it was
/// built on (inbox mode), or in `svc_receiver::axum::exactly_once_route` (direct mode).
pub struct SqliteExactlyOnce<E> {
    inbox: SqliteInbox,
    effect: Arc<E>,
}

impl<E> Clone for SqliteExactlyOnce<E> {
    fn clone(&self) -> Self {
        Self {
            inbox: self.inbox.clone(),
            effect: Arc::clone(&self.effect),
        }
    }
}

impl<E> std::fmt::Debug for SqliteExactlyOnce<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteExactlyOnce")
            .field("inbox", &self.inbox)
            .finish_non_exhaustive()
    }
}

/// Runs `effect` under a savepoint; on success `then` (the crate's own writes) under it too.
/// Rolls back to it on the effect's failure (`Ok(Err(text))`); `Err` only when the database
/// itself failed.
fn in_savepoint<E: SqliteEffect>(
    conn: &Connection,
    effect: &E,
    received: &Received,
    then: impl FnOnce() -> rusqlite::Result<()>,
) -> rusqlite::Result<Result<(), String>> {
    conn.execute_batch("SAVEPOINT svc_receiver_effect")?;
    let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        effect.apply(received, conn)
    })) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => Err(format!("{err:#}")),
        Err(panic) => Err(panic_text(&*panic)),
    };
    match outcome {
        Ok(()) => {
            then()?;
            conn.execute_batch("RELEASE svc_receiver_effect")?;
            Ok(Ok(()))
        }
        Err(text) => {
            conn.execute_batch("ROLLBACK TO svc_receiver_effect; RELEASE svc_receiver_effect")?;
            Ok(Err(text))
        }
    }
}

impl<E: SqliteEffect> SqliteExactlyOnce<E> {
    /// Runs `effect` with the events of `inbox`, in `inbox`'s file: your tables live in that
    /// file too (create them on a connection of your own, or in the effect).
    pub fn new(inbox: SqliteInbox, effect: E) -> Self {
        Self {
            inbox,
            effect: Arc::new(effect),
        }
    }

    /// The inbox it marks events done in.
    pub fn inbox(&self) -> &SqliteInbox {
        &self.inbox
    }

    /// Inbox mode: one attempt at an entry the workers handed out.
    async fn apply_entry(&self, received: Received) -> Result<(), EffectError> {
        let effect = Arc::clone(&self.effect);
        let outcome = self
            .inbox
            .writer
            .run(move |conn, index| {
                let id = received.webhook_id.as_str();
                let Some(&seq) = index.rows.get(id) else {
                    return Ok(Err(format!(
                        "webhook {id} is not stored in this exactly-once handler's inbox"
                    )));
                };
                let state: String = conn
                    .prepare_cached("SELECT state FROM webhook_inbox WHERE rowid = ?1")?
                    .query_row([seq], |row| row.get(0))?;
                if state == "done" {
                    // Done by an earlier run whose settlement was lost.
                    return Ok(Ok(()));
                }
                in_savepoint(conn, &*effect, &received, || {
                    conn.prepare_cached(
                        "UPDATE webhook_inbox SET state = 'done', last_error = NULL WHERE rowid = ?1",
                    )?
                    .execute([seq])
                    .map(drop)
                })
            })
            .await?;
        outcome.map_err(EffectError::Effect)
    }
}

impl<E: SqliteEffect> EventHandler for SqliteExactlyOnce<E> {
    type Error = String;

    async fn handle(&self, received: Received) -> Result<(), String> {
        self.apply_entry(received)
            .await
            .map_err(EffectError::into_text)
    }
}

impl<E: SqliteEffect> Transactional for SqliteExactlyOnce<E> {
    async fn apply_direct(
        &self,
        received: Received,
        signature: [u8; 32],
    ) -> Result<Applied, EffectError> {
        let effect = Arc::clone(&self.effect);
        let now = received.received_at;
        let cutoff = self.inbox.prune_cutoff(now);
        let outcome = self
            .inbox
            .writer
            .run(move |conn, index| {
                if let Some(cutoff) = cutoff {
                    super::inbox::prune_in(conn, index, cutoff)?;
                }
                let id = received.webhook_id.as_str();
                conn.execute_batch("SAVEPOINT svc_receiver_delivery")?;
                let accepted =
                    super::inbox::accept_in(conn, index, id, &signature, &received.body, now, None);
                let stored = match accepted {
                    Ok(crate::inbox::Accepted::Stored) => conn.last_insert_rowid(),
                    Ok(other) => {
                        conn.execute_batch("RELEASE svc_receiver_delivery")?;
                        return Ok(Ok(if other == crate::inbox::Accepted::Duplicate {
                            Applied::Duplicate
                        } else {
                            Applied::Replayed
                        }));
                    }
                    Err(err) => return Err(err),
                };
                let ran = in_savepoint(conn, &*effect, &received, || {
                    conn.prepare_cached("UPDATE webhook_inbox SET state = 'done' WHERE rowid = ?1")?
                        .execute([stored])
                        .map(drop)
                })?;
                match ran {
                    Ok(()) => {
                        conn.execute_batch("RELEASE svc_receiver_delivery")?;
                        Ok(Ok(Applied::Done))
                    }
                    Err(text) => {
                        // Not recorded either: the sender's retry runs it again.
                        conn.execute_batch(
                            "ROLLBACK TO svc_receiver_delivery; RELEASE svc_receiver_delivery",
                        )?;
                        index.remove(stored, id, &signature);
                        Ok(Err(text))
                    }
                }
            })
            .await;
        match &outcome {
            Ok(Ok(Applied::Done)) => crate::metrics::handler_run("direct", "ok"),
            Ok(Err(_)) => crate::metrics::handler_run("direct", "error"),
            _ => {}
        }
        match outcome {
            Ok(Ok(applied)) => Ok(applied),
            Ok(Err(text)) => Err(EffectError::Effect(text)),
            Err(err) => Err(EffectError::Store(err)),
        }
    }
}
