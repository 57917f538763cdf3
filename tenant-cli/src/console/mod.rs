//! The rep console of `svc-cli sandbox`: a page a person opens to rehearse the browser half of
//! an integration (pick a registered agent, start a practice call through the service's own
//! browser SDK, talk to the persona in text, hang up, read the score).
//!
//! # Layout
//! - [`page`]: `GET /console` and its script and stylesheet (plain HTML, CSS and JavaScript
//!   embedded in the binary, no CDN), with the headers that keep the page to itself.
//! - [`api`]: the console's own small backend, what a tenant's backend does for its front end:
//!   the roster for the picker, session tokens minted server-side with the sandbox's API key,
//!   and the call's state and detail once scored. The key never leaves this process.
//! - [`guard`]: refuses requests whose `Host` is a domain name (DNS rebinding) and POSTs from
//!   another origin.
//!
//! The console listens on its own address (`--console-listen`, [`DEFAULT_LISTEN`] by default, a
//! free port when that one is taken),
//! so the page's origin differs from the API's and the browser runs the SDK's redeem as a real
//! cross-origin request, preflight included, just as a tenant's own page would.

pub mod api;
pub mod guard;
pub mod page;

use std::net::{Ipv4Addr, SocketAddr};

use anyhow::Context as _;
use axum::Router;
use axum::routing::{get, post};
use svc_service::sandbox::SandboxDb;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::sandbox::Sandbox;
use svc_client::Client;

/// Where the console listens unless told otherwise (beside the API's default `127.0.0.1:8787`).
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8788);

/// What the console serves with: a client of the sandbox's API holding its key, the sandbox's
/// database (for a call's state while it scores) and the API's base URL the page is given.
#[derive(Clone)]
pub struct ConsoleBackend {
    client: Client,
    db: SandboxDb,
    api_base_url: String,
}

impl std::fmt::Debug for ConsoleBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleBackend")
            .field("api_base_url", &self.api_base_url)
            .finish_non_exhaustive()
    }
}

impl ConsoleBackend {
    /// The backend of `sandbox`'s console.
    ///
    /// # Errors
    /// The sandbox's client cannot be built (never in practice).
    pub fn for_sandbox(sandbox: &Sandbox) -> anyhow::Result<Self> {
        Ok(Self {
            client: sandbox.client()?,
            db: sandbox.db.clone(),
            api_base_url: sandbox.base_url.clone(),
        })
    }

    /// The API's base URL (ending in `/v1`) the page talks to.
    pub fn api_base_url(&self) -> &str {
        &self.api_base_url
    }
}

/// Every route of the console, behind the [`guard`].
pub fn router(backend: ConsoleBackend) -> Router {
    Router::new()
        .route("/", get(page::to_console))
        .route("/console", get(page::console))
        .route("/console/", get(page::to_console))
        .route("/console/console.js", get(page::script))
        .route("/console/console.css", get(page::stylesheet))
        .route("/console/favicon.svg", get(page::icon))
        .route("/console/api/agents", get(api::agents))
        .route("/console/api/token", post(api::token))
        .route("/console/api/calls/{call_id}", get(api::call))
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn(guard::check))
        .with_state(backend)
}

/// A console being served. Dropping it stops it too.
#[derive(Debug)]
pub struct RunningConsole {
    /// The page's URL (`http://127.0.0.1:<port>/console`).
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl RunningConsole {
    /// Serves the console of `backend` on `listen` (port 0: any free port).
    ///
    /// # Errors
    /// The address is taken.
    pub async fn start(listen: SocketAddr, backend: ConsoleBackend) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("the console cannot listen on {listen}"))?;
        let address = listener.local_addr().context("the console's address")?;
        let (stop, stopped) = oneshot::channel::<()>();
        let app = router(backend);
        let server = tokio::spawn(async move {
            svc_server::Server::new(app)
                .run(listener, async move {
                    let _ = stopped.await;
                })
                .await
                .context("serving the console")
        });
        Ok(Self {
            url: format!("http://{}/console", crate::sandbox::reachable(address)),
            stop: Some(stop),
            server,
        })
    }

    /// Stops serving (requests in flight are answered).
    ///
    /// # Errors
    /// The server failed while running.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.server)
            .await
            .context("the console server panicked")?
    }
}

impl Drop for RunningConsole {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
