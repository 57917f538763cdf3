//! `svc-cli practice`: a headless practice call, as the browser SDK would run it: redeem the
//! token (`POST /roleplay/session`), then talk over the live transport ([`svc_client::live`]) and print
//! `{ callId, durationSec, persona: { name } }` from the `ended` frame.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args};

use super::Ctx;
use crate::exit::CliError;
use crate::output;
use svc_client::{PersonaFilters, RedeemRequest};

/// Redeem errors raised before the token is consumed (contract section 7, "Token spending on
/// redeem"); after any other answer the token is spent.
const TOKEN_KEPT: [&str; 3] = ["INVALID_TOKEN", "TOKEN_EXPIRED", "INVALID_REQUEST"];

/// What to do once the single-use token is spent.
const MINT_AGAIN: &str = "mint a new one with `svc-cli session mint` and run again";

/// A failure after the token was consumed: running the same command again cannot succeed (the
/// service answers `TOKEN_ALREADY_USED`), so it exits 1 with what to do, not 75 ("retry").
fn token_spent(err: impl std::fmt::Display) -> anyhow::Error {
    CliError::Failed(format!(
        "{err}; the session token is now spent: {MINT_AGAIN}"
    ))
    .into()
}

/// `practice` flags.
#[derive(Args)]
#[command(group(ArgGroup::new("talk").required(true).args(["script", "silent"])))]
pub struct PracticeArgs {
    /// Session token from `session mint` (single use)
    #[arg(long, env = "SVC_SESSION_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Drill to practise
    #[arg(long, default_value = "ma-full-sale")]
    pub drill: String,
    /// Persona difficulty
    #[arg(long, value_parser = ["Beginner", "Advanced", "Elite"])]
    pub difficulty: Option<String>,
    /// Persona state filter (US state code)
    #[arg(long)]
    pub state: Option<String>,
    /// File with the rep's lines, one per line (blank lines skipped)
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Connect and end without speaking
    #[arg(long)]
    pub silent: bool,
    /// Seconds to wait for each frame from the service
    #[arg(long, default_value_t = 30)]
    pub reply_timeout: u64,
}

impl std::fmt::Debug for PracticeArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PracticeArgs")
            .field("token", &"[redacted]")
            .field("drill", &self.drill)
            .field("difficulty", &self.difficulty)
            .field("state", &self.state)
            .field("script", &self.script)
            .field("silent", &self.silent)
            .finish_non_exhaustive()
    }
}

impl PracticeArgs {
    /// Runs the call.
    ///
    /// # Errors
    /// Redeem errors (`INVALID_TOKEN`, `TOKEN_EXPIRED`, `TOKEN_ALREADY_USED`, `DRILL_NOT_FOUND`,
    /// `SERVICE_UNAVAILABLE`, …) and live transport errors, with their contract codes. A
    /// failure that left the token spent (any redeem error but the three raised before
    /// redemption, and every live transport error) is a plain failure (exit 1) that says to
    /// mint a new token, since the same command cannot succeed again.
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        // An empty token (an unset variable expanded, `--token ""`) would only come back
        // INVALID_TOKEN from the service.
        if self.token.trim().is_empty() {
            return Err(CliError::Usage(
                "--token is empty (SVC_SESSION_TOKEN, if set, is empty too): pass the token \
                 `svc-cli session mint` prints (its `token` key with --json)"
                    .to_owned(),
            )
            .into());
        }
        let script = match &self.script {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    CliError::Usage(format!("cannot read script {}: {e}", path.display()))
                })?;
                text.lines().map(str::to_owned).collect()
            }
            None => Vec::new(),
        };
        let client = ctx.client_without_key()?;
        let request = RedeemRequest {
            drill_key: self.drill,
            difficulty: self.difficulty,
            filters: self
                .state
                .map(|state| PersonaFilters { state: Some(state) }),
        };
        let session = client.redeem(&self.token, &request).await.map_err(|err| {
            match err.api().map(|api| api.code.as_str()) {
                Some("TOKEN_ALREADY_USED") => anyhow::Error::new(err)
                    .context(format!("the session token was already used: {MINT_AGAIN}")),
                Some(code) if !TOKEN_KEPT.contains(&code) => token_spent(err),
                _ => err.into(),
            }
        })?;
        ctx.out.note(&format!(
            "call {} with {}",
            session.call_id, session.persona.name
        ));
        let options = svc_client::live::LiveOptions {
            reply_timeout: Duration::from_secs(self.reply_timeout),
            allow_insecure: ctx.global.insecure_http,
        };
        let finished = svc_client::live::run_call_with(&session, &script, &options)
            .await
            .map_err(|e| match e.code.as_str() {
                // The flag that allows it, where the library names its own option.
                "INSECURE_TRANSPORT" => token_spent(format!(
                    "{}: {} (pass --insecure-http to allow it)",
                    e.code,
                    e.message.split("; allow it").next().unwrap_or(&e.message)
                )),
                _ => token_spent(e),
            })?;
        if ctx.out.json {
            return ctx.out.json_data(&finished);
        }
        for line in &finished.persona_lines {
            ctx.out.note(&format!("{}: {line}", finished.persona.name));
        }
        ctx.out.table(&output::pairs([
            ("callId", finished.call_id.to_string()),
            ("durationSec", finished.duration_sec.to_string()),
            ("persona", finished.persona.name.clone()),
        ]))
    }
}
