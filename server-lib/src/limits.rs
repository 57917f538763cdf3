//! The limits [`crate::Server`] puts on every connection.

use std::time::Duration;

/// What a connection may hold: against clients that open connections and never finish a
/// request (slowloris), that upload a body forever, or that keep idle connections open, and
/// against running out of file descriptors. Every field has a default suited to an API of
/// small requests whose clients wait about 10 seconds for an answer (webhook senders and API
/// clients alike), over HTTP/1.1.
///
/// ```
/// use std::time::Duration;
/// use svc_server::ServerLimits;
///
/// let limits = ServerLimits {
///     max_connections: 256,
///     ..ServerLimits::default()
/// };
/// assert_eq!(limits.request_timeout, Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Longest wait for a request's headers: from the moment the connection is accepted (for
    /// its first request) or the first byte of a later request arrives, to the end of the
    /// headers. Past it the connection is closed without an answer. Default: 5 s (a real client
    /// sends its headers at once).
    pub header_read_timeout: Duration,
    /// Longest time from the end of a request's headers to its response: reading the body and
    /// running the route. Past it the request is answered `408 Request Timeout` and the
    /// connection closed. Default: 10 s. Keep it above any deadline a route keeps itself (an
    /// `svc-receiver` direct-mode route answers 503 at 8 s by default), so that the route's own
    /// answer comes first.
    pub request_timeout: Duration,
    /// Longest time a kept-alive connection may wait, idle, for its next request. Past it the
    /// connection is closed. Default: 30 s.
    pub keep_alive_idle_timeout: Duration,
    /// Most connections open at once (at least one). A connection beyond it waits in the
    /// listening socket's backlog, using no file descriptor of this process, until another
    /// closes; the timeouts above make sure one does. Default: 512, well under the usual
    /// limit of 1024 open files per process.
    pub max_connections: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            keep_alive_idle_timeout: Duration::from_secs(30),
            max_connections: 512,
        }
    }
}
