//! The operator's `agency …` commands: switch an agency's real calls on or off (what the
//! contract calls "arranged out of band with the service operator"). An agency not switched on
//! ingests, scores and bills nothing.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;

use super::{Output, print};
use crate::config::DEFAULT_DB;
use crate::db::{Db, RealCallAgency, Rubric};
use super::target::OperatorTarget;

/// `svc-service agency …`.
#[derive(Debug, Args)]
pub struct AgencyArgs {
    /// SQLite database file of the service.
    #[arg(long, env = "SVC_DB", default_value = DEFAULT_DB, global = true)]
    pub db: PathBuf,
    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// The operator command.
    #[command(subcommand)]
    pub command: AgencyCommand,
}

/// How an agency's real calls are graded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RubricArg {
    /// The service's rubric, with the compliance scorecard on health-plan sales.
    Default,
    /// The agency's own scorecard: `compliancePercent`, never a scorecard.
    Own,
}

/// The agency commands.
#[derive(Debug, Subcommand)]
pub enum AgencyCommand {
    /// Switch an agency on for real calls: its dialer records are ingested and scored.
    EnableRealCalls {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Service agency id (svc_agency_…).
        #[arg(long)]
        agency_id: String,
        /// The agency dials through a third-party platform: the dialer's agent ids are outside
        /// the tenant's namespace, so they are never matched against platformAgentId.
        #[arg(long)]
        third_party_dialer: bool,
        /// How the agency's calls are graded.
        #[arg(long, value_enum, default_value = "default")]
        rubric: RubricArg,
    },
    /// Switch an agency off for real calls: later records are dropped (agency_not_enabled).
    DisableRealCalls {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Service agency id (svc_agency_…).
        #[arg(long)]
        agency_id: String,
    },
}

impl AgencyArgs {
    /// Runs the command against the database.
    ///
    /// # Errors
    /// An unknown agency, or a database failure.
    pub async fn exec(self) -> anyhow::Result<()> {
        let target = OperatorTarget {
            json: self.json,
            ..OperatorTarget::new(self.db)
        };
        match self.command {
            AgencyCommand::EnableRealCalls {
                tenant,
                agency_id,
                third_party_dialer,
                rubric,
            } => {
                let rubric = match rubric {
                    RubricArg::Default => Rubric::Default,
                    RubricArg::Own => Rubric::Own,
                };
                let settings = Some((third_party_dialer, rubric));
                set_real_calls(&target, &tenant, &agency_id, settings).await
            }
            AgencyCommand::DisableRealCalls { tenant, agency_id } => {
                set_real_calls(&target, &tenant, &agency_id, None).await
            }
        }
    }
}

/// Switches the real calls of `tenant`'s agency `agency_id` on (with whether it dials through
/// a third party, and its rubric) or off (`None`), and prints the agency.
pub(crate) async fn set_real_calls(
    target: &OperatorTarget,
    tenant: &str,
    agency_id: &str,
    settings: Option<(bool, Rubric)>,
) -> anyhow::Result<()> {
    let db = Db::open(&target.db)
        .await
        .with_context(|| format!("opening database {}", target.db.display()))?;
    let agency = db
        .set_real_calls(tenant.trim(), agency_id.trim(), settings)
        .await?
        .with_context(|| format!("tenant {tenant:?} has no agency {agency_id:?}"))?;
    print(&summary(&agency), target.json)
}

fn summary(agency: &RealCallAgency) -> Output {
    Output {
        json: json!({
            "agencyId": agency.id,
            "platformAgencyId": agency.platform_agency_id,
            "realCalls": agency.enabled,
            "thirdPartyDialer": agency.third_party_dialer,
            "rubric": agency.rubric.as_str(),
        }),
        human: format!(
            "{} ({})  real calls {}  third-party dialer {}  rubric {}",
            agency.id,
            agency.platform_agency_id,
            if agency.enabled { "on" } else { "off" },
            if agency.third_party_dialer {
                "yes"
            } else {
                "no"
            },
            agency.rubric.as_str()
        ),
    }
}
