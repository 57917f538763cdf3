//! `svc-cli demo`: the whole loop in one command ([`crate::demo`]): prints the story (or the
//! JSON summary with `--json`) and exits 1 when its self-check fails.

use std::path::PathBuf;

use clap::Args;

use super::Ctx;
use crate::exit::CliError;

/// `demo` flags.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the sandbox's database and the store in this new or empty directory, and print the
    /// commands to explore them
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Practice calls to make
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(6..=500))]
    pub calls: u64,
    /// Seed of the fault profile (which deliveries are lost or sent twice)
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
}

impl DemoArgs {
    /// Runs the demo.
    ///
    /// # Errors
    /// A step that could not run (exit 1), or a failed self-check (exit 1, after the story).
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        #[cfg(feature = "sandbox")]
        {
            let defaults = crate::demo::DemoOptions::default();
            let options = crate::demo::DemoOptions {
                keep: self.keep,
                practice_calls: usize::try_from(self.calls).unwrap_or(30),
                faults: svc_service::sandbox::Faults {
                    seed: self.seed,
                    ..defaults.faults
                },
            };
            let summary = crate::demo::run(&options, &ctx.out).await?;
            if ctx.out.json {
                ctx.out.json_data(&summary)?;
            } else {
                summary.print_story(&ctx.out)?;
            }
            if summary.ok {
                Ok(())
            } else {
                ctx.out.note("svc-cli: error: the demo's self-check failed");
                Err(CliError::Reported(crate::exit::FAILURE).into())
            }
        }
        #[cfg(not(feature = "sandbox"))]
        {
            let _ = ctx;
            Err(
                CliError::Usage("this svc-cli was built without the `sandbox` feature".to_owned())
                    .into(),
            )
        }
    }
}
