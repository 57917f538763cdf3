//! One connection: HTTP/1.1 through hyper, with the header-read, request and keep-alive idle
//! timeouts of [`ServerLimits`], and a graceful close when the server stops.
//!
//! hyper's own header-read timer starts whenever the connection waits for a request head, so
//! on a kept-alive connection it counts the idle time too, and one setting cannot give a short
//! header timeout and a longer idle one. So hyper's is off, and this module keeps the
//! connection's state itself: the reads it makes (through [`Tracked`]), the requests the
//! service is answering, and a watchdog that closes the connection when it has waited too long
//! for a head (reading one) or for its next request (idle). Everything runs in the
//! connection's one task, so the state needs no lock.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, Response, StatusCode, header};
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, watch};
use tokio::time::Instant;
use tower::ServiceExt;

use crate::ServerLimits;

/// Milliseconds since the connection opened; `NEVER` when the phase is not on.
type Millis = u64;
const NEVER: Millis = u64::MAX;

/// What the connection is doing, as the watchdog reads it.
#[derive(Debug)]
struct Activity {
    opened: Instant,
    /// Requests handed to the service and not answered yet.
    in_flight: AtomicUsize,
    /// When the connection started waiting for a request head (accepted, or the first byte of
    /// a later request arrived), or `NEVER`.
    head_since: AtomicU64,
    /// When the connection went idle after its last answer, or `NEVER`.
    idle_since: AtomicU64,
    /// Wakes the watchdog when the phase changes.
    changed: Notify,
}

impl Activity {
    fn new() -> Self {
        Self {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            // The first request's head is awaited from the moment of the accept.
            head_since: AtomicU64::new(0),
            idle_since: AtomicU64::new(NEVER),
            changed: Notify::new(),
        }
    }

    fn now(&self) -> Millis {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(NEVER - 1)
    }

    /// Bytes arrived: on an idle connection they start a request head.
    fn read_bytes(&self) {
        if self.in_flight.load(Ordering::Relaxed) == 0
            && self.head_since.load(Ordering::Relaxed) == NEVER
        {
            self.head_since.store(self.now(), Ordering::Relaxed);
            self.idle_since.store(NEVER, Ordering::Relaxed);
            self.changed.notify_one();
        }
    }

    /// A request's head is complete and the service has it, until the guard is dropped.
    fn begin_request(self: &Arc<Self>) -> RequestGuard {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.head_since.store(NEVER, Ordering::Relaxed);
        self.idle_since.store(NEVER, Ordering::Relaxed);
        self.changed.notify_one();
        RequestGuard(Arc::clone(self))
    }

    /// Resolves when the connection has waited too long for a head or for its next request.
    async fn expired(&self, limits: ServerLimits) -> &'static str {
        loop {
            let deadline = if self.in_flight.load(Ordering::Relaxed) > 0 {
                None
            } else {
                match (
                    self.head_since.load(Ordering::Relaxed),
                    self.idle_since.load(Ordering::Relaxed),
                ) {
                    (NEVER, NEVER) => None,
                    (NEVER, idle) => Some((idle, limits.keep_alive_idle_timeout, "idle")),
                    (head, _) => Some((head, limits.header_read_timeout, "header read")),
                }
            };
            let Some((since, limit, what)) = deadline else {
                self.changed.notified().await;
                continue;
            };
            let at = self.opened + std::time::Duration::from_millis(since) + limit;
            tokio::select! {
                () = tokio::time::sleep_until(at) => return what,
                // A permit left by a change before this wait started is taken here at once.
                () = self.changed.notified() => {}
            }
        }
    }
}

/// Marks a request answered when dropped (whether it completed or was cancelled).
#[derive(Debug)]
struct RequestGuard(Arc<Activity>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let activity = &self.0;
        if activity.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            activity.idle_since.store(activity.now(), Ordering::Relaxed);
            activity.changed.notify_one();
        }
    }
}

/// The socket, telling [`Activity`] when bytes arrive.
#[derive(Debug)]
struct Tracked {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.read_bytes();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// The answer to a request past [`ServerLimits::request_timeout`].
fn timed_out() -> Response<Body> {
    let body = axum::Json(serde_json::json!({ "error": "request timed out" }));
    (
        StatusCode::REQUEST_TIMEOUT,
        [(header::CONNECTION, "close")],
        body,
    )
        .into_response()
}

/// Serves one accepted connection until it closes, a timeout closes it, or the server stops
/// (`closing` turns true: the request in flight is answered, then the connection closes).
/// Holds its `permit` of the connection cap until then.
pub(super) async fn serve(
    stream: TcpStream,
    remote: SocketAddr,
    router: Router,
    limits: ServerLimits,
    mut closing: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Tracked {
        stream,
        activity: Arc::clone(&activity),
    });
    let service = hyper::service::service_fn({
        let activity = Arc::clone(&activity);
        move |mut request: Request<Incoming>| {
            let (router, activity) = (router.clone(), Arc::clone(&activity));
            // For routes that read the client's address, as with axum::serve.
            request.extensions_mut().insert(ConnectInfo(remote));
            async move {
                let _answering = activity.begin_request();
                let response = tokio::time::timeout(
                    limits.request_timeout,
                    router.oneshot(request.map(Body::new)),
                )
                .await;
                Ok::<_, Infallible>(match response {
                    Ok(Ok(response)) => response,
                    Ok(Err(never)) => match never {},
                    Err(_) => timed_out(),
                })
            }
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The watchdog times header reads (see the module docs).
    builder.header_read_timeout(None);
    let mut connection = pin!(builder.serve_connection(io, service).with_upgrades());
    let mut watchdog = pin!(activity.expired(limits));
    let mut shutting_down = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(err) = served {
                    tracing::debug!(%remote, error = %err, "connection ended with an error");
                }
                return;
            }
            what = &mut watchdog => {
                // Dropping the connection closes the socket.
                tracing::debug!(%remote, "closing the connection: {what} timeout");
                return;
            }
            _ = closing.wait_for(|closing| *closing), if !shutting_down => {
                shutting_down = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}
