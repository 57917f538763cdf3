//! The shared state of practice calls, held in [`crate::state::AppState`]: the session-token
//! key, the scoring worker, the webhook outbox, the live-call settings and the shutdown signal
//! live sockets watch.

use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::watch;

use crate::config::Config;
use crate::db::Db;
use crate::scoring::worker::Scorer;
use crate::session_token::TokenKey;
use crate::webhook::client::{UrlPolicy, WebhookClient};
use crate::webhook::outbox::Outbox;

/// How long a client has to send its `auth` frame.
pub const AUTH_FRAME_TIMEOUT: Duration = Duration::from_secs(10);

/// Practice-call state; cheap to clone.
#[derive(Debug, Clone)]
pub struct Practice {
    /// Signs and checks session tokens.
    pub token_key: TokenKey,
    /// Scores ended calls.
    pub scorer: Scorer,
    /// Delivers webhooks.
    pub outbox: Outbox,
    /// Session token lifetime.
    pub token_ttl: Duration,
    /// Longest a live call runs.
    pub call_ceiling: Duration,
    /// What one live call may send.
    pub live_limits: crate::live::limits::LiveLimits,
    /// Tells live sockets the server is stopping.
    pub stopping: watch::Receiver<bool>,
    stop_sender: std::sync::Arc<watch::Sender<bool>>,
}

impl Practice {
    /// Loads the token key and builds the workers from `config`.
    ///
    /// # Errors
    /// Storage failure, or the HTTP client cannot be built.
    pub async fn open(db: &Db, config: &Config) -> anyhow::Result<Self> {
        let token_key = TokenKey::from_bytes(
            db.session_token_key()
                .await
                .context("loading the session token key")?,
        );
        let client = WebhookClient::with_policy(
            UrlPolicy {
                allow_http: config.allow_http_webhooks,
                allow_private: config.allow_private_webhooks,
            },
            config.webhook_timeout,
        )
        .context("building the webhook client")?;
        let outbox = Outbox::new(
            db.clone(),
            client,
            config.clock.clone(),
            Duration::from_secs(config.webhook_retry_delay_secs),
        );
        let scorer = Scorer::new(db.clone(), config.clock.clone(), outbox.clone());
        let (stop_sender, stopping) = watch::channel(false);
        Ok(Self {
            token_key,
            scorer,
            outbox,
            token_ttl: Duration::from_secs(config.token_ttl_secs),
            call_ceiling: Duration::from_secs(config.call_ceiling_secs),
            live_limits: config.live_limits,
            stopping,
            stop_sender: std::sync::Arc::new(stop_sender),
        })
    }

    /// Tells live sockets to end their calls (server shutdown).
    pub fn stop_live_calls(&self) {
        let _ = self.stop_sender.send(true);
    }
}
