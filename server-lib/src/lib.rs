//! An HTTP server for an axum [`Router`] that holds up against slow and idle clients, with one
//! graceful shutdown for the router and any background work beside it (a queue's workers, say).
//!
//! `axum::serve` has no timeouts and no cap on connections: a client that opens connections
//! and never finishes its headers keeps each open for ever, until the process runs out of file
//! descriptors and real requests get nothing. This server takes connections itself, through
//! hyper (HTTP/1.1) rather than tower layers, because a tower layer only sees a request once
//! its headers are read: the header-read and keep-alive idle timeouts have to be kept per
//! connection, below it (see `conn`). The request timeout is a `tokio::time::timeout` around
//! the router, the connection cap a semaphore taken before each accept.
//!
//! The README holds the limits' defaults and the shutdown order.

#![warn(missing_docs)]

/// The crate's README, whose examples are compiled as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod conn;
mod limits;

use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use futures_util::future::BoxFuture;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};

pub use limits::ServerLimits;

/// How long a stopping server lets its background work finish by default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Background work, started with the [`Draining`] signal it is to finish on.
type Background = Box<dyn FnOnce(Draining) -> BoxFuture<'static, ()> + Send>;

/// Serves a router with [`ServerLimits`] and runs background work beside it
/// ([`Server::with_background`]), all until one shutdown signal.
///
/// Shutdown, when the future given to [`Server::run`] resolves:
/// 1. the listener closes (new connections are refused) and idle connections close;
/// 2. requests in flight are answered (each within [`ServerLimits::request_timeout`]);
/// 3. the background work is told to finish ([`Draining`] resolves) and is waited for, up to
///    the drain timeout (10 s by default). Past it, it is cancelled at its next `.await`.
///
/// The order is what a receiver with a queue needs: every request acknowledged is in the queue
/// before the queue's workers are asked to finish what is due.
pub struct Server {
    router: Router,
    limits: ServerLimits,
    drain_timeout: Duration,
    background: Vec<Background>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("limits", &self.limits)
            .field("drain_timeout", &self.drain_timeout)
            .field("background", &self.background.len())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server for `router` with the default [`ServerLimits`] and no background work.
    pub fn new(router: Router) -> Self {
        Self {
            router,
            limits: ServerLimits::default(),
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            background: Vec::new(),
        }
    }

    /// Sets the connection limits.
    pub fn limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets how long a stopping server lets its background work finish (10 s by default),
    /// counted once the last request is answered.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Also runs `work` on its own task from the start: `work` gets a [`Draining`] future that
    /// resolves once the server has answered its last request, and should then finish what it
    /// has and return. It is cancelled when it overruns the drain timeout, and when the
    /// server's own future is dropped.
    ///
    /// ```no_run
    /// # use svc_server::{Draining, Server, shutdown_signal};
    /// # use axum::Router;
    /// # use tokio::net::TcpListener;
    /// # async fn run(app: Router, listener: TcpListener) -> std::io::Result<()> {
    /// Server::new(app)
    ///     .with_background(|draining: Draining| async move {
    ///         draining.await;
    ///         println!("the last request is answered; flushing");
    ///     })
    ///     .run(listener, shutdown_signal()?)
    ///     .await
    /// # }
    /// ```
    pub fn with_background<F, Fut>(mut self, work: F) -> Self
    where
        F: FnOnce(Draining) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.background
            .push(Box::new(move |draining| Box::pin(work(draining))));
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
        let (drain, drained) = watch::channel(false);
        let mut background: Vec<AbortOnDrop> = self
            .background
            .into_iter()
            .map(|start| AbortOnDrop(tokio::spawn(start(Draining::new(drained.clone())))))
            .collect();
        let served = serve_http(listener, self.router, self.limits, shutdown).await;
        let _ = drain.send(true);
        let all = futures_util::future::join_all(background.iter_mut().map(|task| &mut task.0));
        match tokio::time::timeout(self.drain_timeout, all).await {
            Ok(ended) => {
                for panicked in ended.iter().filter_map(|end| end.as_ref().err()) {
                    tracing::error!(error = %panicked, "background work of the server panicked");
                }
            }
            Err(_) => tracing::warn!(
                "background work did not finish within {:?} of the server stopping; cancelled",
                self.drain_timeout
            ),
        }
        served
    }
}

/// Resolves when the server has stopped taking requests and answered the last one: the
/// signal for background work to finish what it has. Given by [`Server::with_background`].
pub struct Draining(BoxFuture<'static, ()>);

impl Draining {
    fn new(mut drained: watch::Receiver<bool>) -> Self {
        Self(Box::pin(async move {
            // A dropped sender (the server's future dropped) counts as drained too.
            let _ = drained.wait_for(|draining| *draining).await;
        }))
    }
}

impl Future for Draining {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Draining {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Draining").finish_non_exhaustive()
    }
}

/// A background task, cancelled when dropped: past the drain timeout, or with the server's
/// future when a caller drops it.
struct AbortOnDrop(JoinHandle<()>);

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

/// A future that resolves on Ctrl-C (SIGINT), or on SIGTERM on Unix (what `systemd stop` and
/// `docker stop` send): the usual signal to hand to [`Server::run`]. The handlers are installed
/// when this is called, not when the future is first polled, so a signal that arrives right
/// after (while the caller still prints its start-up lines, say) stops the server cleanly
/// instead of killing the process.
///
/// # Errors
/// The signal handlers cannot be installed.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
