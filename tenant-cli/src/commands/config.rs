//! `svc-cli config set|show`: write a profile of the config file (mode 0600 when it holds a key;
//! the key is read from stdin, never from a flag) and show where each setting resolves from
//! (never the key itself).

use std::io::Read;

use clap::{Args, Subcommand};
use serde_json::json;

use super::Ctx;
use crate::config::{ConfigError, ConfigFile};
use crate::exit::CliError;
use crate::output;

/// Config commands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Store --base-url and/or the API key (--api-key-stdin) in a profile (--profile, default "default")
    Set(SetArgs),
    /// Show the resolved base URL, whether a key is set, and where each comes from
    Show,
}

/// `config set` flags. The base URL comes from the global `--base-url`, the key from
/// `--api-key-stdin` (preferred) or the global `--api-key`.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// Read the API key to store from stdin (first line)
    #[arg(long)]
    pub api_key_stdin: bool,
}

impl ConfigCommand {
    /// Runs the command.
    ///
    /// # Errors
    /// Config file errors; a bad URL or empty key is a usage error.
    pub async fn exec(self, ctx: &Ctx) -> anyhow::Result<()> {
        match self {
            Self::Set(args) => set(ctx, args),
            Self::Show => show(ctx),
        }
    }
}

fn set(ctx: &Ctx, args: SetArgs) -> anyhow::Result<()> {
    let url = ctx.global.base_url.clone();
    let flag_key = ctx.global.api_key.clone();
    if url.is_none() && flag_key.is_none() && !args.api_key_stdin {
        return Err(CliError::Usage(
            "nothing to set: give --base-url and/or --api-key-stdin".into(),
        )
        .into());
    }
    let inputs = ctx.inputs();
    // A file named with --config or SVC_CONFIG may not exist yet: setting a profile creates it.
    let location = inputs.config_path().ok_or(ConfigError::NoConfigPath)?;
    let path = location.path();
    let mut file = ConfigFile::load(path)?;
    let profile = file.profiles.entry(inputs.profile()).or_default();
    if let Some(url) = url {
        // Validate now rather than at the next command.
        svc_client::Client::builder(url.clone())
            .allow_insecure_http(ctx.global.insecure_http)
            .build()?;
        profile.base_url = Some(url);
    }
    if args.api_key_stdin {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        let key = text.lines().next().unwrap_or_default().trim().to_owned();
        if key.is_empty() {
            return Err(CliError::Usage("no API key on stdin".into()).into());
        }
        profile.api_key = Some(key);
    } else if let Some(key) = flag_key {
        profile.api_key = Some(key.trim().to_owned());
    }
    file.save(path)?;
    ctx.out.note(&format!(
        "profile {:?} saved to {}",
        inputs.profile(),
        path.display()
    ));
    Ok(())
}

fn show(ctx: &Ctx) -> anyhow::Result<()> {
    let settings = ctx.settings()?;
    let base_url = settings.base_url.as_ref().map(|(u, _)| u.clone());
    let base_source = settings.base_url.as_ref().map(|(_, s)| s.to_string());
    let key_source = settings.api_key.as_ref().map(|(_, s)| s.to_string());
    let path = settings
        .config_path
        .as_ref()
        .map(|p| p.display().to_string());
    if ctx.out.json {
        return ctx.out.json_data(&json!({
            "profile": settings.profile,
            "configFile": path,
            "baseUrl": base_url,
            "baseUrlSource": base_source,
            "apiKeySet": settings.api_key.is_some(),
            "apiKeySource": key_source,
        }));
    }
    ctx.out.table(&output::pairs([
        ("profile", settings.profile.clone()),
        ("config file", output::opt(path.as_deref())),
        ("base URL", output::opt(base_url.as_deref())),
        ("base URL from", output::opt(base_source.as_deref())),
        (
            "API key",
            if settings.api_key.is_some() {
                "[set]".into()
            } else {
                "[not set]".into()
            },
        ),
        ("API key from", output::opt(key_source.as_deref())),
    ]))
}
