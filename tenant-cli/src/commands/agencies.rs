//! `svc-cli agencies upsert`: create or rename an agency under the tenant's own id.

use clap::{Args, Subcommand};

use super::Ctx;
use crate::output::{self, Output};
use svc_client::{Agency, UpsertAgency};

/// Agency commands.
#[derive(Debug, Subcommand)]
pub enum AgenciesCommand {
    /// Create an agency, or rename the one with this platform agency id (201 created, 200 existing)
    Upsert(UpsertArgs),
}

/// `agencies upsert` flags.
#[derive(Debug, Args)]
pub struct UpsertArgs {
    /// The tenant's id for the agency (cannot be changed later)
    #[arg(long)]
    pub platform_agency_id: String,
    /// The agency's name
    #[arg(long)]
    pub name: String,
}

impl AgenciesCommand {
    /// Runs the command.
    ///
    /// # Errors
    /// Client errors.
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        match self {
            Self::Upsert(args) => {
                let client = ctx.client()?;
                let body = UpsertAgency {
                    platform_agency_id: args.platform_agency_id,
                    name: args.name,
                };
                let upserted = client.upsert_agency(&body).await?;
                ctx.out.note(if upserted.created {
                    "agency created"
                } else {
                    "agency already existed (name set)"
                });
                print_agency(&ctx.out, &upserted.agency)
            }
        }
    }
}

/// Prints an agency as JSON or a key/value table.
pub(crate) fn print_agency(out: &Output, agency: &Agency) -> anyhow::Result<()> {
    if out.json {
        return out.json_data(agency);
    }
    out.table(&output::pairs([
        ("id", agency.id.to_string()),
        ("name", agency.name.clone()),
        (
            "platformAgencyId",
            output::opt(agency.platform_agency_id.as_deref()),
        ),
        ("createdAt", agency.created_at.clone()),
    ]))
}
