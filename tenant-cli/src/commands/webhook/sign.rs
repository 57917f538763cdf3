//! `svc-cli webhook sign`: sign a body as the service signs a delivery, so that tenants can
//! exercise their own receiver: prints the `X-Service-Signature` value, or with `--curl <url>`
//! a ready curl command that POSTs the body with both webhook headers.

use std::path::PathBuf;

use chrono::Utc;
use clap::Args;
use serde::Serialize;
use svc_contract::WebhookId;
use svc_contract::{CALL_SCORED, CallScored, SIGNATURE_HEADER, WEBHOOK_ID_HEADER};

use super::secret;
use crate::commands::Ctx;
use crate::exit::CliError;

/// Flags of `webhook sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// Read the signing secret (whsec_…) from this environment variable
    #[arg(
        long,
        value_name = "VAR",
        required_unless_present = "secret_file",
        conflicts_with = "secret_file"
    )]
    secret_env: Option<String>,
    /// Read the signing secret (whsec_…) from this file (surrounding whitespace ignored)
    #[arg(long, value_name = "PATH")]
    secret_file: Option<PathBuf>,
    /// The raw body to sign, byte for byte (sent as is by --curl)
    #[arg(long, value_name = "FILE")]
    body_file: PathBuf,
    /// Sign at this unix time, in seconds (default: now; receivers accept 5 minutes either way)
    #[arg(long = "t", value_name = "UNIX", value_parser = clap::value_parser!(i64).range(0..=999_999_999_999))]
    t: Option<i64>,
    /// Print a curl command that POSTs the signed body to this URL instead of the header alone:
    /// for testing your own receiver. Running it makes the receiver record a delivery of the
    /// body's callId, a call the service (or sandbox) never made unless the body came from one
    /// of its real deliveries
    #[arg(long, value_name = "URL")]
    curl: Option<String>,
    /// The X-Service-Webhook-Id the curl command sends (default: a new random wh_test_… id)
    #[arg(long, value_name = "ID")]
    webhook_id: Option<String>,
}

/// What `--json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Signed {
    signature: String,
    t: i64,
    webhook_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    curl: Option<String>,
}

/// Runs `webhook sign`.
///
/// # Errors
/// A missing or bad secret, an unreadable body file or a bad webhook id (all exit 2), stdout
/// closed.
pub fn exec(ctx: &Ctx, args: SignArgs) -> anyhow::Result<()> {
    let secret = match (&args.secret_env, &args.secret_file) {
        (Some(var), _) => secret::from_env(var)?,
        (None, Some(path)) => {
            let secret = secret::from_file(path)?;
            if let Some(warning) = secret::open_to_others(path) {
                ctx.out.note(&warning);
            }
            secret
        }
        (None, None) => {
            return Err(CliError::Usage("give --secret-env or --secret-file".into()).into());
        }
    };
    let body = std::fs::read(&args.body_file)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", args.body_file.display())))?;
    let webhook_id = match args.webhook_id {
        Some(id) => WebhookId::parse(id.as_bytes())
            .map_err(|e| CliError::Usage(format!("--webhook-id {id:?}: {e}")))?,
        None => WebhookId::parse(format!("wh_test_{:016x}", rand::random::<u64>()).as_bytes())?,
    };
    let t = args.t.unwrap_or_else(|| Utc::now().timestamp());
    let signature = secret.sign(t, &body);
    let call_id = call_scored(&body).map(|event| event.call_id);
    if call_id.is_none() {
        ctx.out.note(
            "note: the body is not a call.scored event; a receiver verifies its signature, then \
             refuses it (400)",
        );
    }
    let curl = args
        .curl
        .as_deref()
        .map(|url| curl_command(url, &signature, webhook_id.as_str(), &args.body_file));
    if ctx.out.json {
        return ctx.out.json_data(&Signed {
            signature,
            t,
            webhook_id: webhook_id.to_string(),
            curl,
        });
    }
    match curl {
        Some(command) => {
            ctx.out.line(&command)?;
            ctx.out.note(&format!(
                "signed at t={t}. The command tests your own receiver: run it within 5 minutes \
                 to POST the event as the service would; again with the same id, it is a \
                 duplicate (200, not processed twice)."
            ));
            if let Some(call_id) = call_id {
                ctx.out.note(&format!(
                    "Running it records a delivery of {call_id}: unless the body came from a \
                     real delivery, the service (or the sandbox) has no such call, so `webhook \
                     serve --fetch` cannot read it. Point it at a test store, not your \
                     production one."
                ));
            }
        }
        None => ctx.out.line(&signature)?,
    }
    Ok(())
}

/// The body as a `call.scored` event, if it is one.
fn call_scored(body: &[u8]) -> Option<CallScored> {
    serde_json::from_slice::<CallScored>(body)
        .ok()
        .filter(|event| event.event == CALL_SCORED)
}

/// A POSIX-shell command posting the body file with the webhook headers.
fn curl_command(
    url: &str,
    signature: &str,
    webhook_id: &str,
    body_file: &std::path::Path,
) -> String {
    let body = format!("@{}", body_file.display());
    format!(
        "curl -sS -i -X POST {} -H {} -H {} -H {} --data-binary {}",
        quote(url),
        quote("content-type: application/json"),
        quote(&format!("{SIGNATURE_HEADER}: {signature}")),
        quote(&format!("{WEBHOOK_ID_HEADER}: {webhook_id}")),
        quote(&body),
    )
}

/// `text` in single quotes, for a POSIX shell.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn a_single_quote_is_closed_escaped_and_reopened() {
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("$HOME `x`"), "'$HOME `x`'");
    }
}
