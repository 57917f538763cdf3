//! `svc-cli webhook verify`: check a captured delivery (signature header + raw body) the way a
//! receiver would, and print the decoded event. Ops use it to debug deliveries.
//!
//! Exit codes: 0 valid (event as pretty JSON on stdout), 1 invalid or unreadable (one line on
//! stderr saying why), 2 usage error (including a secret not of the `whsec_…` form).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use svc_contract::{Clock, Keyring, SigningSecret, SystemClock, Tolerance, Verifier};

use crate::output::{stderr_line, stdout_line};

/// Flags of `webhook verify`.
#[derive(Args)]
pub struct VerifyArgs {
    /// The endpoint's signing secret (`whsec_…`), as issued. Prefer SVC_SIGNING_SECRET: a value
    /// on the command line shows in `ps` and the shell's history
    #[arg(long, env = "SVC_SIGNING_SECRET", hide_env_values = true)]
    secret: String,
    /// The X-Service-Signature header value, e.g. 't=1767225600,v1=<64 hex>'.
    #[arg(long, allow_hyphen_values = true)]
    signature: String,
    /// A file holding the raw request body, byte for byte.
    #[arg(long)]
    body_file: PathBuf,
    /// Verify as if now were this unix time (seconds); default: the system clock.
    #[arg(long, allow_negative_numbers = true)]
    now: Option<i64>,
    /// Timestamp tolerance in seconds (default 300; 0 is a zero-second window, not "off").
    #[arg(long, conflicts_with = "no_tolerance")]
    tolerance: Option<u64>,
    /// Skip the timestamp check entirely (to inspect an old capture).
    #[arg(long)]
    no_tolerance: bool,
}

impl std::fmt::Debug for VerifyArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyArgs")
            .field("secret", &"[redacted]")
            .field("signature", &self.signature)
            .field("body_file", &self.body_file)
            .field("now", &self.now)
            .field("tolerance", &self.tolerance)
            .field("no_tolerance", &self.no_tolerance)
            .finish()
    }
}

/// Runs `webhook verify`: exit 0 and the event on stdout when valid, 1 with a one-line reason
/// on stderr when not, 2 when the secret is not of the `whsec_…` form.
pub fn exec(args: VerifyArgs) -> u8 {
    let secret = match SigningSecret::new(&args.secret) {
        Ok(secret) => secret,
        Err(err) => {
            stderr_line(&format!("svc-cli: invalid --secret: {err}"));
            return 2;
        }
    };
    let tolerance = if args.no_tolerance {
        Tolerance::Disabled
    } else {
        args.tolerance.map_or_else(Tolerance::default, |secs| {
            Tolerance::Window(Duration::from_secs(secs))
        })
    };
    let body = match std::fs::read(&args.body_file) {
        Ok(body) => body,
        Err(err) => {
            stderr_line(&format!(
                "svc-cli: cannot read {}: {err}",
                args.body_file.display()
            ));
            return 1;
        }
    };
    let verifier = Verifier::new(Keyring::single(secret))
        .with_tolerance(tolerance)
        .with_max_body_bytes(usize::MAX);
    let now = args.now.unwrap_or_else(|| SystemClock.now());
    let delivery = match verifier.verify(args.signature.as_bytes(), &body, now) {
        Ok(delivery) => delivery,
        Err(err) => {
            let advice = match err {
                svc_contract::VerifyError::TimestampTooOld { .. }
                | svc_contract::VerifyError::TimestampInFuture { .. } => {
                    " (for an old capture, pass --now <its unix time> or --no-tolerance)"
                }
                _ => "",
            };
            stderr_line(&format!("svc-cli: invalid delivery: {err}{advice}"));
            return 1;
        }
    };
    let event = match delivery.decode() {
        Ok(event) => event,
        Err(err) => {
            stderr_line(&format!("svc-cli: signature valid but {err}"));
            return 1;
        }
    };
    match serde_json::to_string_pretty(&event) {
        Ok(json) => {
            if let Err(err) = stdout_line(&json) {
                stderr_line(&format!("svc-cli: cannot print the event: {err}"));
                return 1;
            }
            stderr_line(&format!(
                "signature valid (t={}, matched key '{}')",
                delivery.timestamp(),
                delivery.key()
            ));
            0
        }
        Err(err) => {
            stderr_line(&format!("svc-cli: cannot print the event: {err}"));
            1
        }
    }
}
