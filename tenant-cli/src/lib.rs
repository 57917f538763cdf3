//! `svc-cli`: the tenant's command line and typed API client for the v1 API.
//!
//! # Layout
//!
//! - `commands::webhook`: `webhook verify`, checking a captured delivery.

use clap::{Parser, Subcommand};

/// Subcommands, one module each.
pub mod commands {
    pub mod webhook;
}

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "svc-cli",
    version,
    about = "The tenant's command line for the v1 API"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Webhook tools (verify a captured delivery).
    Webhook {
        /// The webhook subcommand.
        #[command(subcommand)]
        command: commands::webhook::WebhookCommand,
    },
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> std::process::ExitCode {
    match cli.command {
        Command::Webhook { command } => commands::webhook::exec_command(command),
    }
}
