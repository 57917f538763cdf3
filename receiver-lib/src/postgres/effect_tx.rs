//! [`PgTx`], the transaction a [`super::PgEffect`] writes in: tokio-postgres's own
//! transaction (it derefs to one) with the connection's statement cache beside it, so that an
//! effect's statements are parsed and planned once per connection instead of on every event.

use std::ops::Deref;

use deadpool_postgres::StatementCache;
use tokio_postgres::types::Type;
use tokio_postgres::{Error, Statement, Transaction};

/// The open transaction your [`super::PgEffect`] gets: use it as the
/// [`tokio_postgres::Transaction`] it derefs to (`tx.execute(…)`, `tx.query(…)`), and prepare
/// the statements you run on every event with [`PgTx::prepare_cached`]:
///
/// ```rust,ignore
/// let insert = tx.prepare_cached("INSERT INTO call_scores (call_id) VALUES ($1)").await?;
/// tx.execute(&insert, &[&received.event.call_id]).await?;
/// ```
///
/// `tx.execute("INSERT …", params)` with the text prepares the statement, runs it and closes
/// it: two round trips to the server, and the statement parsed and planned every time. A
/// cached statement is one round trip, prepared once per pooled connection (statements are
/// not transactional: one prepared in a transaction that rolls back stays prepared).
pub struct PgTx<'a> {
    tx: &'a Transaction<'a>,
    cache: &'a StatementCache,
}

impl<'a> PgTx<'a> {
    pub(super) fn new(tx: &'a Transaction<'a>, cache: &'a StatementCache) -> Self {
        Self { tx, cache }
    }

    /// `query` prepared on this transaction's connection, or the statement prepared for it
    /// before (the pool's statement cache, as `deadpool_postgres`'s `prepare_cached`).
    pub async fn prepare_cached(&self, query: &str) -> Result<Statement, Error> {
        self.cache.prepare(self.tx.client(), query).await
    }

    /// As [`PgTx::prepare_cached`], with the parameters' types given.
    pub async fn prepare_typed_cached(
        &self,
        query: &str,
        types: &[Type],
    ) -> Result<Statement, Error> {
        self.cache
            .prepare_typed(self.tx.client(), query, types)
            .await
    }

    /// The transaction, for code that takes a `&tokio_postgres::Transaction`.
    pub fn transaction(&self) -> &'a Transaction<'a> {
        self.tx
    }
}

impl<'a> Deref for PgTx<'a> {
    type Target = Transaction<'a>;

    fn deref(&self) -> &Transaction<'a> {
        self.tx
    }
}

impl std::fmt::Debug for PgTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTx")
            .field("cached_statements", &self.cache.size())
            .finish_non_exhaustive()
    }
}
