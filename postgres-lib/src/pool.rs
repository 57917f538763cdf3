//! [`PgPool`]: the one PostgreSQL connection layer of the workspace. A pool of connections to
//! one database that replaces connections the server closed, and whose statements wait for
//! the server's answer at most an answer timeout. Nothing here knows of anyone's tables:
//! `svc-receiver`'s `PgDatabase` adds its own (migrated when it opens), and `svc-store`'s
//! PostgreSQL store builds on the same pool.
//!
//! A connection whose answer does not come in time (a network that stalls, a server that
//! hangs) is closed, never handed out again, and the idle connections of the pool are closed
//! with it (they likely went through the same broken path): the next caller opens a fresh
//! connection rather than waiting on a dead one. Without this a stalled connection would hold
//! its caller, and its place in the pool, forever: TCP does not notice a peer that is silent
//! but alive, and the pool only drops connections the driver has seen closed. A connection the
//! server closed (a restart, `pg_terminate_backend`, a network cut) is seen closed by the
//! driver and replaced at the next checkout.
//!
//! A connection's I/O runs as a task of the Tokio runtime that opened it: the runtime of the
//! task that checks one out, or the runtime given with [`PgPool::on_runtime`] (what a caller
//! that blocks a thread on the pool's futures needs, so that no connection's I/O waits for
//! the thread it blocks).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, Object, Pool, Runtime};
use tokio_postgres::NoTls;
use tokio_postgres::config::SslMode;

use crate::{DEFAULT_ANSWER_TIMEOUT, PgConfigError, describe_error, redact_url};

/// How long a checkout waits for a free connection before failing.
const WAIT_FOR_CONNECTION: Duration = Duration::from_secs(5);

/// How long opening one connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A pool of connections to one database; cheap to clone (every clone shares the pool). Its
/// connections run their transactions at `READ COMMITTED`, whatever the database's default.
#[derive(Clone)]
pub struct PgPool {
    pool: Pool,
    /// The URL with its password hidden, for messages.
    url: Arc<str>,
    /// How long a statement waits for its answer.
    answer_timeout: Duration,
    /// The runtime new connections are opened on, when not the caller's.
    runtime: Option<tokio::runtime::Handle>,
}

impl std::fmt::Debug for PgPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgPool")
            .field("url", &self.url)
            .field("max_connections", &self.pool.status().max_size)
            .field("answer_timeout", &self.answer_timeout)
            .finish()
    }
}

/// Why no connection could be checked out of a [`PgPool`], or a statement got no answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgPoolError {
    /// A new connection could not be opened (refused, unreachable, a refused password, no
    /// slot left on the server): the driver's error, to tell transient causes apart.
    #[error("{url}: {}", describe_error(source))]
    Connect {
        /// The URL, with its password hidden.
        url: Arc<str>,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// Every connection was in use for longer than the pool waits for one, or opening one
    /// took longer than its timeout.
    #[error("{url}: no connection could be had within {waited:?}")]
    Timeout {
        /// The URL, with its password hidden.
        url: Arc<str>,
        /// How long the checkout waited.
        waited: Duration,
    },
    /// A statement got no answer within the answer timeout; its connection is closed.
    #[error("{url}: no answer within {timeout:?}; the connection was closed")]
    Unanswered {
        /// The URL, with its password hidden.
        url: Arc<str>,
        /// The answer timeout.
        timeout: Duration,
    },
    /// The pool is closed, or another failure of the pool itself.
    #[error("{url}: {message}")]
    Pool {
        /// The URL, with its password hidden.
        url: Arc<str>,
        /// What failed.
        message: String,
    },
}

impl PgPoolError {
    /// Whether the database cannot be had for now (see [`crate::is_unavailable`]): a
    /// connection that could not be opened for such a reason, none free in time, or no
    /// answer in time. Not a failure of the pool itself.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Connect { source, .. } => crate::is_unavailable(source),
            Self::Timeout { .. } | Self::Unanswered { .. } => true,
            Self::Pool { .. } => false,
        }
    }
}

impl PgPool {
    /// A pool of at most `max_connections` (at least 1) connections to the database at `url`
    /// (`postgres://user:password@host:port/database`; a host that starts with `/`,
    /// percent-encoded, is a Unix socket directory). No connection is opened yet.
    ///
    /// # Errors
    /// [`PgConfigError`] for a URL that does not parse or asks for TLS.
    pub fn new(url: &str, max_connections: usize) -> Result<Self, PgConfigError> {
        Self::with_config(connect_config(url)?, url, max_connections)
    }

    /// Like [`PgPool::new`], from a parsed configuration (to set `application_name` or
    /// options first); `url_text` names the database in messages (any password in it is hidden,
    /// as [`redact_url`] does).
    ///
    /// # Errors
    /// [`PgConfigError`] when the pool cannot be built.
    pub fn with_config(
        mut config: tokio_postgres::Config,
        url_text: &str,
        max_connections: usize,
    ) -> Result<Self, PgConfigError> {
        let url_text = redact_url(url_text);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        // The statements of this workspace are written for READ COMMITTED (a hand-out's
        // `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED)`, the batches' waits on a row
        // another transaction just committed): under a database default of REPEATABLE READ or
        // SERIALIZABLE they would fail to serialize instead of waiting. A session setting, so
        // it holds for every statement on the pool's connections.
        append_options(
            &mut config,
            r"-c default_transaction_isolation=read\ committed",
        );
        let pool = Pool::builder(Manager::new(config, NoTls))
            .max_size(max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(WAIT_FOR_CONNECTION))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|err| PgConfigError::new(format!("{url_text}: {err}")))?;
        Ok(Self {
            pool,
            url: url_text.into(),
            answer_timeout: DEFAULT_ANSWER_TIMEOUT,
            runtime: None,
        })
    }

    /// The same pool, whose new connections are opened on `runtime` (their I/O a task of it)
    /// rather than on the runtime of whoever checks one out. For a pool whose futures are
    /// also awaited by blocking a thread (`svc-store`'s store): a connection whose I/O
    /// belonged to the blocked thread's runtime could wait for that very thread.
    #[must_use]
    pub fn on_runtime(mut self, runtime: tokio::runtime::Handle) -> Self {
        self.runtime = Some(runtime);
        self
    }

    /// The same pool, whose connections' statements wait for the server's answer at most
    /// `timeout` (default [`DEFAULT_ANSWER_TIMEOUT`]). Clones made before keep theirs.
    #[must_use]
    pub fn with_answer_timeout(mut self, timeout: Duration) -> Self {
        self.answer_timeout = timeout;
        self
    }

    /// How long a statement waits for the server's answer.
    pub fn answer_timeout(&self) -> Duration {
        self.answer_timeout
    }

    /// The URL, with its password hidden.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Connections the pool opens at most.
    pub fn max_connections(&self) -> usize {
        self.pool.status().max_size
    }

    /// A connection of the pool, opened when none is idle (on the current Tokio runtime);
    /// back in the pool when dropped. Opening one takes at most the answer timeout when that
    /// is shorter than the connect timeout (10 s): a stalled network is given up on as soon
    /// as a statement would be.
    ///
    /// # Errors
    /// [`PgPoolError::Connect`] when a new connection cannot be opened,
    /// [`PgPoolError::Timeout`] when none could be had in time.
    pub async fn get(&self) -> Result<PgConn, PgPoolError> {
        let timeouts = deadpool_postgres::Timeouts {
            wait: Some(WAIT_FOR_CONNECTION),
            create: Some(self.connect_timeout()),
            recycle: None,
        };
        let checkout = {
            let pool = self.pool.clone();
            async move { pool.timeout_get(&timeouts).await }
        };
        let object = match &self.runtime {
            Some(runtime) => runtime
                .spawn(checkout)
                .await
                .map_err(|err| PgPoolError::Pool {
                    url: Arc::clone(&self.url),
                    message: format!("the checkout task failed: {err}"),
                })?,
            None => checkout.await,
        }
        .map_err(|err| self.pool_error(err))?;
        Ok(PgConn {
            object: Some(object),
            pool: self.pool.clone(),
            watch: AnswerWatch {
                timeout: self.answer_timeout,
                url: Arc::clone(&self.url),
                unanswered: Arc::new(AtomicBool::new(false)),
            },
            close_on_drop: false,
        })
    }

    /// How long opening one connection may take: [`CONNECT_TIMEOUT`], or the answer timeout
    /// when that is shorter.
    fn connect_timeout(&self) -> Duration {
        CONNECT_TIMEOUT.min(self.answer_timeout)
    }

    /// Closes the pool's idle connections (after a sign that they died together, such as a
    /// server restart): the next checkout opens a fresh one.
    pub fn close_idle(&self) {
        let _ = self.pool.retain(|_, _| false);
    }

    fn pool_error(&self, err: deadpool_postgres::PoolError) -> PgPoolError {
        use deadpool_postgres::{PoolError, TimeoutType};
        let url = Arc::clone(&self.url);
        match err {
            PoolError::Backend(source) => PgPoolError::Connect { url, source },
            PoolError::Timeout(TimeoutType::Create) => PgPoolError::Timeout {
                url,
                waited: self.connect_timeout(),
            },
            PoolError::Timeout(_) => PgPoolError::Timeout {
                url,
                waited: WAIT_FOR_CONNECTION,
            },
            other => PgPoolError::Pool {
                url,
                message: other.to_string(),
            },
        }
    }
}

/// A connection checked out of a [`PgPool`]; back in the pool when dropped, unless a statement
/// on it went unanswered ([`AnswerWatch`]) or [`PgConn::close_on_drop`] was called: then it is
/// closed, and with an unanswered one the pool's idle connections too.
///
/// It derefs to the driver's client: whatever session state a statement leaves (a `SET`
/// outside a transaction, a session advisory lock, a `LISTEN`) goes back to the pool with it,
/// to the next user of the connection; use `SET LOCAL` and transaction-scoped locks, or
/// [`PgConn::close_on_drop`].
pub struct PgConn {
    /// `Some` until dropped.
    object: Option<Object>,
    pool: Pool,
    watch: AnswerWatch,
    close_on_drop: bool,
}

impl std::fmt::Debug for PgConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConn")
            .field("url", &self.watch.url)
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for PgConn {
    type Target = tokio_postgres::Client;

    fn deref(&self) -> &tokio_postgres::Client {
        self.object()
    }
}

impl std::ops::DerefMut for PgConn {
    fn deref_mut(&mut self) -> &mut tokio_postgres::Client {
        self.object_mut()
    }
}

impl PgConn {
    /// The pool's object: the client with `deadpool-postgres`'s statement cache
    /// (`prepare_cached`), and transactions that use it.
    pub fn object(&self) -> &Object {
        match &self.object {
            Some(object) => object,
            None => unreachable!("a connection is only taken when dropped"),
        }
    }

    /// As [`PgConn::object`], to open a transaction with the statement cache.
    pub fn object_mut(&mut self) -> &mut Object {
        match &mut self.object {
            Some(object) => object,
            None => unreachable!("a connection is only taken when dropped"),
        }
    }

    /// How this connection's statements wait for their answers. It does not borrow the
    /// connection, so it also waits on a transaction open on it.
    pub fn watch(&self) -> AnswerWatch {
        self.watch.clone()
    }

    /// Waits for `work` (statements on this connection) at most the answer timeout, with the
    /// driver's error kept as it is (for a caller that tells transient errors apart).
    ///
    /// # Errors
    /// [`PgPoolError::Unanswered`] when no answer came in time: the connection is then closed
    /// when dropped.
    pub async fn answer_raw<T>(
        &self,
        work: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<Result<T, tokio_postgres::Error>, PgPoolError> {
        self.watch.answer_raw(work).await
    }

    /// Closes this connection when it is dropped instead of returning it to the pool: for a
    /// connection whose session holds state (a session advisory lock) that must end with it.
    pub fn close_on_drop(&mut self) {
        self.close_on_drop = true;
    }
}

impl Drop for PgConn {
    fn drop(&mut self) {
        let unanswered = self.watch.unanswered.load(Ordering::Relaxed);
        if !unanswered && !self.close_on_drop {
            return;
        }
        if let Some(object) = self.object.take() {
            // Out of the pool and dropped: its driver task ends, its socket is closed.
            drop(Object::take(object));
        }
        if unanswered {
            // The idle ones went through the same path: let the next caller open a fresh one.
            let _ = self.pool.retain(|_, _| false);
        }
    }
}

/// How the statements of one [`PgConn`] wait for their answers: at most the pool's answer
/// timeout, after which the connection is marked to be closed. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AnswerWatch {
    timeout: Duration,
    url: Arc<str>,
    unanswered: Arc<AtomicBool>,
}

impl AnswerWatch {
    /// Waits for `work` at most the answer timeout, with the driver's error kept as it is.
    /// Needs a Tokio runtime's timer.
    ///
    /// # Errors
    /// [`PgPoolError::Unanswered`] when no answer came in time, or an earlier statement of the
    /// connection went unanswered (its answer would never come either).
    pub async fn answer_raw<T>(
        &self,
        work: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<Result<T, tokio_postgres::Error>, PgPoolError> {
        self.bound(work).await
    }

    /// Waits for `work` (any exchange on this connection: a whole transaction, code of yours
    /// included) at most the answer timeout; past it the connection is marked as
    /// [`AnswerWatch::answer_raw`] marks it, to be closed. For work whose statements are not
    /// each awaited through `answer_raw`.
    ///
    /// # Errors
    /// [`PgPoolError::Unanswered`] when `work` did not end in time (it is dropped), or an
    /// earlier statement of the connection went unanswered.
    pub async fn bound<F: Future>(&self, work: F) -> Result<F::Output, PgPoolError> {
        if self.is_unanswered() {
            return Err(self.unanswered_error());
        }
        match tokio::time::timeout(self.timeout, work).await {
            Ok(output) => Ok(output),
            Err(_) => {
                self.unanswered.store(true, Ordering::Relaxed);
                tracing::warn!(database = %self.url, timeout = ?self.timeout,
                    "the database did not answer in time; closing the connection");
                Err(self.unanswered_error())
            }
        }
    }

    /// Whether a statement of the connection went unanswered (it will be closed).
    pub fn is_unanswered(&self) -> bool {
        self.unanswered.load(Ordering::Relaxed)
    }

    fn unanswered_error(&self) -> PgPoolError {
        PgPoolError::Unanswered {
            url: Arc::clone(&self.url),
            timeout: self.timeout,
        }
    }
}

/// Adds `options` (server settings for each session, such as `-c lock_timeout=5000`) to those
/// `config` already has (the URL's `options`, say).
pub fn append_options(config: &mut tokio_postgres::Config, options: &str) {
    let options = match config.get_options() {
        Some(existing) => format!("{existing} {options}"),
        None => options.to_owned(),
    };
    config.options(options);
}

/// Parses a connection URL (or key=value string) for `tokio-postgres`, refusing what this
/// build cannot honour: TLS (`sslmode=require`). Errors name the URL without its password.
///
/// # Errors
/// [`PgConfigError`] when the URL does not parse or asks for TLS.
pub fn connect_config(url: &str) -> Result<tokio_postgres::Config, PgConfigError> {
    let config: tokio_postgres::Config = url.parse().map_err(|err: tokio_postgres::Error| {
        PgConfigError::new(format!(
            "{} is not a PostgreSQL URL: {err}",
            redact_url(url)
        ))
    })?;
    match config.get_ssl_mode() {
        SslMode::Disable | SslMode::Prefer => Ok(config),
        _ => Err(PgConfigError::new(format!(
            "{}: TLS to PostgreSQL is not supported yet (sslmode=require); connect over a Unix \
             socket, the loopback or a TLS tunnel, with sslmode=disable or prefer",
            redact_url(url)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_names_its_database_without_the_password_however_it_was_given() {
        let url = "postgres://svc:hunter2@127.0.0.1:5432/calls";
        let from_url = PgPool::new(url, 1).expect("a pool");
        let config = connect_config(url).expect("a config");
        let from_config = PgPool::with_config(config, url, 1).expect("a pool");
        for pool in [from_url, from_config] {
            assert_eq!(pool.url(), "postgres://svc:***@127.0.0.1:5432/calls");
            assert!(!format!("{pool:?}").contains("hunter2"));
        }
    }
}
