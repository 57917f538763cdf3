//! `svc-cli agents register|get|list`: register an agent, look one up by exactly one handle, or
//! page the roster.

use clap::{ArgGroup, Args, Subcommand};

use super::Ctx;
use crate::output::{self, Output};
use svc_client::{AgencyId, AgencyRef, Agent, AgentHandle, AgentId, AgentQuery, RegisterAgent};

/// Agent commands.
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Register an agent into an existing agency (at least one of --npn, --email, --platform-agent-id)
    Register(RegisterArgs),
    /// Look an agent up by exactly one handle
    Get(GetArgs),
    /// List agents (one page, or every page with --all)
    List(ListArgs),
}

/// `agents register` flags.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("agency").required(true).args(["platform_agency_id", "agency_id"])))]
#[command(group(ArgGroup::new("handle").required(true).multiple(true).args(["npn", "email", "platform_agent_id"])))]
pub struct RegisterArgs {
    /// First name
    #[arg(long)]
    pub first_name: Option<String>,
    /// Last name
    #[arg(long)]
    pub last_name: Option<String>,
    /// Email handle
    #[arg(long)]
    pub email: Option<String>,
    /// National Producer Number handle
    #[arg(long)]
    pub npn: Option<String>,
    /// The tenant's id for the agent
    #[arg(long)]
    pub platform_agent_id: Option<String>,
    /// The agency, by the tenant's id
    #[arg(long)]
    pub platform_agency_id: Option<String>,
    /// The agency, by the service id (svc_agency_…)
    #[arg(long)]
    pub agency_id: Option<AgencyId>,
}

/// `agents get` flags: exactly one handle.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("handle").required(true).args(["agent_id", "platform_agent_id", "npn", "email"])))]
pub struct GetArgs {
    /// Service agent id (svc_agent_…)
    #[arg(long)]
    pub agent_id: Option<AgentId>,
    /// The tenant's id for the agent
    #[arg(long)]
    pub platform_agent_id: Option<String>,
    /// NPN (non-digits are ignored by the service)
    #[arg(long)]
    pub npn: Option<String>,
    /// Email (matched case-insensitively)
    #[arg(long)]
    pub email: Option<String>,
    /// Only within this agency (service id, svc_agency_…)
    #[arg(long)]
    pub agency_id: Option<AgencyId>,
}

/// `agents list` flags.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this agency's agents (service id, svc_agency_…)
    #[arg(long)]
    pub agency_id: Option<AgencyId>,
    /// Page size (1-100)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: Option<u32>,
    /// Start at this cursor (a nextCursor from an earlier page)
    #[arg(long, conflicts_with = "all")]
    pub cursor: Option<String>,
    /// Follow nextCursor through every page
    #[arg(long)]
    pub all: bool,
}

impl AgentsCommand {
    /// Runs the command.
    ///
    /// # Errors
    /// Client errors; `agents get` with no match is a failure (exit 1).
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        match self {
            Self::Register(args) => register(ctx, args).await,
            Self::Get(args) => get(ctx, args).await,
            Self::List(args) => list(ctx, args).await,
        }
    }
}

async fn register(ctx: &Ctx, args: RegisterArgs) -> anyhow::Result<()> {
    let agency = match (args.platform_agency_id, args.agency_id) {
        (Some(p), _) => AgencyRef::Platform(p),
        (None, Some(id)) => AgencyRef::Service(id),
        (None, None) => return Err(crate::exit::CliError::Usage("name the agency".into()).into()),
    };
    let body = RegisterAgent {
        first_name: args.first_name,
        last_name: args.last_name,
        email: args.email,
        npn: args.npn,
        platform_agent_id: args.platform_agent_id,
        agency,
    };
    let registered = ctx.client()?.register_agent(&body).await?;
    if ctx.out.json {
        return ctx.out.json_data(&registered);
    }
    ctx.out.note("agent registered");
    print_agents(&ctx.out, std::slice::from_ref(&registered.agent))
}

async fn get(ctx: &Ctx, args: GetArgs) -> anyhow::Result<()> {
    let handle = match (args.agent_id, args.platform_agent_id, args.npn, args.email) {
        (Some(v), ..) => AgentHandle::AgentId(v),
        (_, Some(v), ..) => AgentHandle::PlatformAgentId(v),
        (_, _, Some(v), _) => AgentHandle::Npn(v),
        (.., Some(v)) => AgentHandle::Email(v),
        _ => return Err(crate::exit::CliError::Usage("give one handle".into()).into()),
    };
    let query = AgentQuery {
        handle: Some(handle),
        agency_id: args.agency_id,
        limit: None,
    };
    let page = ctx.client()?.agents_page(&query, None).await?;
    let Some(agent) = page.data.into_iter().next() else {
        return Err(crate::exit::CliError::Failed("no agent matches that handle".into()).into());
    };
    if ctx.out.json {
        return ctx.out.json_data(&agent);
    }
    print_agents(&ctx.out, &[agent])
}

async fn list(ctx: &Ctx, args: ListArgs) -> anyhow::Result<()> {
    let client = ctx.client()?;
    let query = AgentQuery {
        handle: None,
        agency_id: args.agency_id,
        limit: args.limit,
    };
    super::listing::print_pages(
        &ctx.out,
        args.all,
        client.agents(query.clone()),
        client.agents_page(&query, args.cursor.as_deref()),
        "agent",
        print_agents,
    )
    .await
}

/// Prints agents as a table.
pub(crate) fn print_agents(out: &Output, agents: &[Agent]) -> anyhow::Result<()> {
    let mut table = output::table([
        "id",
        "firstName",
        "lastName",
        "email",
        "npn",
        "platformAgentId",
        "agencyId",
    ]);
    for a in agents {
        table.add_row(vec![
            a.id.to_string(),
            a.first_name.clone(),
            a.last_name.clone(),
            output::opt(a.email.as_deref()),
            output::opt(a.npn.as_deref()),
            output::opt(a.platform_agent_id.as_deref()),
            a.agency_id.to_string(),
        ]);
    }
    out.table(&table)
}
