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
//! Each module's own `//!` says what is in it; the map:
//!
//! - [`run`] opens the database, serves [`router`] and runs the background workers under one
//!   shutdown ([`Stop`]). [`router`] is the HTTP surface: [`api`] (one module per resource under
//!   `/v1`, and the OpenAPI document), wrapped in [`request_id`] (ids, error envelopes, access
//!   log).
//! - Requests: [`auth`], [`cors`], [`ratelimit`]; errors: [`error`] ([`ApiError`]),
//!   [`envelope`], [`extract`]; the roster's field rules: [`domain`].
//! - Storage: [`db`] ([`db::Db`], every SQL statement and the migrations, a file per resource).
//! - Shared state and small codecs: [`state`] ([`AppState`]), [`config`] ([`Config`]),
//!   [`clock`] ([`Clock`]), [`ids`], [`time`], [`cursor`], [`credentials`]; [`faults`];
//!   [`trigger`] (the sandbox's triggered calls).
//! - Practice calls: [`session_token`], [`practice`], [`live`], [`scoring`], [`webhook`] (one
//!   attempt, and the durable outbox), [`deliveries`].
//! - Real calls: [`realcall`] (records, ingestion, attribution, the audio archive,
//!   re-disposition, the sweep), scored by [`scoring::real_call`].
//! - [`sdk`] (the browser SDK), [`ops`] (health, metrics, logs), [`cli`] and [`operator`] (the
//!   command line).
//! - Public API: [`run`], [`Config`], [`Clock`] and [`sandbox`]; every other module is internal
//!   (`pub` only with the feature `internals`, for the workspace's tests and benchmarks).
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
    trigger,
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
