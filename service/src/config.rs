//! Settings of a running server, and the `serve` flags they come from (the one place where
//! server flags are parsed; later issues add theirs here).

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::clock::Clock;

/// Default database file.
pub const DEFAULT_DB: &str = "./svc-service.db";
/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";

/// Flags of `svc-service serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// SQLite database file (created if missing).
    #[arg(long, env = "SVC_DB", default_value = DEFAULT_DB)]
    pub db: PathBuf,
    /// Address to listen on.
    #[arg(long, env = "SVC_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Deliver webhooks to plain-HTTP URLs too. For local testing only: production
    /// webhook URLs must be HTTPS.
    #[arg(long, env = "SVC_ALLOW_HTTP_WEBHOOKS")]
    pub allow_http_webhooks: bool,
    /// Deliver webhooks to internal addresses too (loopback, private, link-local, unique-local;
    /// refused by default, checked at connect time). Implied by --allow-http-webhooks.
    #[arg(long, env = "SVC_ALLOW_PRIVATE_WEBHOOKS")]
    pub allow_private_webhooks: bool,
    /// Take the caller's address for IP allowlists from the last entry of
    /// `X-Forwarded-For` (the address your reverse proxy saw) instead of the TCP peer.
    /// Only enable behind a proxy you run that always sets the header; otherwise any
    /// caller can claim any address.
    #[arg(long, env = "SVC_TRUST_FORWARDED_FOR")]
    pub trust_forwarded_for: bool,
    /// Lifetime of a session token minted by POST /session, in seconds.
    #[arg(long, env = "SVC_TOKEN_TTL_SECS", default_value_t = DEFAULT_TOKEN_TTL_SECS)]
    pub token_ttl_secs: u64,
    /// Longest a live practice call runs before the service ends it, in seconds (the
    /// contract's two hours; lower it for tests).
    #[arg(long, env = "SVC_CALL_CEILING_SECS", default_value_t = DEFAULT_CALL_CEILING_SECS)]
    pub call_ceiling_secs: u64,
    /// Delay before the single retry of a failed webhook delivery, in seconds.
    #[arg(long, env = "SVC_WEBHOOK_RETRY_DELAY_SECS", default_value_t = DEFAULT_WEBHOOK_RETRY_DELAY_SECS)]
    pub webhook_retry_delay_secs: u64,
    /// Directory of the archived real-call recordings (default: `<db>-audio` beside the
    /// database).
    #[arg(long, env = "SVC_AUDIO_DIR")]
    pub audio_dir: Option<PathBuf>,
    /// The base URL clients reach this server at (e.g. `https://svc.example.test`), used for
    /// the links it hands out (audio links) [default: `http://` and the listen address].
    #[arg(long, env = "SVC_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Serve `GET /metrics` (Prometheus text format) and `GET /healthz` on this address, e.g.
    /// 127.0.0.1:9187 [default: no metrics].
    #[arg(long, env = "SVC_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// How logs are written on stderr: plain text, or one JSON object per line (time, level,
    /// target, message, fields).
    #[arg(long, value_enum, default_value_t = crate::ops::logs::LogFormat::Text)]
    pub log_format: crate::ops::logs::LogFormat,
}

/// Default session token lifetime (about 5 minutes).
pub const DEFAULT_TOKEN_TTL_SECS: u64 = 300;
/// Default call ceiling (two hours).
pub const DEFAULT_CALL_CEILING_SECS: u64 = 7_200;
/// Default delay of the webhook retry (about 5 minutes).
pub const DEFAULT_WEBHOOK_RETRY_DELAY_SECS: u64 = 300;

impl ServeArgs {
    /// The server settings these flags describe (system clock).
    pub fn into_config(self) -> Config {
        let mut config = Config::new(self.db);
        config.listen = self.listen;
        config.allow_http_webhooks = self.allow_http_webhooks;
        config.allow_private_webhooks = self.allow_private_webhooks;
        config.trust_forwarded_for = self.trust_forwarded_for;
        config.token_ttl_secs = self.token_ttl_secs;
        config.call_ceiling_secs = self.call_ceiling_secs;
        config.webhook_retry_delay_secs = self.webhook_retry_delay_secs;
        config.audio_dir = self.audio_dir;
        config.public_url = self.public_url;
        config.metrics_listen = self.metrics_listen;
        config
    }
}

/// Everything a running server needs to know. Build with [`Config::new`] and adjust fields,
/// so that later fields keep their defaults.
#[derive(Clone, Debug)]
pub struct Config {
    /// SQLite database file.
    pub db_path: PathBuf,
    /// Address `serve` binds (the listener passed to [`crate::run`] wins).
    pub listen: SocketAddr,
    /// Whether plain-HTTP webhook URLs are delivered to (local testing only).
    pub allow_http_webhooks: bool,
    /// Whether internal addresses are delivered to (see [`crate::webhook::address`]).
    pub allow_private_webhooks: bool,
    /// Whether `X-Forwarded-For` names the caller (see [`ServeArgs::trust_forwarded_for`]).
    pub trust_forwarded_for: bool,
    /// Source of time for every time rule.
    pub clock: Clock,
    /// Session token lifetime, seconds.
    pub token_ttl_secs: u64,
    /// Live call ceiling, seconds.
    pub call_ceiling_secs: u64,
    /// Delay of the single webhook retry, seconds.
    pub webhook_retry_delay_secs: u64,
    /// Deadline of one webhook attempt (the contract's 10 seconds).
    pub webhook_timeout: std::time::Duration,
    /// Directory of the archived recordings; `None`: [`default_audio_dir`] of the database.
    pub audio_dir: Option<PathBuf>,
    /// Base URL of the links this server hands out; `None`: `http://` and the address the
    /// server listens on ([`crate::run`] fills it in), or the request's `Host` without a server.
    pub public_url: Option<String>,
    /// What one live practice call may send (see [`crate::live::limits`]).
    pub live_limits: crate::live::limits::LiveLimits,
    /// What one HTTP connection may hold: header-read, request and keep-alive idle timeouts,
    /// and a cap on connections open at once (see [`crate::run`]).
    pub http_limits: svc_server::ServerLimits,
    /// Where `GET /metrics` is served (see [`crate::ops`]); `None`: nowhere (the default).
    pub metrics_listen: Option<SocketAddr>,
}

/// How long the API answers one request at most: past it, `400 INVALID_REQUEST` in the
/// envelope (a body that never finishes arriving). The connection-level request timeout sits a
/// little above it, as a last resort.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The connection limits of `serve`: headers within 5 s, a request answered within 15 s (the
/// API's own 10 s timeout answers first, in the envelope), a kept-alive connection closed after
/// 30 s idle, and at most 1 024 connections open at once (more wait in the listen backlog).
pub fn default_http_limits() -> svc_server::ServerLimits {
    svc_server::ServerLimits {
        header_read_timeout: std::time::Duration::from_secs(5),
        request_timeout: REQUEST_TIMEOUT + std::time::Duration::from_secs(5),
        keep_alive_idle_timeout: std::time::Duration::from_secs(30),
        max_connections: 1_024,
    }
}

/// Where recordings are archived by default: `<database file>-audio`, beside the database.
pub fn default_audio_dir(db_path: &std::path::Path) -> PathBuf {
    let mut name = db_path.as_os_str().to_owned();
    name.push("-audio");
    PathBuf::from(name)
}

impl Config {
    /// The directory of the archived recordings.
    pub fn audio_dir(&self) -> PathBuf {
        self.audio_dir
            .clone()
            .unwrap_or_else(|| default_audio_dir(&self.db_path))
    }
}

impl Config {
    /// Defaults for a database at `db_path`: loopback listener, HTTPS-only webhooks, peer
    /// addresses from the socket, system clock.
    pub fn new(db_path: impl Into<PathBuf>) -> Self {
        Config {
            db_path: db_path.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            allow_http_webhooks: false,
            allow_private_webhooks: false,
            trust_forwarded_for: false,
            clock: Clock::System,
            token_ttl_secs: DEFAULT_TOKEN_TTL_SECS,
            call_ceiling_secs: DEFAULT_CALL_CEILING_SECS,
            webhook_retry_delay_secs: DEFAULT_WEBHOOK_RETRY_DELAY_SECS,
            webhook_timeout: crate::webhook::client::DEFAULT_TIMEOUT,
            audio_dir: None,
            public_url: None,
            live_limits: crate::live::limits::LiveLimits::default(),
            http_limits: default_http_limits(),
            metrics_listen: None,
        }
    }
}
