//! `svc-cli webhook serve`: the flags of [`crate::receiver`], the receiver that writes
//! deliveries into the local store `reconcile` reads. SIGTERM or Ctrl-C stops accepting, lets
//! in-flight requests and entries finish, and exits 0. With `--secret-file`, the file is read
//! again when it changes and on SIGHUP. `/healthz`, `/readyz` and `/metrics` are served beside
//! the deliveries (`--metrics-listen` moves them to another address).

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use svc_contract::{Keyring, SigningSecret};
use svc_receiver::reload::SecretFile;

use super::secret;
use crate::commands::Ctx;
use crate::exit::CliError;
use crate::ops::logs::LogArgs;
use crate::receiver::{self, Listeners, ReceiverConfig};
use svc_store::{Store, StoreLocation};

/// Flags of `webhook serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on, e.g. 0.0.0.0:3000 (put TLS in front: the service sends to HTTPS)
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// The local store: a file (created if missing; its directory must exist) or a PostgreSQL
    /// database, postgres://… (shared by receivers on several hosts)
    #[arg(long, env = "SVC_STORE", hide_env_values = true, value_name = "PATH|URL", value_parser = StoreLocation::parse)]
    store: StoreLocation,
    /// Read the signing secret (whsec_…) from this environment variable
    #[arg(
        long,
        value_name = "VAR",
        required_unless_present = "secret_file",
        conflicts_with = "secret_file"
    )]
    secret_env: Option<String>,
    /// Read the signing secret (whsec_…) from this file (surrounding whitespace ignored); it
    /// is read again when it changes and on SIGHUP, and a new secret takes effect at once (the
    /// one it replaces is still accepted for 5 minutes)
    #[arg(long, value_name = "PATH")]
    secret_file: Option<PathBuf>,
    /// How often the secret file is read, in milliseconds (for tests)
    #[arg(long, default_value_t = 1000, value_name = "MS", hide = true, value_parser = clap::value_parser!(u64).range(1..))]
    secret_poll_ms: u64,
    /// Also accept deliveries signed with the previous secret, read from this environment
    /// variable (the service switches at once: this covers deliveries it signed before the
    /// rotation that arrive after this receiver switched)
    #[arg(long, value_name = "VAR")]
    previous_secret_env: Option<String>,
    /// The path deliveries are POSTed to
    #[arg(long, default_value = "/webhooks", value_name = "PATH")]
    path: String,
    /// Also read and store the call detail of each scored event (needs the API key)
    #[arg(long)]
    fetch: bool,
    /// Serve GET /metrics (with /healthz and /readyz) on this address instead of --listen,
    /// e.g. 127.0.0.1:9188 to keep it off the public address
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    #[command(flatten)]
    log: LogArgs,
    /// How long a handed-out inbox entry is reserved before another worker (of any replica)
    /// takes it, in seconds (for tests)
    #[arg(long, default_value_t = 300, value_name = "SECS", hide = true, value_parser = clap::value_parser!(u64).range(2..))]
    inbox_lease_secs: u64,
    /// On a PostgreSQL store: how long the database may leave one statement unanswered (a
    /// stalled network, a hung server) before the connection is closed and a fresh one used;
    /// the delivery meanwhile is answered 503 (the sender retries) or its recording retried
    #[arg(long, default_value_t = 60, value_name = "SECS", value_parser = clap::value_parser!(u64).range(2..=3600))]
    db_timeout: u64,
}

impl std::fmt::Debug for ServeArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeArgs")
            .field("listen", &self.listen)
            .field("store", &self.store)
            .field("secret_env", &self.secret_env)
            .field("secret_file", &self.secret_file)
            .field("secret_poll_ms", &self.secret_poll_ms)
            .field("previous_secret_env", &self.previous_secret_env)
            .field("path", &self.path)
            .field("fetch", &self.fetch)
            .field("metrics_listen", &self.metrics_listen)
            .field("log", &self.log)
            .field("inbox_lease_secs", &self.inbox_lease_secs)
            .field("db_timeout", &self.db_timeout)
            .finish()
    }
}

/// Where the receiver's keys come from.
enum Keys {
    /// Read once at start (`--secret-env`).
    Fixed(Keyring),
    /// Read from a file, again on change and on SIGHUP (`--secret-file`).
    File(Box<SecretFile>),
}

impl ServeArgs {
    /// The `--log-format` flag.
    pub fn log(&self) -> LogArgs {
        self.log
    }

    /// The secret of `--previous-secret-env`, if given.
    fn previous(&self) -> anyhow::Result<Option<SigningSecret>> {
        self.previous_secret_env
            .as_deref()
            .map(secret::from_env)
            .transpose()
    }

    fn keys(&self) -> anyhow::Result<Keys> {
        match (&self.secret_env, &self.secret_file) {
            (Some(var), _) => {
                let current = secret::from_env(var)?;
                let mut keyring = Keyring::new().with_key("current", current);
                if let Some(previous) = self.previous()? {
                    keyring = keyring.with_key("previous", previous);
                }
                Ok(Keys::Fixed(keyring))
            }
            (None, Some(path)) => {
                if let Some(warning) = secret::open_to_others(path) {
                    self.log.warn(&warning);
                }
                let mut file = SecretFile::open(path)
                    .map_err(|e| CliError::Usage(e.to_string()))?
                    .poll_interval(Duration::from_millis(self.secret_poll_ms));
                if let Some(previous) = self.previous()? {
                    file = file.with_key("previous", previous);
                }
                Ok(Keys::File(Box::new(file)))
            }
            (None, None) => {
                Err(CliError::Usage("give --secret-env or --secret-file".into()).into())
            }
        }
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
    let keys = args.keys()?;
    let client = if args.fetch {
        Some(ctx.client()?)
    } else {
        None
    };
    let location = args
        .store
        .clone()
        .with_answer_timeout(Duration::from_secs(args.db_timeout));
    let store = tokio::task::spawn_blocking(move || Store::open_or_create(location)).await??;
    let listeners = Listeners {
        webhooks: bind(args.listen).await?,
        metrics: match args.metrics_listen {
            Some(addr) => Some(bind(addr).await?),
            None => None,
        },
    };
    listeners.check_path(&args.path).map_err(CliError::Usage)?;
    let local = listeners
        .webhooks
        .local_addr()
        .context("reading the bound address")?;
    let metrics_at = match &listeners.metrics {
        Some(listener) => listener.local_addr().context("reading the bound address")?,
        None => local,
    };
    let mut config = ReceiverConfig {
        store,
        keyring: Keyring::new(),
        path: args.path.clone(),
        client,
        inbox_lease: Duration::from_secs(args.inbox_lease_secs),
    };
    // Built before the note below: with a secret file, this installs the SIGHUP handler, so
    // that a SIGHUP sent once the receiver says it runs reloads the file.
    let stop = shutdown_signal().context("installing the signal handlers")?;
    let running: Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>> = match keys {
        Keys::Fixed(keyring) => {
            config.keyring = keyring;
            Box::pin(receiver::run(config, listeners, stop))
        }
        Keys::File(file) => Box::pin(receiver::run_with_secret_file(
            config, *file, listeners, stop,
        )),
    };
    args.log.note(
        &ctx.out,
        &format!(
            "receiving webhooks on http://{local}{} into {}{}; metrics on http://{metrics_at}/metrics",
            args.path,
            args.store,
            if args.fetch {
                " (fetching call details)"
            } else {
                ""
            }
        ),
    );
    running.await?;
    args.log.note(&ctx.out, "stopped");
    Ok(())
}

async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
}

/// Resolves on Ctrl-C or SIGTERM (handlers installed now), and then gives the drain a deadline.
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    let signal = svc_server::shutdown_signal()?;
    Ok(async move {
        signal.await;
        drain_deadline();
    })
}

/// A deadline for the drain: the server bounds each request and the inbox drain, but a stuck
/// store could still hold the process.
fn drain_deadline() {
    tokio::spawn(async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        tracing::warn!("in-flight requests did not finish within 30 s; exiting");
        std::process::exit(0);
    });
}
