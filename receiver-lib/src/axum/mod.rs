//! axum 0.8 integration (feature `axum`): ready-made POST handlers that read the raw body
//! under a size limit, verify, deduplicate, and hand the typed event to user code. Serve them
//! with any axum server; `svc-server` adds connection limits and one graceful shutdown for the
//! route and the inbox workers.
//!
//! Two modes:
//! - [`direct`](webhook_route): user code runs inside the request (under a deadline well
//!   inside the sender's 10 seconds); the claim is completed on success and released on
//!   failure so the sender's single retry is processed.
//! - inbox, `inbox_route` (feature `sqlite` or `postgres` too): the verified event is
//!   committed to a durable inbox (SQLite, or a PostgreSQL that replicas share) before the 2xx
//!   and handed to user code by the inbox workers (`inbox::run_inbox_workers_until_drained`
//!   beside a server), with retries. Use it when user code may be slow or fail: nothing
//!   acknowledged is lost.
//!
//! Either way user code runs at least once, never silently zero: a crash between user code
//! finishing and the claim (or entry) being completed, or a lease running out under very slow
//! code, can run it twice for one id. For exactly once, user code records the delivery in its
//! own transaction (`svc_receiver::exactly_once`) and commits it with its writes: the rerun
//! then finds it recorded and writes nothing.
//!
//! For a handler of your own, the [`VerifiedWebhook`] extractor verifies and decodes (no
//! deduplication).
//!
//! Every rejection answers a fixed status and a fixed JSON body `{"error": "<kind>"}`; the
//! detailed reason (with hints) goes to `tracing` only, inside the delivery's
//! `webhook_delivery` span, which carries its `webhook_id`.

mod direct;
mod extract;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod inbox;
mod request;

pub use direct::{DEFAULT_HANDLER_DEADLINE, WebhookReceiver, webhook_route};
pub use extract::{VerifiedWebhook, VerifyState};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use inbox::{InboxReceiver, inbox_route};
