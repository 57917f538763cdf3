//! `svc-cli session mint`: mint a short-lived, single-use session token for a registered agent.

use clap::{ArgGroup, Args, Subcommand};

use super::Ctx;
use crate::output;
use svc_client::{AgentId, ClientError, ErrorClass, MintFor};

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
        let token = ctx
            .client()?
            .mint_session(&who)
            .await
            .map_err(say_not_retried)?;
        if ctx.out.json {
            return ctx.out.json_data(&token);
        }
        ctx.out.table(&output::pairs([
            ("token", token.token.clone()),
            ("expiresAt", token.expires_at.clone()),
        ]))
    }
}

/// A mint that failed for a temporary reason (`INTERNAL_ERROR`, a lost connection, a timeout)
/// was sent once: say so, and why, so that a tenant rehearsing `api-500` does not take it for
/// a retry that gave up. A `429` was retried (a rate-limited request was not processed).
fn say_not_retried(error: ClientError) -> anyhow::Error {
    let rate_limited = matches!(&error, ClientError::Api(api) if api.status == 429);
    if error.class() != ErrorClass::Temporary || rate_limited {
        return error.into();
    }
    anyhow::Error::from(error).context(
        "session mint is not retried: a mint is not idempotent (a token the service may have \
         minted unseen expires unused in about 5 minutes); run it again",
    )
}
