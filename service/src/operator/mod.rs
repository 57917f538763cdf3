//! The operator's commands (what the contract calls "out of band"): `tenant …` here (create
//! tenants, issue and revoke API keys, (de)activate, webhook URL, signing secret, IP
//! allowlist and monthly allowance), [`agency`] (real calls on or off) and [`calls`] (ingest
//! dialer records, re-disposition, the audio sweep). They write the same database a server
//! reads at each request. Data goes to stdout (`--json` for machines), messages to stderr; a
//! closed stdout (`| head`) ends the output quietly.

pub mod agency;
pub mod calls;
pub(crate) mod step;
pub(crate) mod target;

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use ipnet::IpNet;
use serde_json::{Value, json};

use crate::config::DEFAULT_DB;
use crate::credentials::{ApiKey, SigningSecret};
use crate::db::{Db, NewTenant, TenantChange, TenantRecord};
use crate::ids;
use crate::time::format_millis;

/// `svc-service tenant …`.
#[derive(Debug, Args)]
pub struct TenantArgs {
    /// SQLite database file of the service.
    #[arg(long, env = "SVC_DB", default_value = DEFAULT_DB, global = true)]
    pub db: PathBuf,
    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// The operator command.
    #[command(subcommand)]
    pub command: TenantCommand,
}

/// The operator commands.
#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create a tenant; prints its id, API key and signing secret (shown this once).
    Create {
        /// Display name.
        #[arg(long)]
        name: String,
        /// Webhook URL (HTTPS).
        #[arg(long)]
        webhook_url: Option<String>,
        /// Allow an address or CIDR range (repeat for several); none allows any address.
        #[arg(long = "allow-ip", value_name = "CIDR")]
        allow_ip: Vec<String>,
        /// Monthly usage allowance in minutes (default: unlimited).
        #[arg(long)]
        monthly_allowance_minutes: Option<u32>,
        /// Accept a plain-HTTP webhook URL (local testing only; the server must also run
        /// with --allow-http-webhooks to deliver to it).
        #[arg(long)]
        allow_http_webhooks: bool,
        /// Faults to inject from the start (see `tenant set-faults`).
        #[command(flatten)]
        faults: FaultArgs,
    },
    /// List tenants (never their keys or secrets).
    List,
    /// Revoke every API key of a tenant (requests with them get API_KEY_REVOKED).
    RevokeKey {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
    },
    /// Issue an additional API key for a tenant; prints it (shown this once).
    IssueKey {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
    },
    /// Deactivate a tenant (requests get TENANT_INACTIVE).
    Deactivate {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
    },
    /// Reactivate a tenant.
    Activate {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
    },
    /// Set (--url) or clear (--clear) the tenant's webhook URL.
    SetWebhook {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Webhook URL (HTTPS).
        #[arg(long, required_unless_present = "clear", conflicts_with = "clear")]
        url: Option<String>,
        /// Remove the webhook URL (nothing is sent or queued without one).
        #[arg(long)]
        clear: bool,
        /// Accept a plain-HTTP URL (local testing only).
        #[arg(long)]
        allow_http_webhooks: bool,
    },
    /// Replace the signing secret; prints the new one. Immediate, with no overlap window.
    RotateSecret {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
    },
    /// Replace the IP allowlist; with no --allow-ip, any address is allowed.
    SetAllowlist {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Allow an address or CIDR range (repeat for several).
        #[arg(long = "allow-ip", value_name = "CIDR")]
        allow_ip: Vec<String>,
    },
    /// Set the monthly usage allowance (--monthly-allowance-minutes) or remove it (--unlimited).
    SetAllowance {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Allowance in minutes.
        #[arg(
            long,
            required_unless_present = "unlimited",
            conflicts_with = "unlimited"
        )]
        monthly_allowance_minutes: Option<u32>,
        /// No allowance limit.
        #[arg(long)]
        unlimited: bool,
    },
    /// Inject faults for the tenant, to rehearse a bad day (off by default; deterministic for
    /// a seed): dropped, duplicated, late or badly signed webhooks, API 429s and 500s.
    SetFaults {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// The faults (unset ones are off).
        #[command(flatten)]
        faults: FaultArgs,
        /// Turn every fault off.
        #[arg(long, conflicts_with_all = ["drop_deliveries", "duplicate_deliveries", "delay_deliveries", "bad_signature", "api_429", "api_500", "seed"])]
        clear: bool,
    },
    /// Limit the tenant's requests a second (--requests-per-second; over it: 429 with
    /// Retry-After), or remove the limit (--off, the default state).
    SetRateLimit {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Requests a second (bursts of one second's worth allowed).
        #[arg(
            long,
            required_unless_present = "off",
            conflicts_with = "off",
            value_parser = clap::value_parser!(u32).range(1..)
        )]
        requests_per_second: Option<u32>,
        /// No limit.
        #[arg(long)]
        off: bool,
    },
}

/// The fault flags of `tenant create` and `tenant set-faults`.
#[derive(Debug, Clone, Args)]
pub struct FaultArgs {
    /// Share of deliveries (0 to 1) that fail on both attempts, as if the endpoint were down.
    #[arg(long, value_name = "SHARE", value_parser = share)]
    drop_deliveries: Option<f64>,
    /// Share of deliveries sent twice (same webhook id, a fresh signature).
    #[arg(long, value_name = "SHARE", value_parser = share)]
    duplicate_deliveries: Option<f64>,
    /// Delay before every delivery's first attempt, e.g. 30s or 2m.
    #[arg(long, value_name = "DUR", value_parser = crate::faults::parse_duration)]
    delay_deliveries: Option<std::time::Duration>,
    /// Share of deliveries signed with a wrong key.
    #[arg(long, value_name = "SHARE", value_parser = share)]
    bad_signature: Option<f64>,
    /// Share of API requests answered 429 with Retry-After.
    #[arg(long = "api-429", value_name = "SHARE", value_parser = share)]
    api_429: Option<f64>,
    /// Share of API requests answered 500 INTERNAL_ERROR.
    #[arg(long = "api-500", value_name = "SHARE", value_parser = share)]
    api_500: Option<f64>,
    /// The seed every fault decision derives from (the same seed affects the same calls).
    #[arg(long)]
    seed: Option<u64>,
}

fn share(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| format!("{text:?} is not a share from 0 to 1"))
}

impl FaultArgs {
    fn faults(&self) -> crate::faults::Faults {
        crate::faults::Faults {
            drop_deliveries: self.drop_deliveries.unwrap_or(0.0),
            duplicate_deliveries: self.duplicate_deliveries.unwrap_or(0.0),
            delay_deliveries_ms: self
                .delay_deliveries
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            bad_signature: self.bad_signature.unwrap_or(0.0),
            api_429: self.api_429.unwrap_or(0.0),
            api_500: self.api_500.unwrap_or(0.0),
            seed: self.seed.unwrap_or(0),
        }
    }
}

impl TenantArgs {
    /// Runs the command against the database.
    ///
    /// # Errors
    /// Invalid values, an unknown tenant, or a database failure.
    pub async fn exec(self) -> anyhow::Result<()> {
        let db = Db::open(&self.db)
            .await
            .with_context(|| format!("opening database {}", self.db.display()))?;
        let now_ms = chrono::Utc::now().timestamp_millis();
        let output = run_command(&db, self.command, now_ms).await?;
        print(&output, self.json)
    }
}

/// What a command prints: JSON data, and the same as human-readable lines.
struct Output {
    json: Value,
    human: String,
}

/// A usage error found after parsing: a bad value or file (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// A failure that the same command can get past later, once the cause is gone (a full
/// disk): exit 75 (`EX_TEMPFAIL`), after the message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Temporary(pub String);

/// The command already printed why it failed: exit with this code and print nothing more.
#[derive(Debug, thiserror::Error)]
#[error("exit code {0}")]
pub struct Reported(pub u8);

fn print(output: &Output, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        print_line(&output.json.to_string())
    } else {
        print_line(&output.human)
    }
}

/// Writes a line on stdout; a reader that went away (`| head`) is not an error.
///
/// # Errors
/// Any other failure to write.
pub fn print_line(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    match writeln!(std::io::stdout().lock(), "{text}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

async fn run_command(db: &Db, command: TenantCommand, now_ms: i64) -> anyhow::Result<Output> {
    match command {
        TenantCommand::Create {
            name,
            webhook_url,
            allow_ip,
            monthly_allowance_minutes,
            allow_http_webhooks,
            faults,
        } => {
            let name = name.trim().to_owned();
            if name.is_empty() {
                bail!("--name must not be empty");
            }
            let webhook_url = webhook_url
                .map(|url| validate_webhook_url(&url, allow_http_webhooks))
                .transpose()?;
            let key = ApiKey::generate();
            let secret = SigningSecret::generate();
            let tenant_id = ids::tenant_id();
            db.create_tenant(NewTenant {
                id: tenant_id.clone(),
                name,
                webhook_url,
                signing_secret: secret.clone(),
                ip_allowlist: parse_allowlist(&allow_ip)?,
                monthly_allowance_minutes: monthly_allowance_minutes.map(i64::from),
                key_hash: key.hash(),
                now_ms,
                faults: faults.faults(),
            })
            .await?;
            Ok(Output {
                json: json!({
                    "tenantId": tenant_id,
                    "apiKey": key.expose(),
                    "signingSecret": secret.expose(),
                }),
                human: format!(
                    "tenantId:      {tenant_id}\napiKey:        {}\nsigningSecret: {}\n\
                     (the key and the secret are shown this once; store them now)",
                    key.expose(),
                    secret.expose()
                ),
            })
        }
        TenantCommand::List => {
            let tenants = db.list_tenants().await?;
            let human = if tenants.is_empty() {
                "no tenants".to_owned()
            } else {
                tenants
                    .iter()
                    .map(summary_line)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(Output {
                json: Value::Array(tenants.iter().map(summary).collect()),
                human,
            })
        }
        TenantCommand::RevokeKey { tenant } => {
            let revoked = db
                .revoke_api_keys(&tenant, now_ms)
                .await?
                .with_context(|| unknown(&tenant))?;
            Ok(Output {
                json: json!({ "tenantId": tenant, "revokedKeys": revoked }),
                human: format!("revoked {revoked} API key(s) of {tenant}"),
            })
        }
        TenantCommand::IssueKey { tenant } => {
            let key = ApiKey::generate();
            if !db.add_api_key(&tenant, key.hash(), now_ms).await? {
                bail!(unknown(&tenant));
            }
            Ok(Output {
                json: json!({ "tenantId": tenant, "apiKey": key.expose() }),
                human: format!("apiKey: {}\n(shown this once; store it now)", key.expose()),
            })
        }
        TenantCommand::Deactivate { tenant } => {
            change(db, &tenant, TenantChange::Active(false)).await
        }
        TenantCommand::Activate { tenant } => change(db, &tenant, TenantChange::Active(true)).await,
        TenantCommand::SetWebhook {
            tenant,
            url,
            clear: _,
            allow_http_webhooks,
        } => {
            let url = url
                .map(|url| validate_webhook_url(&url, allow_http_webhooks))
                .transpose()?;
            change(db, &tenant, TenantChange::WebhookUrl(url)).await
        }
        TenantCommand::RotateSecret { tenant } => {
            let secret = SigningSecret::generate();
            db.update_tenant(&tenant, TenantChange::SigningSecret(secret.clone()))
                .await?
                .with_context(|| unknown(&tenant))?;
            Ok(Output {
                json: json!({ "tenantId": tenant, "signingSecret": secret.expose() }),
                human: format!(
                    "signingSecret: {}\n(shown this once; the old secret no longer signs)",
                    secret.expose()
                ),
            })
        }
        TenantCommand::SetAllowlist { tenant, allow_ip } => {
            let nets = parse_allowlist(&allow_ip)?;
            change(db, &tenant, TenantChange::IpAllowlist(nets)).await
        }
        TenantCommand::SetAllowance {
            tenant,
            monthly_allowance_minutes,
            unlimited: _,
        } => {
            let minutes = monthly_allowance_minutes.map(i64::from);
            change(db, &tenant, TenantChange::MonthlyAllowanceMinutes(minutes)).await
        }
        TenantCommand::SetFaults {
            tenant,
            faults,
            clear,
        } => {
            let faults = if clear {
                crate::faults::Faults::default()
            } else {
                faults.faults()
            };
            change(db, &tenant, TenantChange::Faults(faults)).await
        }
        TenantCommand::SetRateLimit {
            tenant,
            requests_per_second,
            off: _,
        } => {
            let limit = requests_per_second.map(i64::from);
            change(db, &tenant, TenantChange::RequestsPerSecond(limit)).await
        }
    }
}

async fn change(db: &Db, tenant: &str, change: TenantChange) -> anyhow::Result<Output> {
    let record = db
        .update_tenant(tenant, change)
        .await?
        .with_context(|| unknown(tenant))?;
    Ok(Output {
        json: summary(&record),
        human: summary_line(&record),
    })
}

fn unknown(tenant: &str) -> String {
    format!("no tenant {tenant:?}")
}

fn summary(record: &TenantRecord) -> Value {
    json!({
        "tenantId": record.id,
        "name": record.name,
        "active": record.active,
        "webhookUrl": record.webhook_url,
        "ipAllowlist": record.ip_allowlist.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "monthlyAllowanceMinutes": record.monthly_allowance_minutes,
        "requestsPerSecond": record.requests_per_second,
        "faults": (!record.faults.is_off()).then_some(record.faults),
        "liveKeys": record.live_keys,
        "createdAt": format_millis(record.created_at_ms),
    })
}

fn summary_line(record: &TenantRecord) -> String {
    let allowlist: Vec<String> = record
        .ip_allowlist
        .iter()
        .map(ToString::to_string)
        .collect();
    format!(
        "{}  {}  {}  webhook={}  allowlist={}  allowance={}  rate={}  keys={}{}",
        record.id,
        record.name,
        if record.active { "active" } else { "inactive" },
        record.webhook_url.as_deref().unwrap_or("-"),
        if allowlist.is_empty() {
            "any".to_owned()
        } else {
            allowlist.join(",")
        },
        record
            .monthly_allowance_minutes
            .map_or_else(|| "unlimited".to_owned(), |m| format!("{m}min")),
        record
            .requests_per_second
            .map_or_else(|| "unlimited".to_owned(), |r| format!("{r}/s")),
        record.live_keys,
        if record.faults.is_off() {
            String::new()
        } else {
            "  faults=on".to_owned()
        },
    )
}

/// Parses `--allow-ip` values: CIDR ranges or single addresses (as /32 or /128).
///
/// # Errors
/// A value that is neither.
pub fn parse_allowlist(values: &[String]) -> anyhow::Result<Vec<IpNet>> {
    values
        .iter()
        .map(|value| {
            let value = value.trim();
            value
                .parse::<IpNet>()
                .map(|net| net.trunc())
                .or_else(|_| value.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    anyhow::anyhow!("--allow-ip {value:?} is not an IP address or CIDR range")
                })
        })
        .collect()
}

/// Checks a webhook URL: absolute, with a host, no credentials, and HTTPS unless plain
/// HTTP is explicitly allowed (local testing only).
///
/// # Errors
/// Any of these checks failing.
pub fn validate_webhook_url(raw: &str, allow_http: bool) -> anyhow::Result<String> {
    let url = reqwest::Url::parse(raw.trim())
        .map_err(|error| anyhow::anyhow!("webhook URL {raw:?} is not a valid URL: {error}"))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => bail!(
            "webhook URL must be HTTPS (plain HTTP only with --allow-http-webhooks, for local testing)"
        ),
        other => bail!("webhook URL scheme {other:?} is not supported; use HTTPS"),
    }
    if url.host_str().is_none_or(str::is_empty) {
        bail!("webhook URL {raw:?} has no host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        bail!("webhook URL must not contain credentials");
    }
    Ok(url.to_string())
}
