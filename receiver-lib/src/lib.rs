//! Receive `call.scored` webhooks from the Roleplay and Call-Scoring Service: signature
//! verification, deduplication on `X-Service-Webhook-Id`, replay protection, typed events and
//! axum integration.
//!
//! # What a delivery is checked for
//!
//! 1. The body is at most [`Verifier::max_body_bytes`] (64 KiB by default) → else 413.
//! 2. `X-Service-Signature` is present and strictly `t=<digits>,v1=<64 hex>` (policy in
//!    [`signature`]) → else 400.
//! 3. `t` is within the tolerance of now, 5 minutes either way by default
//!    ([`Tolerance::Disabled`] is the only way to turn the check off) → else 401.
//! 4. Some `v1` equals HMAC-SHA256 of `<t>.<raw body bytes>` under an active key of the
//!    [`Keyring`], compared in constant time → else 401. The key is the **whole** `whsec_…`
//!    string exactly as issued (its UTF-8 bytes, prefix included; nothing is decoded).
//! 5. Only then is the body decoded into [`CallScored`] → else 400 (an event other than
//!    `call.scored` too, unless the verifier acknowledges unknown events: [`UnknownEvents`]).
//! 6. The webhook id is claimed in a [`dedup::DedupStore`]: a duplicate answers 200 without
//!    running user code again; the same signature under another id is a replay → 401.
//!
//! Detailed reasons (with hints such as "the body looks re-serialised") go to `tracing`, each
//! event of a delivery inside a `webhook_delivery` span carrying its `webhook_id`; the sender
//! only ever gets a fixed status and a fixed short text.
//!
//! # Receiving webhooks in axum
//!
#![cfg_attr(
    all(feature = "axum", feature = "sqlite"),
    doc = r#"
```no_run
use axum::Router;
use svc_receiver::axum::{WebhookReceiver, webhook_route};
use svc_receiver::dedup::DedupPolicy;
use svc_receiver::sqlite::SqliteDedupStore;
use svc_receiver::{CallSource, Keyring, Received, SigningSecret, Verifier};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The current secret, plus the previous one for a few minutes after a rotation (build
    // the verifier from a SharedKeyring to replace them without a restart).
    let keyring = Keyring::new()
        .with_key("current", SigningSecret::new(&std::env::var("SVC_SIGNING_SECRET")?)?)
        .with_expiring_key("previous", SigningSecret::new("whsec_previous")?, 1_767_229_200);
    let verifier = Verifier::new(keyring);
    // Durable dedup: claims survive restarts.
    let store = SqliteDedupStore::open("webhooks.db", DedupPolicy::default())?;
    // User code: any async closure; an Err makes the sender's retry be processed.
    let handler = |received: Received| async move {
        let event = received.event;
        match (event.success, &event.source) {
            (true, CallSource::RealCall) => println!("real call {} scored", event.call_id),
            (true, _) => println!("practice call {} scored", event.call_id),
            (false, _) => println!("call {} not scored: {:?}", event.call_id, event.reason),
        }
        Ok::<(), std::io::Error>(())
    };
    let app = Router::new()
        .route("/webhooks/svc", webhook_route(WebhookReceiver::new(verifier, store, handler)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    axum::serve(listener, app).await?;
    Ok(())
}
```
"#
)]
//!
//! When user code may be slow or fail, use the durable inbox instead: the route commits the
//! verified event to SQLite before the 200 and a worker hands it to user code, with retries:
//!
#![cfg_attr(
    all(feature = "axum", feature = "sqlite"),
    doc = r#"
```no_run
# use svc_receiver::{Keyring, Received, SigningSecret, SystemClock, Verifier};
use svc_receiver::axum::{InboxReceiver, inbox_route};
use svc_receiver::sqlite::{InboxPolicy, SqliteInbox, run_inbox_worker};

# async fn run(verifier: Verifier) -> Result<(), Box<dyn std::error::Error>> {
let inbox = SqliteInbox::open("inbox.db", InboxPolicy::default())?;
let handler = |received: Received| async move {
    println!("processing {}", received.event.call_id);
    Ok::<(), String>(())
};
tokio::spawn(run_inbox_worker(inbox.clone(), handler, SystemClock, std::future::pending()));
let app: axum::Router =
    axum::Router::new().route("/webhooks/svc", inbox_route(InboxReceiver::new(verifier, inbox)));
# Ok(()) }
```

"#
)]
#![cfg_attr(
    not(all(feature = "axum", feature = "sqlite")),
    doc = "(The examples need the default features, `axum` and `sqlite`.)\n"
)]
//!
//! One worker has one entry in hand at a time; `run_inbox_workers(inbox, handler, clock, n,
//! shutdown)` keeps up to `n` in hand, for handlers that wait on I/O or bursts to drain.
//!
//! # Statuses answered
//!
//! | outcome | status |
//! |---|---|
//! | processed, or a duplicate of a processed delivery | 200 |
//! | an unknown event, acknowledged by choice ([`UnknownEvents::Acknowledge`]) | 200 |
//! | missing/malformed signature header, missing webhook id, undecodable body, unknown event | 400 |
//! | timestamp outside tolerance, no matching signature, replay under another id | 401 |
//! | same id being processed right now | 409 |
//! | body over the limit | 413 |
//! | user code failed | 500 |
//! | store unavailable, user code past the deadline (8 s from arrival) | 503 |
//!
//! # Layout
//!
//! - [`signature`]: [`sign`] and the strict `X-Service-Signature` parser (its policy is documented there).
//! - `secret`: [`SigningSecret`] and the [`Keyring`] of accepted secrets (with expiry, for
//!   rotation), replaceable at run time through a [`SharedKeyring`].
//! - `verify`: the framework-agnostic [`Verifier`]: raw bytes + header + now →
//!   [`VerifiedDelivery`]; [`verify_request`], headers + body → [`CallScored`] in one call.
//! - `delivery`: [`VerifiedDelivery`] and decoding it into the typed event.
//! - `error`: [`VerifyError`] and its mapping to HTTP statuses (`http::StatusCode`).
//! - `clock`: the injectable [`Clock`] every time rule reads.
//! - [`dedup`]: the [`dedup::DedupStore`] trait (claim → new / duplicate / in flight / replayed,
//!   complete, release) and the bounded, expiring in-memory store.
//! - `sqlite` (feature `sqlite`): the durable dedup store and the durable inbox, written
//!   through one group-commit thread per file (`synchronous=FULL`).
//! - `handler`: the [`EventHandler`] user code implements (any async closure) and [`Received`].
//! - `axum` (feature `axum`): ready POST routes (direct mode, durable inbox mode) and the
//!   `VerifiedWebhook` extractor.
//! - `event`: the typed [`CallScored`] body, with open [`CallSource`] and [`FailureReason`] sets.

#[cfg(feature = "axum")]
pub mod axum;
pub mod dedup;
pub mod reload;
pub mod signature;
#[cfg(feature = "sqlite")]
pub mod sqlite;

mod clock;
mod delivery;
mod error;
mod event;
mod handler;
mod secret;
mod verify;

pub use clock::{Clock, ManualClock, SystemClock};
pub use delivery::VerifiedDelivery;
pub use error::{MalformedHeader, MismatchHint, VerifyError};
pub use event::{CALL_SCORED, CallScored, CallSource, FailureReason};
pub use handler::{EventHandler, Received};
pub use secret::{Keyring, SECRET_PREFIX, SecretError, SharedKeyring, SigningSecret};
pub use signature::sign;
pub use verify::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_TOLERANCE, SIGNATURE_HEADER, Tolerance, UnknownEvents,
    Verifier, WEBHOOK_ID_HEADER, verify_request,
};
