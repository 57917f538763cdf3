//! `svc-cli session mint`: mint a short-lived, single-use session token for a registered agent.

use clap::{ArgGroup, Args, Subcommand};

use super::Ctx;
use crate::output;
use svc_client::{AgentId, MintFor};

/// Session commands.
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Mint a session token (single use, about five minutes); prints the token and its expiry
    Mint(MintArgs),
}

/// `session mint` flags: exactly one agent id.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("agent").required(true).args(["platform_agent_id", "agent_id"])))]
pub struct MintArgs {
    /// The tenant's id for the agent
    #[arg(long)]
    pub platform_agent_id: Option<String>,
    /// The service agent id (svc_agent_…)
    #[arg(long)]
    pub agent_id: Option<AgentId>,
}

impl SessionCommand {
    /// Runs the command.
    ///
    /// # Errors
    /// `AGENT_NOT_FOUND`, `TENANT_QUOTA_EXCEEDED`, auth errors, …
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        let Self::Mint(args) = self;
        let who = match (args.platform_agent_id, args.agent_id) {
            (Some(p), _) => MintFor::PlatformAgentId(p),
            (None, Some(id)) => MintFor::AgentId(id),
            (None, None) => {
                return Err(crate::exit::CliError::Usage("name the agent".into()).into());
            }
        };
        let token = ctx.client()?.mint_session(&who).await?;
        if ctx.out.json {
            return ctx.out.json_data(&token);
        }
        ctx.out.table(&output::pairs([
            ("token", token.token.clone()),
            ("expiresAt", token.expires_at.clone()),
        ]))
    }
}
