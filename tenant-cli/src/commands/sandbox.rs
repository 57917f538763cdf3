//! `svc-cli sandbox`: the compact service on loopback, for testing an integration against a
//! real v1 API that sends real signed webhooks and can inject faults ([`crate::sandbox`]).
//! Prints the `export` lines that point the integration at it, then serves until Ctrl-C; beside
//! it, on its own address, the rep console ([`crate::console`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::Ctx;
use crate::exit::CliError;

/// `sandbox` flags.
#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// Address to serve the API on
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// The sandbox's database (created on first start, reused after: same tenant, same key)
    #[arg(long, value_name = "PATH", default_value = "svc-sandbox.db")]
    pub db: PathBuf,
    /// Roster CSV to import (as `roster import` does; rerunning it changes nothing)
    #[arg(long, value_name = "CSV")]
    pub roster: Option<PathBuf>,
    /// Faults to inject, e.g. drop=0.2,duplicate=0.05,delay=30s,bad-signature=0.1,api-429=0.1,
    /// api-500=0.01,seed=7 (`off` clears them; unset: as the last start left them)
    #[arg(long, value_name = "SPEC")]
    pub faults: Option<String>,
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

impl SandboxArgs {
    /// Starts the sandbox and serves until Ctrl-C (or SIGTERM).
    ///
    /// # Errors
    /// A bad fault spec or roster file (exit 2), an address in use or a database that cannot
    /// be opened (exit 1).
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        #[cfg(feature = "sandbox")]
        {
            check_console_address(&self, ctx)?;
            run(self, ctx).await
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

#[cfg(feature = "sandbox")]
async fn run(args: SandboxArgs, ctx: &Ctx) -> anyhow::Result<()> {
    use std::time::Duration;

    use anyhow::Context;

    use crate::sandbox::{Sandbox, SandboxOptions, credentials_path};
    use svc_service::faults::Faults;

    let faults = match args.faults.as_deref().map(str::trim) {
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
        webhook_url: args.webhook_url,
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
    let stop = svc_ops::shutdown::signal().context("installing the Ctrl-C handler")?;
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
