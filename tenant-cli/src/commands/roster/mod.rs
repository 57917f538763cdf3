//! `svc-cli roster import <file.csv>`: the onboarding path for a tenant with thousands of reps.
//! The file is read and validated first ([`plan`]); then agencies and agents are sent ([`run`]);
//! each row's outcome goes to the summary, the optional `--report` CSV and the exit code.

mod existing;
mod lines;
mod outcome_csv;
pub mod plan;
mod refusal;
pub mod run;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use super::Ctx;
use crate::exit::CliError;
use crate::output;
use outcome_csv::OutcomeCsv;
use run::{Outcome, RowResult};
use svc_client::{Client, ClientError};

/// Roster commands.
#[derive(Debug, Subcommand)]
pub enum RosterCommand {
    /// Import agents from a CSV file (header: platformAgencyId, agencyName, firstName, lastName,
    /// email, npn, platformAgentId, any order; extra columns and cells past the header ignored;
    /// empty cell = absent).
    /// Rerunning the same file changes nothing.
    #[command(after_help = IMPORT_EXIT_CODES)]
    Import(ImportArgs),
}

/// The exit codes of `roster import`, shown after its `--help` (and in `REFERENCE.md`).
const IMPORT_EXIT_CODES: &str = "\
Exit codes:
  0   every row registered or already registered (--dry-run: every row valid)
  1   a row is invalid, in conflict or failed (not all for a temporary reason), or the report
      could not be written after the rows were sent
  2   the file cannot be imported, or the --report file cannot be created; nothing is sent
  4   the API key was refused (401/403); nothing more is sent, the rest of the rows are not_sent
  75  every failed row failed for a temporary reason (429, 5xx, timeout, connection error):
      rerun the same file later";

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
    /// A file that cannot be imported or a report that cannot be created (exit 2), a refused key
    /// (exit 4), rows that failed only for a temporary reason (exit 75), any other failed row
    /// (exit 1).
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        let Self::Import(args) = self;
        let plan = plan::read(&args.file).map_err(|e| CliError::Usage(e.to_string()))?;
        // Settings first: a missing key must not truncate the report of an earlier run.
        let client = (!args.dry_run).then(|| ctx.client()).transpose()?;
        let report = args.report.as_deref().map(OutcomeCsv::create).transpose()?;
        let mut invalid = Vec::with_capacity(plan.invalid.len());
        for (row, reason) in &plan.invalid {
            ctx.out.note(&format!("line {}: {reason}", row.line));
            invalid.push(RowResult::new(
                row.clone(),
                Outcome::Invalid,
                Some(reason.clone()),
            ));
        }
        let (mut results, refused) = match &client {
            None => (dry_run(ctx, &plan), None),
            Some(client) => send(ctx, client, plan, args.jobs).await,
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
        let written = report.map(|report| report.write(&results)).transpose();
        print_summary(ctx, &results)?;
        match written {
            Ok(Some(path)) => ctx
                .out
                .note(&format!("report written to {}", path.display())),
            Ok(None) => {}
            // A refused key decides the exit code; the report's failure is still said.
            Err(e) if refused.is_some() => ctx.out.note(&e.to_string()),
            Err(e) => return Err(e.into()),
        }
        if let Some(cause) = refused {
            let not_sent = count(&results, &Outcome::NotSent);
            return Err(anyhow::Error::new(cause).context(format!(
                "the import stopped when the API key was refused; {not_sent} row(s) not sent"
            )));
        }
        rows_verdict(&results)
    }
}

/// `--dry-run`: every valid row would be registered; nothing is sent.
fn dry_run(ctx: &Ctx, plan: &plan::Plan) -> Vec<RowResult> {
    ctx.out.note(&format!(
        "dry run: {} agencies to create or rename, {} agents to register; nothing sent",
        plan.agencies.len(),
        plan.valid.len()
    ));
    plan.valid
        .iter()
        .map(|row| RowResult::new(row.clone(), Outcome::WouldRegister, None))
        .collect()
}

/// Sends the plan: every valid row's result, and the refusal that stopped the import, if any.
async fn send(
    ctx: &Ctx,
    client: &Client,
    plan: plan::Plan,
    jobs: u16,
) -> (Vec<RowResult>, Option<ClientError>) {
    let bar = ctx.out.progress_bar(plan.valid.len() as u64, "registering");
    let done = run::execute(client, plan, usize::from(jobs), &bar).await;
    bar.finish_and_clear();
    match done {
        Ok(results) => (results, None),
        Err(stopped) => (stopped.results, Some(stopped.cause)),
    }
}

/// The exit for the rows once nothing stopped the import: 0 when none failed, 75 when every
/// failed row failed for a temporary reason (a rerun later can succeed), else 1.
fn rows_verdict(results: &[RowResult]) -> anyhow::Result<()> {
    let failed: Vec<&RowResult> = results.iter().filter(|r| r.outcome.is_failure()).collect();
    if failed.is_empty() {
        return Ok(());
    }
    let message = format!("{} of {} row(s) failed", failed.len(), results.len());
    if failed.iter().all(|r| r.failed_temporarily()) {
        return Err(CliError::Temporary(format!(
            "{message}, all for a temporary reason (429, 5xx, timeout or connection error); \
             rerun the same file later"
        ))
        .into());
    }
    Err(CliError::Failed(message).into())
}

/// How many rows have this outcome.
fn count(results: &[RowResult], outcome: &Outcome) -> usize {
    results.iter().filter(|r| &r.outcome == outcome).count()
}

const ORDER: [Outcome; 7] = [
    Outcome::Registered,
    Outcome::AlreadyRegistered,
    Outcome::WouldRegister,
    Outcome::Conflict,
    Outcome::Invalid,
    Outcome::Failed,
    Outcome::NotSent,
];

fn print_summary(ctx: &Ctx, results: &[RowResult]) -> anyhow::Result<()> {
    let count = |o: &Outcome| count(results, o);
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
