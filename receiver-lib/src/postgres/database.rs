//! [`PgDatabase`]: the crate's tables in one PostgreSQL database, over a [`PgPool`] (from
//! `svc-postgres`), migrated when it opens.
//!
//! The crate's statements wait for the server's answer at most the database's answer timeout
//! ([`PgDatabase::with_answer_timeout`], [`svc_postgres::DEFAULT_ANSWER_TIMEOUT`] by
//! default); what happens to a connection that does not answer is the pool's ([`PgPool`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Object;

use svc_postgres::{PgConn, PgPool, append_options, connect_config};

use super::migrate;
use crate::StoreError;

/// Connections a [`PgDatabase`] opens at most by default. Claims, completions and accepts are
/// batched (each store's batches hold at most two at once, a batch one round trip), so a few
/// serve many concurrent requests; inbox workers and other calls take one each, and wait when
/// none is free.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// How long opening a [`PgDatabase`] keeps trying while the database cannot be had (a server
/// starting, restarting or failing over: refused connections, `57P03` "the database system is
/// starting up"), before it gives up with the last error. Meanwhile nothing is served, so a
/// replica is not ready until its database is.
pub const START_WAIT: Duration = Duration::from_secs(60);

/// Whether opening should try again after `err`: the database is unavailable for now, but not
/// because it refused the credentials (a wrong password stays wrong).
fn unavailable_for_now(err: &tokio_postgres::Error) -> bool {
    svc_postgres::is_unavailable(err)
        && !err.code().is_some_and(|code| code.code().starts_with("28"))
}

/// A pool of connections to one database; cheap to clone (every clone shares the pool).
/// [`super::PgDedupStore`], [`super::PgInbox`] and [`super::PgRecorder`] are built on one.
///
/// The crate's tables and functions live in the connection's `search_path` (the database's
/// default schema, usually `public`), or in a schema of their own
/// ([`PgDatabase::connect_in_schema`]): then the crate's connections search only that schema.
/// Either way the crate names its schema in every statement it sends, so a
/// [`super::PgRecorder`] works in transactions of your own connections, whatever their
/// `search_path`.
#[derive(Clone)]
pub struct PgDatabase {
    pool: PgPool,
    /// The schema of the crate's tables (the one given, or the `search_path`'s first when the
    /// database was migrated), quoted as an identifier.
    schema: Arc<str>,
}

impl std::fmt::Debug for PgDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDatabase")
            .field("url", &self.pool.url())
            .field("schema", &self.schema)
            .field("max_connections", &self.pool.max_connections())
            .field("answer_timeout", &self.pool.answer_timeout())
            .finish()
    }
}

impl PgDatabase {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`; a
    /// host that starts with `/`, percent-encoded, is a Unix socket directory) with at most
    /// [`DEFAULT_MAX_CONNECTIONS`], and brings the crate's tables up to date.
    ///
    /// # Errors
    /// [`StoreError::Config`] for a URL that does not parse or asks for TLS;
    /// [`StoreError::Database`] when the database cannot be reached or migrated, or was
    /// migrated by a newer `svc-receiver`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// Like [`PgDatabase::connect`], with at most `max_connections` connections (at least 1).
    ///
    /// # Errors
    /// As [`PgDatabase::connect`].
    pub async fn connect_with(url: &str, max_connections: usize) -> Result<Self, StoreError> {
        Self::on_pool(PgPool::new(url, max_connections)?).await
    }

    /// The crate's tables in the database of `pool`, brought up to date, on that pool: its
    /// connections are shared with whoever else uses it (`svc-cli`'s PostgreSQL store,
    /// `svc-store`, shares its pool with the inbox of `svc-cli webhook serve`), and its answer
    /// timeout is the database's.
    ///
    /// # Errors
    /// [`StoreError::Database`] when the database cannot be reached or migrated, or was
    /// migrated by a newer `svc-receiver`.
    pub async fn on_pool(pool: PgPool) -> Result<Self, StoreError> {
        Self::migrate(pool, None).await
    }

    /// Like [`PgDatabase::connect_with`], with the crate's tables and functions in `schema`
    /// (created if missing), so that they sit apart from your own tables in your database.
    /// `schema` is a plain lowercase identifier: ASCII letters, digits and `_`, not starting
    /// with a digit, at most 63 bytes.
    ///
    /// The crate's own connections run with `search_path` set to that schema alone; your own
    /// connections keep theirs, and a [`super::PgRecorder`]'s statement names the schema.
    ///
    /// # Errors
    /// [`StoreError::Config`] for a schema name outside that form, and as
    /// [`PgDatabase::connect`].
    pub async fn connect_in_schema(
        url: &str,
        schema: &str,
        max_connections: usize,
    ) -> Result<Self, StoreError> {
        check_schema_name(schema)?;
        let mut config = connect_config(url)?;
        append_options(&mut config, &format!("-c search_path={schema}"));
        let pool = PgPool::with_config(config, url, max_connections)?;
        Self::migrate(pool, Some(schema)).await
    }

    /// Brings the crate's tables in `pool`'s database up to date (in `schema`, else in the
    /// `search_path`'s first schema), and learns which schema they are in. While the database
    /// cannot be had (not started yet, restarting, shutting down, refusing connections), tries
    /// again with a growing pause for up to [`START_WAIT`], saying so in the log each time.
    async fn migrate(pool: PgPool, schema: Option<&str>) -> Result<Self, StoreError> {
        let started = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(200);
        loop {
            let failure = match pool.get().await {
                Ok(conn) => {
                    let mut client = Conn(conn);
                    let session: &mut tokio_postgres::Client = &mut client;
                    match migrate::run(session, schema).await {
                        Ok(schema) => {
                            return Ok(Self {
                                pool,
                                schema: schema.into(),
                            });
                        }
                        Err(err) => {
                            let unavailable = matches!(
                                err,
                                migrate::MigrateError::Driver {
                                    unavailable: true,
                                    ..
                                }
                            );
                            (err.to_string(), unavailable)
                        }
                    }
                }
                Err(err) => {
                    let unavailable = match &err {
                        svc_postgres::PgPoolError::Connect { source, .. } => {
                            unavailable_for_now(source)
                        }
                        other => other.is_unavailable(),
                    };
                    (err.to_string(), unavailable)
                }
            };
            let (error, unavailable) = failure;
            let waited = started.elapsed();
            if !unavailable || waited + pause > START_WAIT {
                let waited = if unavailable {
                    format!(" (still after {}s)", waited.as_secs())
                } else {
                    String::new()
                };
                return Err(StoreError::database(format!(
                    "migrating {}: {error}{waited}",
                    pool.url()
                )));
            }
            tracing::warn!(database = %pool.url(), error = %error,
                retry_in_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
                "the webhook store's database cannot be had yet; trying again");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    /// Records deliveries in your transactions, for exactly-once effects
    /// ([`crate::exactly_once`]).
    pub fn recorder(&self) -> super::PgRecorder {
        super::PgRecorder::new(self.clone())
    }

    /// Forgets the ids a [`super::PgRecorder`] recorded more than `retention` ago by the
    /// database's clock (the one clock every replica shares), but never one whose delivery is
    /// still in the inbox to be handed out: pending, or a dead letter that may be requeued.
    pub(super) async fn forget_recorded(&self, retention: Duration) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let sql = forget_recorded_sql(&self.schema);
        client
            .answer(client.execute(&sql, &[&retention.as_secs_f64()]))
            .await
    }

    /// The same database, whose statements wait for the server's answer at most `timeout`
    /// (default [`svc_postgres::DEFAULT_ANSWER_TIMEOUT`]; see the module docs). Set it before
    /// building stores on it: they keep the database they were given.
    #[must_use]
    pub fn with_answer_timeout(self, timeout: Duration) -> Self {
        Self {
            pool: self.pool.with_answer_timeout(timeout),
            schema: self.schema,
        }
    }

    /// How long a statement waits for the server's answer.
    pub fn answer_timeout(&self) -> Duration {
        self.pool.answer_timeout()
    }

    /// The schema of the crate's tables, quoted as an identifier: the one given to
    /// [`PgDatabase::connect_in_schema`], else the `search_path`'s first when the database was
    /// opened.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The pool the crate's statements run on.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// `name` (one of the crate's tables or functions) qualified with the crate's schema, as
    /// every statement the crate sends writes it: a table or function of the same name
    /// elsewhere in a connection's `search_path` (planted in `public` by another role, say)
    /// is never taken for it.
    pub(crate) fn qualified(&self, name: &str) -> String {
        format!("{}.{name}", self.schema)
    }

    /// `template` with each `{s}` replaced by the crate's schema: how every statement the
    /// crate sends names its tables and functions.
    pub(crate) fn sql(&self, template: &str) -> String {
        template.replace("{s}", &self.schema)
    }

    /// The URL, with its password hidden.
    pub fn url(&self) -> &str {
        self.pool.url()
    }

    /// A connection from the pool, whose statements are awaited through [`Conn::answer`].
    pub(crate) async fn client(&self) -> Result<Conn, StoreError> {
        Ok(Conn(self.pool.get().await?))
    }
}

/// A connection of the pool as the crate's own statements use it: the pool's object (with its
/// statement cache and transactions that have one), and answers awaited with a driver error
/// as a [`StoreError`].
pub(crate) struct Conn(PgConn);

impl std::ops::Deref for Conn {
    type Target = Object;

    fn deref(&self) -> &Object {
        self.0.object()
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Object {
        self.0.object_mut()
    }
}

impl Conn {
    /// Waits for `work` (statements on this connection) at most the answer timeout, with the
    /// driver's error kept as it is (for a caller that tells transient errors apart).
    ///
    /// # Errors
    /// [`StoreError::Database`] when no answer came in time: the connection is then closed
    /// when dropped.
    pub(crate) async fn answer_raw<T>(
        &self,
        work: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<Result<T, tokio_postgres::Error>, StoreError> {
        Ok(self.0.answer_raw(work).await?)
    }

    /// Like [`Conn::answer_raw`], with a driver error as a [`StoreError`] too.
    ///
    /// # Errors
    /// [`StoreError::Database`]: the driver's error, or no answer in time.
    pub(crate) async fn answer<T>(
        &self,
        work: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, StoreError> {
        self.answer_raw(work).await?.map_err(super::db_error)
    }
}

/// Refuses a schema name outside the form the crate accepts: a plain lowercase identifier.
pub(super) fn check_schema_name(schema: &str) -> Result<(), StoreError> {
    let valid = !schema.is_empty()
        && schema.len() <= 63
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && schema
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(StoreError::Config(format!(
            "{schema:?} is not a schema name this crate accepts: lowercase ASCII letters, \
             digits and _, not starting with a digit, at most 63 bytes"
        )))
    }
}

/// Forgets the ids a recorder recorded more than `$1` seconds ago by the database's clock,
/// but none whose delivery the inbox still holds (pending, or dead): see
/// [`PgDatabase::forget_recorded`]. `schema` is quoted.
pub(super) fn forget_recorded_sql(schema: &str) -> String {
    format!(
        "DELETE FROM {schema}.webhook_recorded r
         WHERE r.recorded_at < pg_catalog.now() - pg_catalog.make_interval(secs => $1)
           AND NOT EXISTS (SELECT 1 FROM {schema}.webhook_inbox i
                           WHERE i.id = r.id AND i.state <> 'done')"
    )
}
