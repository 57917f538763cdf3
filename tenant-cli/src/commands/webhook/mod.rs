//! `svc-cli webhook`: `verify` checks a captured delivery the way a receiver would; `serve`
//! receives the service's deliveries into the local store; `sign` signs a body as the service
//! does, to exercise a receiver.

mod secret;
pub mod serve;
pub mod sign;
pub mod verify;

use clap::Subcommand;

use crate::exit::CliError;

pub use verify::{VerifyArgs, exec};

/// Webhook tools: `verify`, `serve`, `sign`.
#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Verify a captured delivery and print its decoded event.
    Verify(VerifyArgs),
    /// Receive deliveries into the local store: verify, deduplicate, commit, then answer 200
    Serve(serve::ServeArgs),
    /// Sign a body as the service signs a delivery: print the X-Service-Signature value, or a
    /// curl command that delivers it
    Sign(sign::SignArgs),
}

impl WebhookCommand {
    /// Runs a `webhook` subcommand as part of the command line. `verify` prints its own
    /// one-line reason, so its failure is reported as [`CliError::Reported`] with its exit code.
    ///
    /// # Errors
    /// [`CliError::Reported`] when a delivery is invalid (1) or the secret malformed (2); the
    /// errors of `serve`.
    pub async fn exec(self, ctx: &super::Ctx) -> anyhow::Result<()> {
        match self {
            Self::Verify(args) => match verify::exec(args) {
                0 => Ok(()),
                code => Err(CliError::Reported(code).into()),
            },
            Self::Serve(args) => serve::exec(ctx, args).await,
            Self::Sign(args) => sign::exec(ctx, args),
        }
    }
}
