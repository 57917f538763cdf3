//! [`PgTx`], the transaction a [`super::PgEffect`] writes in: the connection's
//! `tokio_postgres::Client` (it derefs to one) inside the transaction the crate opened, with
//! the connection's statement cache beside it, so that an effect's statements are parsed and
//! planned once per connection instead of on every event.

use std::ops::Deref;

use deadpool_postgres::StatementCache;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Error, Statement};

/// The open transaction your [`super::PgEffect`] writes in. It derefs to the connection's
/// [`tokio_postgres::Client`] (`tx.execute(…)`, `tx.query(…)`; code that takes any client or
/// transaction takes `&**tx` through [`tokio_postgres::GenericClient`]), every statement of
/// which runs in the transaction the crate began and commits; prepare the statements you run
/// on every event with [`PgTx::prepare_cached`]:
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
///
/// It is a client and not a `tokio_postgres::Transaction` because the crate sends `BEGIN`
/// together with its first statement (one round trip less per transaction), which
/// tokio-postgres's `Transaction` cannot be built on; a `Transaction` would offer nothing more
/// through a shared reference but portals.
///
/// The cache keeps every statement prepared through it for as long as its connection lives:
/// prepare fixed texts (with parameters), not text built per event. A cached statement whose
/// result columns change under it (a migration that alters a table it reads with `*`) fails
/// with "cached plan must not change result type" until its connection is replaced.
pub struct PgTx<'a> {
    client: &'a Client,
    cache: &'a StatementCache,
}

impl<'a> PgTx<'a> {
    pub(super) fn new(client: &'a Client, cache: &'a StatementCache) -> Self {
        Self { client, cache }
    }

    /// `query` prepared on this transaction's connection, or the statement prepared for it
    /// before (the pool's statement cache, as `deadpool_postgres`'s `prepare_cached`).
    pub async fn prepare_cached(&self, query: &str) -> Result<Statement, Error> {
        self.cache.prepare(self.client, query).await
    }

    /// As [`PgTx::prepare_cached`], with the parameters' types given.
    pub async fn prepare_typed_cached(
        &self,
        query: &str,
        types: &[Type],
    ) -> Result<Statement, Error> {
        self.cache.prepare_typed(self.client, query, types).await
    }
}

impl Deref for PgTx<'_> {
    type Target = Client;

    fn deref(&self) -> &Client {
        self.client
    }
}

impl std::fmt::Debug for PgTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTx")
            .field("cached_statements", &self.cache.size())
            .finish_non_exhaustive()
    }
}
