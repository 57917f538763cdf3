//! [`Server`]: serves a router (the webhook route and whatever else) with connection limits,
//! runs the inbox workers beside it, and stops both under one graceful shutdown.
//!
//! `axum::serve` has no timeouts and no cap on connections: a client that opens connections
//! and never finishes its headers keeps each open for ever, until the process runs out of file
//! descriptors and real deliveries get nothing. This server takes connections itself, through
//! hyper (HTTP/1.1, what the service sends) rather than tower layers, because a tower layer
//! only sees a request once its headers are read: the header-read and keep-alive idle timeouts
//! have to be kept per connection, below it (see `conn`). The request timeout is a
//! `tokio::time::timeout` around the router, the connection cap a semaphore taken before each
//! accept.

mod conn;
mod limits;

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use ::axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

pub use limits::ServerLimits;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::inbox::{Inbox, Phase, run_pool};

/// How long a stopping server lets inbox workers drain by default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The inbox workers a server runs, started with the channel that tells them when to drain.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
type Workers =
    Box<dyn FnOnce(watch::Receiver<Phase>) -> futures_util::future::BoxFuture<'static, ()> + Send>;

/// Serves a router with [`ServerLimits`] and, in inbox mode, runs the inbox workers, all until
/// one shutdown signal.
///
/// Shutdown, when the future given to [`Server::run`] resolves:
/// 1. the listener closes (new connections are refused) and idle connections close;
/// 2. requests in flight are answered (each within [`ServerLimits::request_timeout`]), so every
///    delivery acknowledged is in the inbox;
/// 3. the inbox workers finish the entries in hand, then hand out what is still due (what
///    arrived last), and stop when nothing is due, or at the drain timeout (10 s by
///    default). Past it, handlers still running are cancelled at their next `.await`: their
///    entries come back after the inbox's lease, as after a crash, and nothing is lost.
///
/// ```no_run
/// # use svc_contract::{Keyring, SigningSecret, Verifier};
/// # use svc_receiver::Received;
/// use svc_receiver::axum::{InboxReceiver, Server, inbox_route, shutdown_signal};
/// use svc_receiver::sqlite::SqliteInbox;
/// use svc_receiver::inbox::InboxPolicy;
///
/// # async fn run(verifier: Verifier) -> Result<(), Box<dyn std::error::Error>> {
/// let inbox = SqliteInbox::open("inbox.db", InboxPolicy::default())?;
/// let app = axum::Router::new()
///     .route("/webhooks/svc", inbox_route(InboxReceiver::new(verifier, inbox.clone())));
/// let handler = |received: Received| async move {
///     println!("processing {}", received.event.call_id);
///     Ok::<(), String>(())
/// };
/// let listener = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
/// Server::new(app)
///     .with_inbox_workers(inbox, handler, 4)
///     .run(listener, shutdown_signal())
///     .await?;
/// # Ok(()) }
/// ```
pub struct Server {
    router: Router,
    limits: ServerLimits,
    drain_timeout: Duration,
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    workers: Option<Workers>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("Server");
        debug
            .field("limits", &self.limits)
            .field("drain_timeout", &self.drain_timeout);
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        debug.field("inbox_workers", &self.workers.is_some());
        debug.finish_non_exhaustive()
    }
}

impl Server {
    /// A server for `router` with the default [`ServerLimits`] and no workers.
    pub fn new(router: Router) -> Self {
        Self {
            router,
            limits: ServerLimits::default(),
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            #[cfg(any(feature = "sqlite", feature = "postgres"))]
            workers: None,
        }
    }

    /// Sets the connection limits.
    pub fn limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets how long a stopping server lets the inbox workers finish and drain (10 s by
    /// default), counted once the last request is answered.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Also runs `workers` inbox loops (at least one) handing `inbox`'s entries to `handler`,
    /// as [`crate::inbox::run_inbox_workers`] does, reading the system clock; they stop, and
    /// drain, with the server. Any [`Inbox`] will do: the SQLite one, or the PostgreSQL one
    /// that several replicas share.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub fn with_inbox_workers<I: Inbox, H: crate::EventHandler>(
        mut self,
        inbox: I,
        handler: H,
        workers: usize,
    ) -> Self {
        self.workers = Some(Box::new(move |phases| {
            Box::pin(async move {
                run_pool(
                    &inbox,
                    &handler,
                    &svc_contract::SystemClock,
                    workers,
                    phases,
                )
                .await;
            })
        }));
        self
    }

    /// Serves on `listener` until `shutdown` resolves, then stops gracefully (see [`Server`]).
    ///
    /// # Errors
    /// None at present (the `Result` leaves room, as `axum::serve`'s does): a failed accept
    /// (out of file descriptors, a connection reset before it was accepted) is logged and
    /// retried.
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> io::Result<()> {
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        let (phase, workers) = {
            let (phase, phases) = watch::channel(Phase::Run);
            let workers = self
                .workers
                .map(|start| AbortOnDrop(tokio::spawn(start(phases))));
            (phase, workers)
        };
        let served = serve_http(listener, self.router, self.limits, shutdown).await;
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let Some(mut workers) = workers {
            let _ = phase.send(Phase::Drain);
            if tokio::time::timeout(self.drain_timeout, &mut workers.0)
                .await
                .is_err()
            {
                tracing::warn!(
                    "inbox workers did not drain within {:?}; entries still in hand are handed \
                     out again after their lease",
                    self.drain_timeout
                );
            }
        }
        served
    }
}

/// The workers' task, cancelled when dropped: past the drain timeout, or with the server's
/// future when a caller drops it.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Accepts connections under the cap until `shutdown`, then closes the listener and waits for
/// every connection to finish its request in flight.
async fn serve_http(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (closing, closing_seen) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                // The semaphore is never closed.
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, remote)) => {
                // Answers are small; send them at once.
                let _ = stream.set_nodelay(true);
                let (router, closing) = (router.clone(), closing_seen.clone());
                connections.spawn(conn::serve(stream, remote, router, limits, closing, permit));
            }
            Err(err) if is_per_connection(&err) => {}
            Err(err) => {
                // Out of file descriptors, say: wait instead of spinning.
                tracing::error!(error = %err, "accepting a connection failed; retrying in 1 s");
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
        // Forget the connections that are done, so the set stays as small as the open ones.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = closing.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// An accept error about one connection only (it went away before it was accepted).
fn is_per_connection(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Resolves on Ctrl-C, or on SIGTERM on Unix (what `systemd stop` and `docker stop` send): the
/// usual signal to hand to [`Server::run`].
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
