//! `svc-cli webhook serve`: an HTTP receiver built on `svc-receiver`'s durable inbox, writing
//! into the local store that `reconcile` reads.
//!
//! A delivery is verified over its raw body, deduplicated on `X-Service-Webhook-Id` and
//! committed to the inbox (tables of the store file, `synchronous=FULL`) before the `200`; a
//! worker then records it in the store's delivery ledger (and, with `--fetch`, reads and stores
//! the call's detail), retrying from the inbox when that fails. Failure events (`success:
//! false`) are recorded with their `reason` and `reasonMessage`: they are the only trace of the
//! attempt. SIGTERM or Ctrl-C stops accepting, lets in-flight requests and entries finish, and
//! exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::Args;
use svc_receiver::axum::{InboxReceiver, inbox_route};
use svc_receiver::sqlite::{InboxPolicy, SqliteInbox, run_inbox_workers};
use svc_receiver::{Keyring, Received, SigningSecret, SystemClock, Verifier};
use tokio::sync::watch;

use crate::client::{CallId, Client, ErrorClass};
use crate::commands::Ctx;
use crate::exit::CliError;
use crate::store::Store;
use crate::store::calls::Writer;
use crate::store::deliveries::NewDelivery;
use crate::time::format_ts;

/// Inbox entries handled at once (each records a delivery and, with `--fetch`, reads a call).
const WORKERS: usize = 4;

/// Flags of `webhook serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on, e.g. 0.0.0.0:8788 (put TLS in front: the service sends to HTTPS)
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// The local store (created if missing; its directory must exist) [env: SVC_STORE]
    #[arg(long, env = "SVC_STORE", value_name = "PATH")]
    store: PathBuf,
    /// Read the signing secret (whsec_…) from this environment variable
    #[arg(
        long,
        value_name = "VAR",
        required_unless_present = "secret_file",
        conflicts_with = "secret_file"
    )]
    secret_env: Option<String>,
    /// Read the signing secret (whsec_…) from this file (surrounding whitespace ignored)
    #[arg(long, value_name = "PATH")]
    secret_file: Option<PathBuf>,
    /// Also accept deliveries signed with the previous secret, read from this environment
    /// variable (while the service and this receiver switch secrets)
    #[arg(long, value_name = "VAR")]
    previous_secret_env: Option<String>,
    /// The path deliveries are POSTed to
    #[arg(long, default_value = "/webhooks", value_name = "PATH")]
    path: String,
    /// Also read and store the call detail of each scored event (needs the API key)
    #[arg(long)]
    fetch: bool,
}

impl std::fmt::Debug for ServeArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeArgs")
            .field("listen", &self.listen)
            .field("store", &self.store)
            .field("secret_env", &self.secret_env)
            .field("secret_file", &self.secret_file)
            .field("previous_secret_env", &self.previous_secret_env)
            .field("path", &self.path)
            .field("fetch", &self.fetch)
            .finish()
    }
}

/// Reads a secret from an environment variable or a file; never prints it.
fn secret_from(source: &str, value: Option<String>) -> anyhow::Result<SigningSecret> {
    let value = value.ok_or_else(|| CliError::Usage(format!("{source} is not set")))?;
    SigningSecret::new(value.trim())
        .map_err(|e| CliError::Usage(format!("the secret in {source} is not valid: {e}")).into())
}

impl ServeArgs {
    fn keyring(&self) -> anyhow::Result<Keyring> {
        let current = match (&self.secret_env, &self.secret_file) {
            (Some(var), _) => secret_from(
                &format!("environment variable {var}"),
                std::env::var(var).ok(),
            )?,
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    CliError::Usage(format!(
                        "cannot read the secret file {}: {e}",
                        path.display()
                    ))
                })?;
                secret_from(&format!("the file {}", path.display()), Some(text))?
            }
            (None, None) => {
                return Err(CliError::Usage("give --secret-env or --secret-file".into()).into());
            }
        };
        let mut keyring = Keyring::new().with_key("current", current);
        if let Some(var) = &self.previous_secret_env {
            let previous = secret_from(
                &format!("environment variable {var}"),
                std::env::var(var).ok(),
            )?;
            keyring = keyring.with_key("previous", previous);
        }
        Ok(keyring)
    }
}

/// Runs the receiver until SIGTERM or Ctrl-C.
///
/// # Errors
/// Bad flags or secret (exit 2), a store that cannot be used, an address that cannot be bound.
pub async fn exec(ctx: &Ctx, args: ServeArgs) -> anyhow::Result<()> {
    if !args.path.starts_with('/') {
        return Err(
            CliError::Usage(format!("--path must start with '/', got {:?}", args.path)).into(),
        );
    }
    let keyring = args.keyring()?;
    let client = if args.fetch {
        Some(ctx.client()?)
    } else {
        None
    };
    let store = Store::open_or_create(&args.store)?;
    let inbox = SqliteInbox::open(&args.store, InboxPolicy::default())
        .with_context(|| format!("opening the inbox in {}", args.store.display()))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr().context("reading the bound address")?;
    let receiver = InboxReceiver::new(Verifier::new(keyring), inbox.clone());
    let app = axum::Router::new().route(&args.path, inbox_route(receiver));
    ctx.out.note(&format!(
        "receiving webhooks on http://{local}{} into {}{}",
        args.path,
        args.store.display(),
        if args.fetch {
            " (fetching call details)"
        } else {
            ""
        }
    ));

    let (stop, stopping) = watch::channel(false);
    let handler = {
        let store = store.clone();
        move |received: Received| {
            let (store, client) = (store.clone(), client.clone());
            async move { record(&store, client.as_ref(), received).await }
        }
    };
    let workers = {
        let mut stopping = stopping.clone();
        tokio::spawn(run_inbox_workers(
            inbox,
            handler,
            SystemClock,
            WORKERS,
            async move {
                let _ = stopping.wait_for(|stop| *stop).await;
            },
        ))
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(shutdown_signal());
    let served = server.await.context("serving webhooks");
    // Requests in flight are answered; now let the workers finish the entries in hand.
    let _ = stop.send(true);
    let _ = workers.await;
    served?;
    ctx.out.note("stopped");
    Ok(())
}

/// Records one verified delivery in the ledger and, with a client, stores the call's detail.
/// An `Err` leaves the entry in the inbox, retried later.
async fn record(store: &Store, client: Option<&Client>, received: Received) -> Result<(), String> {
    let event = received.event.clone();
    let verified_at = DateTime::<Utc>::from_timestamp(received.received_at, 0).unwrap_or_default();
    let inserted = {
        let received = received.clone();
        store
            .blocking(move |s| {
                s.record_delivery(&NewDelivery {
                    webhook_id: received.webhook_id.as_str(),
                    event: &received.event,
                    body: &received.body,
                    verified_at: &format_ts(verified_at),
                })
            })
            .await
            .map_err(|e| format!("recording the delivery: {e}"))?
    };
    if inserted {
        if event.success {
            tracing::info!(webhook_id = %received.webhook_id, call_id = %event.call_id,
                source = %event.source, "call scored");
        } else {
            tracing::warn!(webhook_id = %received.webhook_id, call_id = %event.call_id,
                reason = event.reason.as_ref().map(|r| r.as_str()).unwrap_or("-"),
                reason_message = event.reason_message.as_deref().unwrap_or("-"),
                "call not scored");
        }
    }
    let Some(client) = client.filter(|_| event.success) else {
        return Ok(());
    };
    let call_id = CallId::from_service(event.call_id.clone());
    match client.call_raw(&call_id).await {
        Ok(detail) => {
            let writer = Writer {
                by: "webhook",
                run_id: None,
                now: format_ts(Utc::now()),
                ledger_since_ms: None,
                missed_before_ms: i64::MIN,
            };
            store
                .blocking(move |s| s.store_calls(&[(None, detail)], &writer))
                .await
                .map(drop)
                .map_err(|e| format!("storing call {call_id}: {e}"))
        }
        // Scored calls are readable; a 404 or a malformed detail will not heal by retrying
        // now. Reconcile stores the call from its listing.
        Err(e) if e.class() == ErrorClass::Failure => {
            tracing::warn!(call_id = %call_id, error = %e,
                "call detail not stored; reconcile will store it");
            Ok(())
        }
        Err(e) => Err(format!("reading call {call_id}: {e:#}")),
    }
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
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
        () = ctrl_c => {},
        () = terminate => {},
    }
    // A deadline for the drain: a client that never finishes its request cannot hold the
    // process for ever.
    tokio::spawn(async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        tracing::warn!("in-flight requests did not finish within 30 s; exiting");
        std::process::exit(0);
    });
}
