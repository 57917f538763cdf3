//! The command line: `serve` runs the API, `tenant …` are the operator's commands.
//!
//! Exit codes: 0 success; 1 failure (unknown tenant, invalid value, database or server
//! error, an invalid dialer record; the message is on stderr); 2 usage error (from the flag
//! parser, or a file or value a command cannot use); 75 temporary (a full disk: run the same
//! command again later).

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::config::ServeArgs;
use crate::deliveries::DeliveriesArgs;
use crate::operator::agency::AgencyArgs;
use crate::operator::calls::CallsArgs;
use crate::operator::{Reported, Temporary, TenantArgs, Usage};

/// Roleplay and Call-Scoring Service v1: a compact local implementation.
#[derive(Debug, Parser)]
#[command(name = "svc-service", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the v1 API until Ctrl-C or SIGTERM.
    Serve(ServeArgs),
    /// Operator commands on tenants (act on the database; a running server sees the change
    /// at its next request).
    Tenant(TenantArgs),
    /// Operator commands on webhook deliveries (list them with every attempt).
    Deliveries(DeliveriesArgs),
    /// Operator commands on agencies (switch real calls on or off).
    Agency(AgencyArgs),
    /// Operator commands on real calls (ingest dialer records, re-disposition, audio sweep).
    Calls(CallsArgs),
}

/// Parses the command line, runs the command and maps the outcome to an exit code.
pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    let traces = match crate::ops::logs::init(match &cli.command {
        Command::Serve(args) => args.log_format,
        _ => crate::ops::logs::LogFormat::Text,
    }) {
        Ok(traces) => traces,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "error: {error}");
            return ExitCode::from(2);
        }
    };
    let outcome = run(cli.command).await;
    // The last spans are sent before the exit code is.
    drop(traces);
    outcome
}

async fn run(command: Command) -> ExitCode {
    let outcome = match command {
        Command::Serve(args) => serve(args).await,
        Command::Tenant(args) => args.exec().await,
        Command::Deliveries(args) => args.exec().await,
        Command::Agency(args) => args.exec().await,
        Command::Calls(args) => args.exec().await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if let Some(Reported(code)) = error.downcast_ref::<Reported>() {
                return ExitCode::from(*code);
            }
            // stderr may be a closed pipe too: never panic over the message.
            let _ = writeln!(
                std::io::stderr(),
                "error: {}",
                svc_ops::errors::chain(error.as_ref())
            );
            if error.downcast_ref::<Usage>().is_some() {
                ExitCode::from(2)
            } else if error.downcast_ref::<Temporary>().is_some() {
                ExitCode::from(75)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = args.into_config();
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let stop = svc_server::shutdown_signal().context("cannot install the signal handlers")?;
    let stop = async {
        stop.await;
        tracing::info!("shutting down");
    };
    crate::run(config, listener, stop).await
}
