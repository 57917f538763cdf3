//! `svc-cli webhook serve`: the flags of [`crate::receiver`], the receiver that writes
//! deliveries into the local store `reconcile` reads. SIGTERM or Ctrl-C stops accepting, lets
//! in-flight requests and entries finish, and exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use svc_receiver::{Keyring, SigningSecret};

use crate::commands::Ctx;
use crate::exit::CliError;
use crate::receiver::{self, ReceiverConfig};
use crate::store::Store;

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
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr().context("reading the bound address")?;
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
    let config = ReceiverConfig {
        store,
        keyring,
        path: args.path,
        client,
    };
    receiver::run(config, listener, shutdown_signal()).await?;
    ctx.out.note("stopped");
    Ok(())
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
