//! `svc-cli`: the tenant's command line for the Roleplay and Call-Scoring Service v1 API, a thin
//! binary over the library crates: `svc-client` (the typed API client), `svc-reconcile` (the
//! reconciliation engine), `svc-store` (its store: a SQLite file or a PostgreSQL database) and
//! `svc-receiver` (webhooks).
//!
//! # Layout
//! - [`config`]: where the base URL and API key come from (flag > env > config-file profile) and
//!   the config file itself (written 0600).
//! - [`output`]: tables or JSON on stdout, messages and progress on stderr.
//! - [`reconcile`]: `svc-reconcile` as `svc-cli reconcile` runs it: the store as the sink,
//!   exit codes, the report's table, the spinner.
//! - [`html_report`]: the store as one self-contained HTML page (`svc-cli store report`).
//! - [`receiver`]: receive webhook deliveries into the store (`svc-cli webhook serve`).
//! - [`sandbox`] (feature `sandbox`, on by default): the compact service run in-process as a
//!   local sandbox (`svc-cli sandbox`).
//! - [`console`] (feature `sandbox`): the sandbox's rep console (`GET /console` on its own
//!   address): a practice call through the service's browser SDK, tokens minted server-side.
//! - [`demo`] (feature `sandbox`): the whole loop in one command (`svc-cli demo`).
//! - [`exit`]: the documented exit codes and the mapping from errors to them.
//! - [`files`]: files written whole, atomically and without following links.
//! - [`ops`]: what operators run the long-lived commands with: `--log-format`, the
//!   Prometheus recorder, `webhook serve`'s health and metrics endpoints, `reconcile
//!   --metrics-file`.
//! - [`commands`]: the `Cli` definition; one module per resource, each with `exec(self, ctx)`.
//!
//! `main.rs` only calls [`main_entry`]. Nothing prints with `println!` or `eprintln!` (they panic
//! on a closed pipe): data and messages go through [`output`].

#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod commands;
pub mod config;
#[cfg(feature = "sandbox")]
pub mod console;
#[cfg(feature = "sandbox")]
pub mod demo;
pub mod exit;
pub mod files;
pub mod html_report;
pub mod ops;
pub mod output;
pub mod receiver;
pub mod reconcile;
#[cfg(feature = "sandbox")]
pub mod sandbox;

use std::process::ExitCode;

use clap::FromArgMatches as _;

/// Parses the command line, runs the command and returns the documented exit code.
pub fn main_entry() -> ExitCode {
    let parsed = commands::command()
        .try_get_matches()
        .and_then(|matches| commands::Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version on stdout (exit 0) and usage errors on stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(exit::USAGE));
        }
    };
    let (log, traces) = match init_tracing(&cli.command) {
        Ok(initialised) => initialised,
        Err(error) => {
            output::stderr_line(&format!("svc-cli: error: {error}"));
            return ExitCode::from(exit::USAGE);
        }
    };
    let code = run(cli, log);
    // The last spans are sent before the process exits.
    drop(traces);
    code
}

/// Runs the command on a fresh runtime and maps its outcome to the exit code.
fn run(cli: commands::Cli, log: ops::logs::LogArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            output::stderr_line(&format!(
                "svc-cli: error: cannot start the async runtime: {e}"
            ));
            return ExitCode::from(exit::FAILURE);
        }
    };
    match runtime.block_on(cli.run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if !matches!(
                error.downcast_ref::<exit::CliError>(),
                Some(exit::CliError::Reported(_))
            ) {
                let message = svc_ops::errors::chain(error.as_ref());
                match exit::hint(&error) {
                    Some(hint) => log.error(&format!("svc-cli: error: {message} ({hint})")),
                    None => log.error(&format!("svc-cli: error: {message}")),
                }
            }
            ExitCode::from(exit::code_for(&error))
        }
    }
}

/// Logs go to stderr, filtered by `RUST_LOG` (default: warnings only), as plain text or, with a
/// long-running command's `--log-format json`, one JSON object per line (see [`ops::logs`]).
/// Nothing logged carries a credential: requests are logged by method and path. Spans are
/// exported over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (not by the demo).
fn init_tracing(
    command: &commands::Command,
) -> Result<(ops::logs::LogArgs, svc_ops::traces::Traces), svc_ops::traces::TracesError> {
    if matches!(command, commands::Command::Demo(_)) {
        // The demo tells its own story; the warnings of the faults it injects on purpose
        // would drown it: errors only, unless RUST_LOG says otherwise.
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init();
    }
    let log = command.log_args();
    if matches!(command, commands::Command::Demo(_)) {
        return Ok((log, svc_ops::traces::Traces::off()));
    }
    let traces = ops::logs::init(log.log_format)?;
    Ok((log, traces))
}
