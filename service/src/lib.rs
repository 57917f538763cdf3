//! A compact, complete implementation of the Roleplay and Call-Scoring Service v1 API
//! (axum + SQLite), run locally by tenants as a stateful sandbox and by our own tests.
//!
//! `README.md` (crate root) documents running and operating the service (the `serve` flags,
//! operator commands, proxy trust, fault injection, real calls, the live protocol, the browser
//! SDK); `DESIGN.md` the decisions taken where the contract is silent, real-call scoring, the
//! archived audio, and the limits and hardening. What follows is for whoever maintains it.
//!
//! # Layout
//!
//! - [`run`] is the one entry point: it opens the database, serves [`router`] on a given
//!   listener and runs the background workers (`spawn_workers`), all under one shutdown
//!   signal ([`Stop`]).
//! - [`router`] builds the whole HTTP surface from an [`AppState`] without a socket:
//!   [`api`] (one module per resource under `/v1`, each with its `router()` and its utoipa
//!   `OpenApi`, plus the OpenAPI document: `api/openapi.rs` only merges and imports them,
//!   `api/paging.rs` is the page-size rule), wrapped in [`request_id`] (`req_…` ids, error envelopes, fallbacks,
//!   access log) and the body limit.
//! - [`auth`] turns a bearer API key into a [`auth::Tenant`] and finds the caller's address;
//!   [`cors`] holds the cross-origin policy (none on API-key routes, `with_sdk_cors` for the
//!   SDK's redeem route); [`ratelimit`] is the optional per-tenant request rate limit.
//! - [`error`] is the error contract ([`ApiError`]) and [`envelope`] its documentation types;
//!   [`extract`] has the JSON, query and path extractors that reject into it; [`domain`]
//!   validates the roster's text fields (trimming, blanks, reserved prefixes, NPN, email).
//! - [`db`] is the storage handle ([`db::Db`]) with every SQL statement and the migrations,
//!   one file per resource: tenants, agencies, agents, `calls.rs` (tokens and the call
//!   lifecycle), `call_reads.rs`, `outbox.rs`, `practice.rs`, `real_calls.rs` and `ops.rs`
//!   (the gauges of `/metrics`).
//! - [`state`], [`config`] and [`clock`] carry shared state ([`AppState`]: the database,
//!   config, clock, cursors, practice state, audio archive and links, rate limiter), settings
//!   (`ServeArgs`, every `serve` flag, into [`Config`]) and the injectable time source
//!   ([`Clock`]: `System`, `Offset`, `Manual`); [`ids`], [`time`], [`cursor`] and
//!   [`credentials`] are the small codecs (ids, timestamps, page cursors, keys and secrets).
//! - [`faults`]: fault injection: each tenant's faults, their spec and their deterministic
//!   decisions.
//! - Practice calls: [`session_token`] (the JWTs of POST /session: claims, minting, checking
//!   against the service clock), [`practice`] (drill and persona catalog, stage recognition,
//!   scripted persona, rubric, and the shared [`practice::state::Practice`]), [`live`] (the
//!   WebSocket of a live call: frames, the in-memory call session, the socket handler, the
//!   ceiling for calls nobody joins), [`scoring`] (pure evaluation into a score or a failure
//!   and the `CallScored` body, and the scoring worker) and [`webhook`] (one delivery attempt
//!   in `client.rs`, and the durable outbox worker with `try_deliver_next` and `drain`). Their
//!   endpoints are `api/session.rs`, `api/roleplay.rs` and `api/calls.rs`; `api/call_detail.rs`
//!   decodes a stored call into the Call detail body (its open `TranscriptTurn`s and `Score`)
//!   and `api/webhook_doc.rs` documents the `call.scored` body and the document's `webhooks`.
//!   [`deliveries`] is the operator's `deliveries list`.
//! - Real calls: [`realcall`] (dialer records and their bounds, the ingest file, regular and
//!   capped, attribution, the audio archive and its signed links, ingestion, re-disposition,
//!   the retention sweep, a past file replayed relative to now), scored by
//!   [`scoring::real_call`]; `GET /v1/audio/…` (`api/audio.rs`, and the `Range` it honours in
//!   `api/audio/range.rs`) serves the archive.
//! - [`sdk`]: the browser SDK (`GET /sdk/v1/svc-sdk.js` and its `.d.ts`), embedded and open to
//!   every origin.
//! - [`ops`]: `GET /healthz`, and on `--metrics-listen` the Prometheus `/metrics` of this
//!   server (its own recorder and the layer that counts requests: requests, latency,
//!   deliveries, outbox and live calls per tenant); `--log-format`.
//! - Public API: [`run`], [`Config`], [`Clock`] and [`sandbox`] (the operator's steps a
//!   sandbox needs: provision its tenant, faults, real-call ingestion, re-disposition, call
//!   states and deliveries), what `svc-cli sandbox` and `svc-cli demo` drive it with. Every
//!   other module is internal (`pub` only with the feature `internals`, for the workspace's
//!   tests and benchmarks).
//! - [`cli`] is the command line (`serve`, and the operator's `tenant …`, `agency …` and
//!   `calls …` commands in [`operator`]); `main.rs` only calls [`cli::main`].
//!
//! # Extending
//!
//! - New flags: add them to `ServeArgs` and [`Config`] in `config.rs` (defaults in
//!   `Config::new`).
//! - New tables: append an entry to `MIGRATIONS` in `db/migrations.rs` (never edit an applied
//!   one); put the SQL in a new `db/<resource>.rs` with `impl Db` methods using `self.read` /
//!   `self.write`.
//! - New endpoints: a module in `api/` with `router()` and an `OpenApi` struct, merged in
//!   `api::routes` and `api::openapi::api_doc`. The redeem route goes through
//!   `cors::with_sdk_cors`. Use `auth::Tenant`, `extract::ApiJson`/`ApiQuery`/`ApiPath` and
//!   return [`ApiError`]. Paginate with `state.cursors` (`CursorScope { endpoint: "GET /calls",
//!   .. }`).
//! - Background workers: spawn them in `spawn_workers`; each waits on [`Stop::requested`].
//! - Time: always `state.clock` / `state.now_ms()`; tests set `config.clock =
//!   Clock::manual(..)`.

// The module docs describe the internal layout for whoever maintains the service: read them
// with `cargo doc --document-private-items` (or the feature `internals`), where every link
// resolves.
#![cfg_attr(not(feature = "internals"), allow(rustdoc::private_intra_doc_links))]

pub mod cli;
pub mod sandbox;

/// Declares the crate's internal modules: `pub(crate)`, or `pub` with the feature
/// `internals`, which only the workspace's own tests and benchmarks turn on (they seed and
/// inspect the database directly). Without it their items are unreachable from outside, so
/// `unreachable_pub` and the dead-code lints (items only tests use) are quiet for them.
macro_rules! internal_modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        #[allow(unreachable_pub, dead_code, unused_imports)]
        pub(crate) mod $name;
    )*};
}

internal_modules!(
    api,
    auth,
    clock,
    config,
    cors,
    credentials,
    cursor,
    db,
    deliveries,
    domain,
    envelope,
    error,
    extract,
    faults,
    ids,
    live,
    operator,
    ops,
    practice,
    ratelimit,
    realcall,
    request_id,
    scoring,
    sdk,
    session_token,
    state,
    time,
    webhook,
);

use std::future::Future;

use anyhow::Context as _;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use clock::Clock;
pub use config::Config;
pub use error::ApiError;
pub use state::AppState;

/// Largest request body accepted; anything bigger is `400 INVALID_REQUEST`.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The whole HTTP surface, ready to serve (`/v1/…`, fallbacks, request ids, body limit).
pub fn router(state: AppState) -> Router {
    Router::new()
        .nest("/v1", api::routes())
        .merge(sdk::router())
        .route("/healthz", axum::routing::get(ops::http::healthz))
        .fallback(request_id::not_found)
        .method_not_allowed_fallback(request_id::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            config::REQUEST_TIMEOUT,
        ))
        .layer(axum::middleware::from_fn(request_id::middleware))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            ops::http::date_header,
        ))
        .with_state(state)
}

/// A shutdown signal that background workers can wait on (cheap to clone).
#[derive(Clone, Debug)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Resolves once shutdown has been requested.
    pub async fn requested(&mut self) {
        // An error means the sender is gone, which also means "stop".
        let _ = self.0.wait_for(|stop| *stop).await;
    }

    /// Whether shutdown has been requested.
    pub fn is_requested(&self) -> bool {
        *self.0.borrow()
    }
}

/// Runs the service on `listener` until `shutdown` resolves: opens the database named by
/// `config`, serves the API (with the peer address available for IP allowlists) and runs
/// the background workers; on shutdown, stops accepting, drains in-flight requests and
/// waits for the workers.
///
/// # Errors
/// The database cannot be opened or the server fails.
pub async fn run(
    mut config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if config.public_url.is_none()
        && let Ok(address) = listener.local_addr()
    {
        config.public_url = Some(format!("http://{address}"));
    }
    let state = AppState::open(config).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });

    let mut workers = JoinSet::new();
    spawn_workers(&mut workers, &state, &Stop(stop_rx.clone()));
    let metrics = ops::http::start(&state, Stop(stop_rx.clone()), &mut workers).await?;

    let mut server_stop = Stop(stop_rx);
    match listener.local_addr() {
        Ok(address) => tracing::info!(%address, "serving the v1 API"),
        Err(_) => tracing::info!("serving the v1 API"),
    }
    // Not axum::serve, which has no timeouts and no connection cap: a client holding
    // connections that never finish their headers would exhaust the file descriptors. The
    // svc-server keeps per-connection timeouts and a cap (and gives routes the
    // peer address, for IP allowlists).
    let limits = state.config.http_limits;
    let app = ops::http::instrument(router(state), metrics.as_ref());
    svc_server::Server::new(app)
        .limits(limits)
        .run(listener, async move { server_stop.requested().await })
        .await
        .context("serving HTTP")?;

    while let Some(joined) = workers.join_next().await {
        joined.context("a background worker failed")?;
    }
    Ok(())
}

/// Starts the background workers; each must return once `stop` is requested: scoring, the
/// webhook outbox, the live calls' stop and the hourly sweep of archived recordings.
fn spawn_workers(workers: &mut JoinSet<()>, state: &AppState, stop: &Stop) {
    let practice = state.practice.clone();
    let db = state.db.clone();
    let now_ms = state.now_ms();
    let ceiling_ms = i64::try_from(state.practice.call_ceiling.as_millis()).unwrap_or(i64::MAX);
    let mut stop_scoring = stop.clone();
    workers.spawn(async move {
        // Calls left live by a previous process never completed: end them (not scored).
        match db.abandon_live_calls(now_ms, ceiling_ms).await {
            Ok(0) => {}
            Ok(count) => tracing::warn!(count, "ended calls cut off by a restart"),
            Err(error) => {
                tracing::error!(error = %error, "could not end calls cut off by a restart")
            }
        }
        practice
            .scorer
            .clone()
            .run(async move { stop_scoring.requested().await })
            .await;
    });
    let outbox = state.practice.outbox.clone();
    let mut stop_outbox = stop.clone();
    workers.spawn(outbox.run(async move { stop_outbox.requested().await }));
    workers.spawn(realcall::sweep::run(
        state.db.clone(),
        state.archive.clone(),
        state.clock.clone(),
        stop.clone(),
    ));
    let practice = state.practice.clone();
    let mut stop_live = stop.clone();
    workers.spawn(async move {
        stop_live.requested().await;
        practice.stop_live_calls();
    });
}
