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
    /// None in practice; the signature matches the other commands.
    pub async fn exec(self, _ctx: &Ctx) -> anyhow::Result<()> {
        clap_complete::generate(
            self.shell,
            &mut Cli::command(),
            "svc-cli",
            &mut std::io::stdout(),
        );
        Ok(())
    }
}
