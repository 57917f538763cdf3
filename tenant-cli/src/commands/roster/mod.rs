//! `svc-cli roster import <file.csv>`: the onboarding path for a tenant with thousands of reps.
//! The file is read and validated first ([`plan`]); then agencies and agents are sent ([`run`]);
//! each row's outcome goes to the summary, the optional `--report` CSV and the exit code.

mod existing;
pub mod plan;
mod report;
pub mod run;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use super::Ctx;
use crate::exit::CliError;
use crate::output;
use report::Report;
use run::{Outcome, RowResult};

/// Roster commands.
#[derive(Debug, Subcommand)]
pub enum RosterCommand {
    /// Import agents from a CSV file (header: platformAgencyId, agencyName, firstName, lastName,
    /// email, npn, platformAgentId, any order; extra columns ignored; empty cell = absent).
    /// Rerunning the same file changes nothing.
    Import(ImportArgs),
}

/// `roster import` flags.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The CSV file (UTF-8)
    pub file: PathBuf,
    /// Registrations in flight at once
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// Validate and show the plan; send nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Write each row's outcome to this CSV file (created before anything is sent; a path that
    /// cannot be written is a usage error, exit 2)
    #[arg(long, value_name = "OUT.csv")]
    pub report: Option<PathBuf>,
}

impl RosterCommand {
    /// Runs the import.
    ///
    /// # Errors
    /// A file that cannot be imported, an authentication error, or any failed row (exit 1).
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        let Self::Import(args) = self;
        let plan = plan::read(&args.file).map_err(|e| CliError::Usage(e.to_string()))?;
        let report = args.report.as_deref().map(Report::create).transpose()?;
        for (row, reason) in &plan.invalid {
            ctx.out.note(&format!("line {}: {reason}", row.line));
        }
        let invalid: Vec<RowResult> = plan
            .invalid
            .iter()
            .map(|(row, reason)| {
                RowResult::new(row.clone(), Outcome::Invalid, Some(reason.clone()))
            })
            .collect();
        let mut results = if args.dry_run {
            ctx.out.note(&format!(
                "dry run: {} agencies to create or rename, {} agents to register; nothing sent",
                plan.agencies.len(),
                plan.valid.len()
            ));
            plan.valid
                .iter()
                .map(|row| RowResult::new(row.clone(), Outcome::WouldRegister, None))
                .collect()
        } else {
            let client = ctx.client()?;
            let bar = ctx.out.progress_bar(plan.valid.len() as u64, "registering");
            let done = run::execute(&client, plan, usize::from(args.jobs), &bar).await?;
            bar.finish_and_clear();
            done
        };
        results.extend(invalid);
        results.sort_by_key(|r| r.row.line);
        for r in results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Failed | Outcome::Conflict))
        {
            ctx.out.note(&format!(
                "line {}: {}: {}",
                r.row.line,
                r.outcome.as_str(),
                r.message.as_deref().unwrap_or("")
            ));
        }
        // The rows were sent: the summary is printed whatever happens to the report.
        let written = report.map(|report| report.write(&results));
        print_summary(ctx, &results)?;
        if let Some(path) = written.transpose()? {
            ctx.out
                .note(&format!("report written to {}", path.display()));
        }
        let failed = results.iter().filter(|r| r.outcome.is_failure()).count();
        if failed > 0 {
            return Err(
                CliError::Failed(format!("{failed} of {} row(s) failed", results.len())).into(),
            );
        }
        Ok(())
    }
}

const ORDER: [Outcome; 6] = [
    Outcome::Registered,
    Outcome::AlreadyRegistered,
    Outcome::WouldRegister,
    Outcome::Conflict,
    Outcome::Invalid,
    Outcome::Failed,
];

fn print_summary(ctx: &Ctx, results: &[RowResult]) -> anyhow::Result<()> {
    let count = |o: &Outcome| results.iter().filter(|r| &r.outcome == o).count();
    if ctx.out.json {
        let summary: serde_json::Map<String, serde_json::Value> = ORDER
            .iter()
            .map(|o| (o.as_str().to_owned(), json!(count(o))))
            .collect();
        let rows: Vec<_> = results
            .iter()
            .map(|r| json!({ "line": r.row.line, "outcome": r.outcome.as_str(), "agentId": r.agent_id, "agencyId": r.agency_id, "message": r.message }))
            .collect();
        return ctx
            .out
            .json_data(&json!({ "summary": summary, "rows": rows }));
    }
    let mut table = output::table(["outcome", "rows"]);
    for o in ORDER.iter().filter(|o| count(o) > 0) {
        table.add_row(vec![o.as_str().to_owned(), count(o).to_string()]);
    }
    table.add_row(vec!["total".to_owned(), results.len().to_string()]);
    ctx.out.table(&table)
}
