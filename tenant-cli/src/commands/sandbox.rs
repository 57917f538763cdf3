//! `svc-cli sandbox`: the compact service on loopback, for testing an integration against a
//! real v1 API that sends real signed webhooks and can inject faults ([`crate::sandbox`]).
//! Prints the `export` lines that point the integration at it, then serves until Ctrl-C; beside
//! it, on its own address, the rep console ([`crate::console`]).
//!
//! Its subcommands are the service operator's real-call steps on the sandbox's database,
//! running or stopped, for the sandbox's tenant (read from the credentials file beside the
//! database): switch an agency's real calls on or off, ingest dialer records, re-disposition a
//! call. They do what `svc-service agency …` and `svc-service calls …` do, without the second
//! binary or the tenant id. `sandbox deliveries` ([`deliveries`]) lists the webhook attempts
//! it made, or each webhook's fate, and waits until it has nothing left to send; `sandbox
//! trigger` ([`trigger`]) makes scored calls now and `sandbox resend` ([`resend`]) has the
//! running sandbox send webhooks again.

#[cfg(feature = "sandbox")]
mod deliveries;
#[cfg(feature = "sandbox")]
mod resend;
#[cfg(feature = "sandbox")]
mod trigger;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::Ctx;
use crate::exit::CliError;

/// `sandbox` flags.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SandboxArgs {
    /// An operator step on the sandbox's database instead of serving
    #[command(subcommand)]
    pub command: Option<SandboxCommand>,
    /// Address to serve the API on
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// The sandbox's database (created on first start, reused after: same tenant, same key)
    #[arg(long, value_name = "PATH", default_value = "svc-sandbox.db")]
    pub db: PathBuf,
    /// Roster CSV to import (as `roster import` does; rerunning it changes nothing)
    #[arg(long, value_name = "CSV")]
    pub roster: Option<PathBuf>,
    /// Faults to inject: key=value pairs, separated by commas or spaces, e.g.
    /// drop=0.2,duplicate=0.05,delay=30s,bad-signature=0.1,api-429=0.1,api-500=0.01,seed=7
    /// (`off` clears them; unset: as the last start left them). api-500 fails requests the
    /// CLI never retries too: `session mint`, `agents register` (not idempotent)
    #[arg(long, value_name = "SPEC", num_args = 1..)]
    pub faults: Option<Vec<String>>,
    /// Where the sandbox sends webhooks (http allowed; empty clears; unset: as the last start
    /// left it)
    #[arg(long, value_name = "URL")]
    pub webhook_url: Option<String>,
    /// Address of the rep console (`/console`): its own address, so the page's origin differs
    /// from the API's as a tenant's page would [default: 127.0.0.1:8788, or a free port when
    /// that one is taken]
    #[arg(long, value_name = "ADDR", conflicts_with = "no_console")]
    pub console_listen: Option<SocketAddr>,
    /// Let --console-listen be an address other machines reach (0.0.0.0, a LAN address):
    /// anyone who reaches it can start practice calls with session tokens the console mints
    /// with the sandbox's API key. Refused without this flag; warned about with it
    #[arg(long, requires = "console_listen")]
    pub console_allow_remote: bool,
    /// Serve no rep console
    #[arg(long)]
    pub no_console: bool,
    /// Seconds before a failed delivery's single retry (the real service waits 300)
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub retry_delay: u64,
}

/// The sandbox's database, for an operator step.
#[derive(Debug, Args)]
pub struct SandboxDb {
    /// The sandbox's database (running or stopped; made by `svc-cli sandbox`)
    #[arg(long, value_name = "PATH", default_value = "svc-sandbox.db")]
    pub db: PathBuf,
}

/// The operator's real-call steps, on the sandbox's tenant.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Switch an agency on for real calls (its dialer records are then ingested and scored)
    EnableRealCalls {
        #[command(flatten)]
        db: SandboxDb,
        /// Service agency id (svc_agency_…: the id `svc-cli agencies upsert` prints)
        #[arg(long, value_name = "ID")]
        agency_id: String,
        /// The agency dials through a third-party platform: its dialer's agent ids are never
        /// matched against platformAgentId
        #[arg(long)]
        third_party_dialer: bool,
        /// How the agency's calls are graded: the service's rubric, or the agency's own
        /// scorecard
        #[arg(long, value_parser = ["default", "own"], default_value = "default")]
        rubric: String,
    },
    /// Switch an agency off for real calls (later records are dropped: agency_not_enabled)
    DisableRealCalls {
        #[command(flatten)]
        db: SandboxDb,
        /// Service agency id (svc_agency_…)
        #[arg(long, value_name = "ID")]
        agency_id: String,
    },
    /// Ingest dialer records as real calls (a JSON array or JSON lines; `-` reads stdin): one
    /// result per record, then a summary; a running sandbox sends their webhooks. Exit 1 when
    /// a record was invalid, 75 when the disk is full (run the same file again later)
    IngestReal {
        #[command(flatten)]
        db: SandboxDb,
        /// The records. A record's recording must sit inside this file's directory: a relative
        /// path is read from there, and a path that leads elsewhere (an absolute path outside
        /// it, `..`, a symbolic link out) is dropped as recording_outside_dir
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// Move each record's startedAt into the last hours (file order, five minutes apart,
        /// the last 15 minutes ago), as `svc-cli demo` does: a past file such as
        /// fixtures/sandbox/dialer-records.jsonl then ingests as recent calls, inside
        /// reconcile's windows, however long after its dates it is run
        #[arg(long)]
        relative_to_now: bool,
    },
    /// List the webhook attempts the sandbox made for its tenant: call id, attempt, when, the
    /// answer or the error, the faults injected; with --by-webhook, one row
    /// per webhook with its fate (delivered by which attempt, lost for good, pending). Both
    /// open with the counts: "17 attempts of 12 webhooks: 7 delivered, 5 lost, 0 pending"
    /// (`--json`: one object with `attempts` or `webhooks`, `summary`, `idle` and what is
    /// `left`; every key in REFERENCE.md). With --wait-idle, first wait until nothing is left
    /// to send; exit 75 if something still is after --max-wait
    Deliveries {
        #[command(flatten)]
        db: SandboxDb,
        /// One row per webhook with its fate instead of one per attempt: delivered (by which
        /// attempt), lost (every attempt failed, no retry left: reconcile recovers the call),
        /// pending (an attempt still due)
        #[arg(long)]
        by_webhook: bool,
        /// First wait until the running sandbox has nothing left to send: every first attempt
        /// made (injected delays included), every retry made or given up, no call being scored
        #[arg(long)]
        wait_idle: bool,
        /// How long --wait-idle waits at most (90s, 5m, …)
        #[arg(long, value_name = "DUR", default_value = "60s", requires = "wait_idle",
            value_parser = svc_reconcile::time::parse_duration)]
        max_wait: std::time::Duration,
    },
    /// Send webhooks again now, as Stripe's `events resend` does: the running sandbox sends each
    /// once more (same webhook id and body, signed afresh; its faults only with --with-faults),
    /// as an attempt of its own that `sandbox deliveries` marks as a resend. Waits for the
    /// attempts and prints them. Exit 1 when one was not answered 2xx, or for an unknown id,
    /// no sandbox running or no webhook URL; 75 when not all were made within --max-wait
    Resend {
        #[command(flatten)]
        db: SandboxDb,
        /// The deliveries to resend (wh_… ids, as `sandbox deliveries` lists them)
        #[arg(value_name = "WEBHOOK_ID", required_unless_present = "failed")]
        webhook_ids: Vec<String>,
        /// Resend every delivery whose last attempt was not answered 2xx (dropped, refused,
        /// timed out)
        #[arg(long, conflicts_with = "webhook_ids")]
        failed: bool,
        /// Inject the sandbox's faults into the resends too (drop, bad-signature, duplicate)
        #[arg(long)]
        with_faults: bool,
        /// How long to wait for the running sandbox to make them (it sees a request within a
        /// fifth of a second, and makes it once one of its senders is free)
        #[arg(long, value_name = "DUR", default_value = "30s",
            value_parser = svc_reconcile::time::parse_duration)]
        max_wait: std::time::Duration,
    },
    /// Make scored calls now, as Stripe's `trigger` does: each a real call of the sandbox
    /// (GET /calls, reconcile and the report find it when scored) with its call.scored webhook
    /// queued for the running sandbox to send. Prints one call id per line
    Trigger {
        #[command(flatten)]
        db: SandboxDb,
        /// The kind of call
        #[arg(long, value_parser = ["roleplay", "real_call"], default_value = "roleplay")]
        source: String,
        /// Whether the call is scored (false: its webhook says success false,
        /// SCORING_INCOMPLETE, and the call is not listed)
        #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
        success: bool,
        /// Why the call is not scored, with --success false: the rep never spoke, or (roleplay
        /// only) the call never completed [default: rep-never-spoke]
        #[arg(long, value_name = "REASON", value_parser = ["rep-never-spoke", "never-completed"])]
        failure_reason: Option<String>,
        /// The rep: a service agent id, platformAgentId, email or NPN of the roster [default:
        /// the first rep registered]
        #[arg(long, value_name = "HANDLE")]
        agent: Option<String>,
        /// How many calls to make (1-100)
        #[arg(long, value_name = "N", default_value_t = 1,
            value_parser = clap::value_parser!(u32).range(1..=100))]
        count: u32,
    },
    /// Change a real call's disposition and score it again, as a dialer's correction does: no
    /// webhook is sent (reconcile's --refresh-real finds it)
    Redisposition {
        #[command(flatten)]
        db: SandboxDb,
        /// The real call (svc_call_…)
        #[arg(long, value_name = "ID")]
        call_id: String,
        /// The new disposition
        #[arg(long, value_parser = ["sale", "no_sale", "callback", "not_interested"])]
        disposition: String,
    },
}

impl SandboxCommand {
    #[cfg(feature = "sandbox")]
    fn db(&self) -> &std::path::Path {
        match self {
            Self::EnableRealCalls { db, .. }
            | Self::DisableRealCalls { db, .. }
            | Self::IngestReal { db, .. }
            | Self::Deliveries { db, .. }
            | Self::Resend { db, .. }
            | Self::Trigger { db, .. }
            | Self::Redisposition { db, .. } => &db.db,
        }
    }
}

impl SandboxArgs {
    /// Starts the sandbox and serves until Ctrl-C (or SIGTERM), or runs an operator step on
    /// its database.
    ///
    /// # Errors
    /// A bad fault spec or roster file (exit 2), an address in use or a database that cannot
    /// be opened (exit 1); for a step, no sandbox at `--db` (exit 2), or what the step fails
    /// with.
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        #[cfg(feature = "sandbox")]
        {
            match self.command {
                Some(command) => operate(command, ctx).await,
                None => {
                    check_console_address(&self, ctx)?;
                    run(self, ctx).await
                }
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

/// Refuses a console address beyond loopback unless `--console-allow-remote` says so, and
/// then warns: the console mints session tokens with the sandbox's key for whoever asks, and
/// its Host guard accepts any IP address as `Host`.
#[cfg(feature = "sandbox")]
fn check_console_address(args: &SandboxArgs, ctx: &Ctx) -> Result<(), CliError> {
    let Some(address) = args.console_listen.filter(|a| !a.ip().is_loopback()) else {
        return Ok(());
    };
    if !args.console_allow_remote {
        return Err(CliError::Usage(format!(
            "--console-listen {address} is not a loopback address: anyone who reaches it \
             could start practice calls with tokens minted with the sandbox's API key; use \
             127.0.0.1, or add --console-allow-remote to serve it there anyway"
        )));
    }
    ctx.out.note(&format!(
        "svc-cli: WARNING: the rep console listens on {address}, reachable from other \
         machines: anyone who reaches it can start practice calls with session tokens minted \
         with the sandbox's API key (--console-allow-remote)"
    ));
    Ok(())
}

/// Runs an operator step on the sandbox's database, for its tenant.
#[cfg(feature = "sandbox")]
async fn operate(command: SandboxCommand, ctx: &Ctx) -> anyhow::Result<()> {
    use svc_service::sandbox::{
        Disposition, OperatorStep, OperatorTarget, Reported, Rubric, Temporary, Usage,
    };

    let db = command.db().to_path_buf();
    if !db.is_file() {
        return Err(CliError::Usage(format!(
            "no sandbox database at {} (`svc-cli sandbox --db {}` creates one)",
            db.display(),
            db.display()
        ))
        .into());
    }
    let tenant = crate::sandbox::read_credentials(&db)
        .map_err(|e| CliError::Usage(format!("{e:#}")))?
        .tenant_id;
    let target = OperatorTarget {
        json: ctx.out.json,
        ..OperatorTarget::new(db.clone())
    };
    // The flags, as the service's typed step.
    let step = match command {
        SandboxCommand::EnableRealCalls {
            agency_id,
            third_party_dialer,
            rubric,
            ..
        } => OperatorStep::EnableRealCalls {
            tenant,
            agency_id,
            third_party_dialer,
            rubric: if rubric == "own" {
                Rubric::Own
            } else {
                Rubric::Default
            },
        },
        SandboxCommand::DisableRealCalls { agency_id, .. } => {
            OperatorStep::DisableRealCalls { tenant, agency_id }
        }
        SandboxCommand::IngestReal {
            file,
            relative_to_now,
            ..
        } => OperatorStep::IngestReal {
            tenant,
            file,
            relative_to_now,
        },
        SandboxCommand::Redisposition {
            call_id,
            disposition,
            ..
        } => OperatorStep::Redisposition {
            tenant,
            call_id,
            disposition: Disposition::parse(&disposition)
                .ok_or_else(|| CliError::Usage(format!("unknown disposition {disposition:?}")))?,
        },
        SandboxCommand::Deliveries {
            by_webhook,
            wait_idle,
            max_wait,
            ..
        } => {
            let wait = wait_idle.then_some(max_wait);
            return deliveries::exec(&db, &tenant, wait, by_webhook, ctx).await;
        }
        SandboxCommand::Resend {
            webhook_ids,
            failed,
            with_faults,
            max_wait,
            ..
        } => {
            let which = if failed {
                svc_service::sandbox::ResendWhich::Failed
            } else {
                svc_service::sandbox::ResendWhich::Ids(webhook_ids)
            };
            let request = resend::Request {
                which,
                with_faults,
                max_wait,
            };
            return resend::exec(&db, &tenant, request, ctx).await;
        }
        SandboxCommand::Trigger {
            source,
            success,
            failure_reason,
            agent,
            count,
            ..
        } => {
            let trigger = trigger_of(&source, success, failure_reason.as_deref(), agent, count)?;
            return trigger::exec(&db, &tenant, trigger, ctx).await;
        }
    };
    let done = svc_service::sandbox::operate(&target, step).await;
    done.map_err(|e| {
        if let Some(Usage(message)) = e.downcast_ref::<Usage>() {
            CliError::Usage(message.clone()).into()
        } else if let Some(Reported(code)) = e.downcast_ref::<Reported>() {
            CliError::Reported(*code).into()
        } else if let Some(Temporary(message)) = e.downcast_ref::<Temporary>() {
            CliError::Temporary(message.clone()).into()
        } else {
            e
        }
    })
}

/// `sandbox trigger`'s flags, as the service's typed request.
#[cfg(feature = "sandbox")]
fn trigger_of(
    source: &str,
    success: bool,
    failure_reason: Option<&str>,
    agent: Option<String>,
    count: u32,
) -> Result<svc_service::sandbox::Trigger, CliError> {
    use svc_service::sandbox::{NotScoredCause, Trigger, TriggerSource};

    let not_scored = match (success, failure_reason) {
        (true, None) => None,
        (true, Some(_)) => {
            return Err(CliError::Usage(
                "--failure-reason says why a call is not scored: add --success false".to_owned(),
            ));
        }
        (false, reason) => Some(
            NotScoredCause::parse(reason.unwrap_or("rep-never-spoke"))
                .ok_or_else(|| CliError::Usage(format!("unknown --failure-reason {reason:?}")))?,
        ),
    };
    if agent.as_deref().is_some_and(|a| a.trim().is_empty()) {
        return Err(CliError::Usage(
            "--agent is empty: give a service agent id, platformAgentId, email or NPN, or \
             leave it out for the first rep"
                .to_owned(),
        ));
    }
    Ok(Trigger {
        source: if source == "real_call" {
            TriggerSource::RealCall
        } else {
            TriggerSource::Roleplay
        },
        not_scored,
        agent,
        count,
    })
}

#[cfg(feature = "sandbox")]
async fn run(args: SandboxArgs, ctx: &Ctx) -> anyhow::Result<()> {
    use std::time::Duration;

    use anyhow::Context;

    use crate::sandbox::{Sandbox, SandboxOptions, credentials_path};
    use svc_service::sandbox::Faults;

    // Words after --faults are pairs of one spec: `--faults drop=0.2, seed=7` unquoted is
    // `drop=0.2,seed=7`, as pasted from a wrapped line.
    let spec = args.faults.as_ref().map(|words| words.join(","));
    let faults = match spec.as_deref().map(str::trim) {
        None => None,
        Some("off") => Some(Faults::default()),
        Some(spec) => {
            Some(Faults::parse_spec(spec).map_err(|e| CliError::Usage(format!("--faults: {e}")))?)
        }
    };
    let plan = args
        .roster
        .as_deref()
        .map(super::roster::plan::read)
        .transpose()
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let mut sandbox = Sandbox::start(SandboxOptions {
        listen: args.listen,
        faults,
        webhook_url: args.webhook_url.clone(),
        webhook_retry_delay: Duration::from_secs(args.retry_delay),
        ..SandboxOptions::new(&args.db)
    })
    .await?;
    if let Some(plan) = plan {
        let client = sandbox.client()?;
        let rows = plan.valid.len();
        let bar = ctx.out.progress_bar(rows as u64, "importing the roster");
        let results = super::roster::run::execute(&client, plan, 4, &bar)
            .await
            .map_err(|stopped| anyhow::anyhow!(stopped.cause))?;
        bar.finish_and_clear();
        let failed: Vec<String> = results
            .iter()
            .filter(|r| r.outcome.is_failure())
            .map(|r| {
                format!(
                    "line {}: {}",
                    r.row.line,
                    r.message.as_deref().unwrap_or(r.outcome.as_str())
                )
            })
            .collect();
        ctx.out.note(&format!(
            "roster: {} row(s) imported or already there, {} failed",
            results.len() - failed.len(),
            failed.len()
        ));
        for line in failed {
            ctx.out.note(&line);
        }
    }
    let console = if args.no_console {
        None
    } else {
        let backend = crate::console::ConsoleBackend::for_sandbox(&sandbox)?;
        Some(start_console(args.console_listen, backend, ctx).await?)
    };
    let console_url = console.as_ref().map(|c| c.url.clone());
    let stop = svc_server::shutdown_signal().context("installing the Ctrl-C handler")?;
    let credentials = &sandbox.credentials;
    if ctx.out.json {
        ctx.out.json_data(&serde_json::json!({
            "baseUrl": sandbox.base_url,
            "tenantId": credentials.tenant_id,
            "apiKey": credentials.api_key,
            "signingSecret": credentials.signing_secret,
            "db": args.db,
            "created": sandbox.created,
            "consoleUrl": console_url,
            "faults": sandbox.in_force.faults.spec(),
            "webhookUrl": sandbox.in_force.webhook_url,
        }))?;
    } else {
        ctx.out.line(sandbox.exports().trim_end())?;
    }
    ctx.out.note(&format!(
        "sandbox {} tenant {} at {} (credentials in {}); Ctrl-C stops it",
        if sandbox.created {
            "created"
        } else {
            "reopened"
        },
        credentials.tenant_id,
        sandbox.base_url,
        credentials_path(&args.db).display()
    ));
    for line in in_force_lines(&sandbox.in_force, &args) {
        ctx.out.note(&line);
    }
    if let Some(url) = &console_url {
        ctx.out.note(&format!(
            "rep console: {url} (a practice call in your browser, through the service's SDK)"
        ));
    }
    tokio::select! {
        () = stop => {}
        failed = sandbox.wait_failed() => return failed,
    }
    ctx.out.note("stopping the sandbox");
    if let Some(console) = console {
        console.stop().await?;
    }
    sandbox.stop().await
}

/// What every start says is in force (issue 44: a restart keeps the faults and webhook URL
/// of the last start, which the tenant may have forgotten): the faults and where webhooks go,
/// each marked when it carried over rather than came from this start's flags.
#[cfg(feature = "sandbox")]
fn in_force_lines(in_force: &svc_service::sandbox::InForce, args: &SandboxArgs) -> [String; 2] {
    let kept = |given: bool| {
        if given {
            ""
        } else {
            "kept from the last start; "
        }
    };
    let faults = if in_force.faults.is_off() {
        "faults: none (--faults drop=0.2,seed=7 sets some)".to_owned()
    } else {
        format!(
            "faults: {} ({}--faults off clears them)",
            in_force.faults.spec(),
            kept(args.faults.is_some())
        )
    };
    let url = match &in_force.webhook_url {
        Some(url) => format!(
            "webhooks go to {url} ({}--webhook-url '' stops them)",
            kept(args.webhook_url.is_some())
        ),
        None => "webhooks: no URL, so none is sent or queued (--webhook-url sets one)".to_owned(),
    };
    [faults, url]
}

/// Serves the console where asked; without `--console-listen`, on its default address, or a
/// free port beside it when that one is taken (another sandbox runs), so the sandbox starts.
#[cfg(feature = "sandbox")]
async fn start_console(
    chosen: Option<SocketAddr>,
    backend: crate::console::ConsoleBackend,
    ctx: &Ctx,
) -> anyhow::Result<crate::console::RunningConsole> {
    use crate::console::{DEFAULT_LISTEN, RunningConsole};

    if let Some(address) = chosen {
        return RunningConsole::start(address, backend).await;
    }
    match RunningConsole::start(DEFAULT_LISTEN, backend.clone()).await {
        Ok(console) => Ok(console),
        Err(error) => {
            ctx.out.note(&format!(
                "{error:#}; the console takes a free port instead (--console-listen chooses)"
            ));
            RunningConsole::start(SocketAddr::new(DEFAULT_LISTEN.ip(), 0), backend).await
        }
    }
}
