//! `svc-cli sandbox trigger`: makes scored calls now for a rep of the sandbox's roster, each
//! with its `call.scored` webhook queued for the running sandbox to send
//! ([`svc_service::sandbox::SandboxDb::trigger`]), and prints their ids.

use std::path::Path;

use serde::Serialize;
use svc_service::sandbox::{SandboxDb, Trigger, TriggerError, TriggerSource, Triggered};

use crate::commands::Ctx;
use crate::exit::CliError;

/// One call as printed (`--json`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Call {
    call_id: String,
    source: &'static str,
    /// Whether it was scored (`GET /calls` lists it); else its webhook says `success: false`.
    scored: bool,
    /// Whether its webhook was queued (the sandbox has a webhook URL).
    webhook_queued: bool,
}

fn source_name(source: TriggerSource) -> &'static str {
    match source {
        TriggerSource::Roleplay => "roleplay",
        TriggerSource::RealCall => "real_call",
    }
}

impl From<Triggered> for Call {
    fn from(call: Triggered) -> Self {
        Self {
            call_id: call.call_id,
            source: source_name(call.source),
            scored: call.scored,
            webhook_queued: call.webhook_queued,
        }
    }
}

/// The listing (`--json`'s object).
#[derive(Debug, Serialize)]
struct Calls {
    calls: Vec<Call>,
}

/// Makes the calls of `trigger` for `tenant` of the sandbox at `db`; prints one call id per
/// line (`--json`: `{"calls": [...]}`), and on stderr what became of their webhooks.
///
/// # Errors
/// An unknown rep or a cause the source cannot have (exit 2), an empty roster (exit 1), a
/// database failure.
pub(super) async fn exec(
    db: &Path,
    tenant: &str,
    trigger: Trigger,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    let sandbox = SandboxDb::open(db).await?;
    let made = sandbox
        .trigger(tenant, &trigger)
        .await
        .map_err(|error| -> anyhow::Error {
            match error {
                TriggerError::Db(error) => error.into(),
                TriggerError::NoRep | TriggerError::AgencyGone(_) => {
                    CliError::Failed(error.to_string()).into()
                }
                usage => CliError::Usage(usage.to_string()).into(),
            }
        })?;
    let calls = Calls {
        calls: made.into_iter().map(Call::from).collect(),
    };
    if ctx.out.json {
        ctx.out.json_data(&calls)?;
    } else {
        for call in &calls.calls {
            ctx.out.line(&call.call_id)?;
        }
    }
    let scored = calls.calls.iter().filter(|c| c.scored).count();
    let queued = calls.calls.iter().filter(|c| c.webhook_queued).count();
    let running = crate::sandbox::is_running(db).unwrap_or(false);
    ctx.out.note(&format!(
        "triggered {} {} call(s): {scored} scored, {} not scored; {}",
        calls.calls.len(),
        source_name(trigger.source),
        calls.calls.len() - scored,
        match (queued, running) {
            (0, _) =>
                "no webhook queued: the sandbox has no webhook URL (--webhook-url)".to_owned(),
            (n, true) => format!("{n} webhook(s) queued, sent by the running sandbox"),
            (n, false) => format!(
                "{n} webhook(s) queued; no sandbox is running on {}: they are sent when it runs",
                db.display()
            ),
        }
    ));
    Ok(())
}
