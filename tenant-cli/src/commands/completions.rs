//! `svc-cli completions <shell>`: shell completion scripts on stdout.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{Cli, Ctx};

/// `completions` arguments.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell (bash, elvish, fish, powershell, zsh)
    pub shell: Shell,
}

impl CompletionsArgs {
    /// Prints the completion script.
    ///
    /// # Errors
    /// When stdout cannot be written (a closed pipe, `| head -1`, is not an error).
    pub async fn exec(self, _ctx: &Ctx) -> anyhow::Result<()> {
        // Generated into memory first: written straight to a closed pipe, the generator panics.
        let mut script = Vec::new();
        clap_complete::generate(self.shell, &mut Cli::command(), "svc-cli", &mut script);
        crate::output::stdout_bytes(&script)
    }
}
