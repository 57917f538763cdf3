//! `svc-cli sandbox resend`: asks the running sandbox to send webhooks again now (same webhook
//! id and body, signed afresh, the sandbox's faults only with `--with-faults`), through its
//! database ([`svc_service::sandbox::SandboxDb::request_resends`]: the sandbox's outbox worker
//! picks the requests up), then waits for their attempts and prints them, in the keys of
//! `sandbox deliveries`.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use svc_reconcile::time::format_duration;
use svc_service::sandbox::{ResendError, ResendTicket, ResendWhich, SandboxDb};

use super::deliveries::Attempt;
use crate::commands::Ctx;
use crate::exit::CliError;
use crate::output;

/// How often the requests are looked at while waiting.
const POLL: Duration = Duration::from_millis(100);

/// What to resend and how.
pub(super) struct Request {
    pub which: ResendWhich,
    pub with_faults: bool,
    pub max_wait: Duration,
}

/// The outcome (`--json`'s object).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Resent {
    /// The attempts made, in the order asked.
    attempts: Vec<Attempt>,
    /// The webhook ids whose resend was not made within --max-wait.
    not_made: Vec<String>,
}

/// Resends for `tenant` of the sandbox at `db`, waits at most `max_wait` for the attempts, and
/// prints them.
///
/// # Errors
/// No sandbox running, an unknown webhook id or no webhook URL (exit 1, nothing asked for); a
/// resend not answered 2xx (exit 1, after the listing); resends not made within `max_wait`
/// (exit 75, after the listing: the sandbox still makes them).
pub(super) async fn exec(
    db: &Path,
    tenant: &str,
    request: Request,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    if !crate::sandbox::is_running(db)? {
        return Err(CliError::Failed(format!(
            "no sandbox is running on {}: the running sandbox sends the resends (start it with \
             `svc-cli sandbox --db {}` in another terminal, then resend)",
            db.display(),
            db.display()
        ))
        .into());
    }
    let sandbox = SandboxDb::open(db).await?;
    let tickets = sandbox
        .request_resends(tenant, request.which, request.with_faults)
        .await
        .map_err(|error| match error {
            ResendError::Db(error) => anyhow::Error::new(error),
            refused => CliError::Failed(refused.to_string()).into(),
        })?;
    if tickets.is_empty() {
        ctx.out
            .note("nothing to resend: every webhook's last attempt was answered 2xx");
    }
    let wanted: Vec<ResendTicket> = tickets.iter().map(|(_, ticket)| *ticket).collect();
    let deadline = tokio::time::Instant::now() + request.max_wait;
    let resends = loop {
        let resends = sandbox.resends(&wanted).await?;
        let made = resends.iter().all(|r| r.attempt.is_some());
        if made || tokio::time::Instant::now() >= deadline {
            break resends;
        }
        tokio::time::sleep(POLL.min(deadline - tokio::time::Instant::now())).await;
    };
    let failed = resends
        .iter()
        .filter_map(|r| r.attempt.as_ref())
        .filter(|a| !a.succeeded())
        .count();
    let mut resent = Resent {
        attempts: Vec::new(),
        not_made: Vec::new(),
    };
    for resend in resends {
        match resend.attempt {
            Some(attempt) => resent.attempts.push(Attempt::from(attempt)),
            None => resent.not_made.push(resend.webhook_id),
        }
    }
    print(&resent, failed, ctx)?;
    if !resent.not_made.is_empty() {
        return Err(CliError::Temporary(format!(
            "{} resend(s) not made after {} (the sandbox makes them when it can; \
             `svc-cli sandbox deliveries` lists them then)",
            resent.not_made.len(),
            format_duration(request.max_wait)
        ))
        .into());
    }
    if failed > 0 {
        return Err(CliError::Reported(crate::exit::FAILURE).into());
    }
    Ok(())
}

fn print(resent: &Resent, failed: usize, ctx: &Ctx) -> anyhow::Result<()> {
    if ctx.out.json {
        return ctx.out.json_data(resent);
    }
    if resent.attempts.is_empty() {
        return Ok(());
    }
    ctx.out.note(&format!(
        "resent {} webhook(s): {} answered 2xx, {failed} not",
        resent.attempts.len(),
        resent.attempts.len() - failed
    ));
    let mut table = output::table(["webhook id", "call id", "attempt", "answer", "faults"]);
    for attempt in &resent.attempts {
        table.add_row(vec![
            attempt.webhook_id.clone(),
            attempt.call_id.clone(),
            attempt.attempt_label(),
            attempt.answer(),
            attempt.faults_label(),
        ]);
    }
    ctx.out.table(&table)
}
