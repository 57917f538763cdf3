//! The command line: the `Cli` struct, global flags, the `Command` enum (one module per
//! resource, each a clap `Subcommand`/`Args` with `exec(self, ctx)`), and the context commands
//! run with (resolved settings and output). `listing` holds the page loop the list commands share.

pub mod agencies;
pub mod agents;
pub mod calls;
pub mod completions;
pub mod config;
pub mod demo;
pub mod inbox;
pub mod practice;
pub mod reconcile;
pub mod roster;
pub mod sandbox;
pub mod session;
pub mod store;
pub mod webhook;

mod listing;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{ConfigError, Inputs, Settings};
use crate::output::Output;
use svc_client::{ApiKey, Client, ClientError, RetryPolicy};

/// The tenant's command line for the Roleplay and Call-Scoring Service v1 API.
#[derive(Debug, Parser)]
#[command(name = "svc-cli", version, about, after_help = crate::exit::HELP)]
pub struct Cli {
    /// Flags every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by every command.
#[derive(Clone, Args)]
pub struct GlobalArgs {
    /// Service base URL, ending in /v1 [env: SVC_BASE_URL]
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
    /// API key (prefer SVC_API_KEY or a config profile: flags are visible to other local users)
    /// [env: SVC_API_KEY]
    #[arg(long, global = true, value_name = "KEY")]
    pub api_key: Option<String>,
    /// Config-file profile to read [env: SVC_PROFILE] [default: default]
    #[arg(long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// Config file [env: SVC_CONFIG] [default: ~/.config/svc-cli/config.toml]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Allow a plain-http:// base URL to a host that is not loopback (the API key then travels
    /// in clear); loopback (127.0.0.0/8, ::1, localhost) is always allowed
    #[arg(
        long,
        global = true,
        env = "SVC_INSECURE_HTTP",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub insecure_http: bool,
    /// Machine output: JSON data only on stdout (indented on a terminal, one object per line
    /// into a pipe or a file: a cron log is JSON Lines), messages on stderr
    #[arg(long, global = true)]
    pub json: bool,
    /// Per-request timeout in seconds
    #[arg(long, global = true, default_value_t = 30, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// Retries of a failed idempotent request (and of 429s)
    #[arg(long, global = true, default_value_t = 3, value_name = "N")]
    pub retries: u32,
    /// The longest Retry-After of a 429 waited for before retrying, in seconds; a longer one
    /// fails the request at once (exit 75)
    #[arg(long, global = true, default_value_t = 120, value_name = "SECS", value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub max_retry_after: u64,
    /// First retry delay in milliseconds (doubles per retry, with jitter)
    #[arg(
        long,
        global = true,
        default_value_t = 250,
        value_name = "MS",
        hide = true
    )]
    pub retry_base_ms: u64,
}

/// The global flags that only matter to a command calling the service.
const SERVICE_FLAGS: [&str; 8] = [
    "base_url",
    "api_key",
    "profile",
    "config",
    "insecure_http",
    "timeout",
    "retries",
    "max_retry_after",
];

/// The commands that never call the service, by path (a group whose every command is local
/// among them; `sandbox` serves one and calls it with its own client): their help leaves out
/// [`SERVICE_FLAGS`] (still accepted, as every global flag
/// is, so that a shared alias or environment does not break them).
const LOCAL_COMMANDS: [&[&str]; 16] = [
    &["sandbox"],
    &["sandbox", "enable-real-calls"],
    &["sandbox", "disable-real-calls"],
    &["sandbox", "ingest-real"],
    &["sandbox", "redisposition"],
    &["sandbox", "deliveries"],
    &["store"],
    &["store", "stats"],
    &["store", "export"],
    &["store", "report"],
    &["inbox"],
    &["inbox", "dead-letters"],
    &["inbox", "requeue"],
    &["inbox", "discard"],
    &["webhook", "verify"],
    &["webhook", "sign"],
];

/// The command line's definition, as parsed and as `--help` shows it.
pub fn command() -> clap::Command {
    use clap::CommandFactory as _;
    let cli = Cli::command();
    // A subcommand that already has an argument of a global flag's id keeps it instead of a
    // copy of the global one: give the local commands hidden copies.
    let hidden: Vec<clap::Arg> = cli
        .get_arguments()
        .filter(|a| SERVICE_FLAGS.contains(&a.get_id().as_str()))
        .map(|a| a.clone().hide(true))
        .collect();
    LOCAL_COMMANDS.iter().fold(cli, |cli, path| {
        with_subcommand(cli, path, &|command| command.args(hidden.iter().cloned()))
    })
}

/// `command` with its subcommand at `path` changed by `change`.
fn with_subcommand(
    command: clap::Command,
    path: &[&str],
    change: &dyn Fn(clap::Command) -> clap::Command,
) -> clap::Command {
    match path {
        [] => change(command),
        [name, rest @ ..] => command.mut_subcommand(name, |sub| with_subcommand(sub, rest, change)),
    }
}

impl std::fmt::Debug for GlobalArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalArgs")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("profile", &self.profile)
            .field("config", &self.config)
            .field("insecure_http", &self.insecure_http)
            .field("json", &self.json)
            .finish_non_exhaustive()
    }
}

/// Declares the `Command` enum and its dispatch together, so a new resource is one line here.
macro_rules! commands {
    ($( $(#[$doc:meta])* $variant:ident($ty:ty), )*) => {
        /// The commands.
        #[derive(Debug, Subcommand)]
        pub enum Command {
            $( $(#[$doc])* $variant($ty), )*
        }

        impl Command {
            /// Runs the command.
            ///
            /// # Errors
            /// Whatever the command fails with; [`crate::exit::code_for`] maps it to an exit code.
            pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
                match self {
                    $( Self::$variant(command) => command.exec(ctx).await, )*
                }
            }
        }
    };
}

commands! {
    /// Create or rename agencies
    #[command(subcommand)]
    Agencies(agencies::AgenciesCommand),
    /// Register, look up and list agents
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
    /// Bulk roster operations (CSV import)
    #[command(subcommand)]
    Roster(roster::RosterCommand),
    /// Mint session tokens for practice calls
    #[command(subcommand)]
    Session(session::SessionCommand),
    /// List scored calls and show one call
    #[command(subcommand)]
    Calls(calls::CallsCommand),
    /// Run a headless practice call over the live transport (smoke test)
    Practice(practice::PracticeArgs),
    /// Read and write the config file's profiles
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Print shell completions
    Completions(completions::CompletionsArgs),
    /// Store every scored call missing from the local store (run it on cron)
    Reconcile(reconcile::ReconcileArgs),
    /// Webhook tools: verify a captured delivery, serve (receive deliveries into the local
    /// store), sign a body as the service does
    #[command(subcommand)]
    Webhook(webhook::WebhookCommand),
    /// Read the local store: stats, export (JSON lines or CSV), report (one HTML page)
    #[command(subcommand)]
    Store(store::StoreCommand),
    /// The webhook inbox in the local store: list, requeue or discard dead letters
    #[command(subcommand)]
    Inbox(inbox::InboxCommand),
    /// Run the compact service locally as a sandbox (real signed webhooks, fault injection)
    Sandbox(sandbox::SandboxArgs),
    /// The whole loop in one command: sandbox with lost webhooks, receiver, calls, reconcile
    Demo(demo::DemoArgs),
}

impl Command {
    /// The log flags of the command: its own for the long-running ones, plain text for the
    /// others.
    pub fn log_args(&self) -> crate::ops::logs::LogArgs {
        match self {
            Self::Reconcile(args) => args.log(),
            Self::Webhook(webhook::WebhookCommand::Serve(args)) => args.log(),
            _ => crate::ops::logs::LogArgs::default(),
        }
    }
}

impl Cli {
    /// Runs the parsed command line.
    ///
    /// # Errors
    /// The command's error.
    pub async fn run(self) -> anyhow::Result<()> {
        let ctx = Ctx {
            out: Output::new(self.global.json),
            global: self.global,
        };
        self.command.exec(&ctx).await
    }
}

/// What a command runs with.
#[derive(Debug)]
pub struct Ctx {
    /// The global flags.
    pub global: GlobalArgs,
    /// Output mode.
    pub out: Output,
}

impl Ctx {
    /// The raw configuration inputs from the flags.
    pub fn inputs(&self) -> Inputs {
        Inputs {
            base_url_flag: self.global.base_url.clone(),
            api_key_flag: self.global.api_key.as_deref().map(ApiKey::new),
            profile_flag: self.global.profile.clone(),
            config_flag: self.global.config.clone(),
        }
    }

    /// Resolved settings.
    ///
    /// # Errors
    /// A bad config file or unknown profile.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        self.inputs().resolve()
    }

    /// A client with the API key (every endpoint but redeem).
    ///
    /// # Errors
    /// Missing base URL or key, or an invalid base URL (all exit 2).
    pub fn client(&self) -> anyhow::Result<Client> {
        let settings = self.settings()?;
        let key = settings
            .api_key
            .clone()
            .ok_or(ClientError::MissingApiKey)?
            .0;
        Ok(self.builder(&settings)?.api_key(key).build()?)
    }

    /// A client without an API key (the redeem call authenticates with a session token).
    ///
    /// # Errors
    /// Missing or invalid base URL.
    pub fn client_without_key(&self) -> anyhow::Result<Client> {
        let settings = self.settings()?;
        Ok(self.builder(&settings)?.build()?)
    }

    fn builder(&self, settings: &Settings) -> Result<svc_client::ClientBuilder, ConfigError> {
        let (base_url, _) = settings
            .base_url
            .clone()
            .ok_or(ConfigError::MissingBaseUrl)?;
        let retry = RetryPolicy {
            max_retries: self.global.retries,
            base_delay: Duration::from_millis(self.global.retry_base_ms),
            max_retry_after: Duration::from_secs(self.global.max_retry_after),
            ..RetryPolicy::default()
        };
        Ok(Client::builder(base_url)
            .allow_insecure_http(self.global.insecure_http)
            .timeout(Duration::from_secs(self.global.timeout))
            .retry(retry))
    }
}

/// A clap value parser for timestamps given on the command line (`--since`, `--until`).
///
/// # Errors
/// A message saying what form is expected.
pub fn timestamp_arg(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    svc_reconcile::time::parse_ts(text).ok_or_else(|| {
        format!("{text:?} is not an ISO 8601 date-time such as 2026-01-01T00:00:00Z")
    })
}
