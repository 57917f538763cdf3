//! What every handler receives: storage, settings, the clock and the cursor codec.

use axum::http::HeaderMap;

use crate::clock::Clock;
use crate::config::Config;
use crate::cursor::CursorCodec;
use crate::db::Db;
use crate::practice::state::Practice;
use crate::realcall::audio::{Archive, Links};

/// Shared state of the server; cheap to clone (everything inside is reference-counted).
#[derive(Clone, Debug)]
pub struct AppState {
    /// Storage.
    pub db: Db,
    /// Settings.
    pub config: Config,
    /// Source of time (the same as `config.clock`).
    pub clock: Clock,
    /// Opaque pagination cursors.
    pub cursors: CursorCodec,
    /// Session tokens, live calls, scoring and webhooks.
    pub practice: Practice,
    /// The archive of real-call recordings.
    pub archive: Archive,
    /// Signs and checks audio links.
    pub audio_links: Links,
    /// Per-tenant request rate limits (for tenants the operator gave one).
    pub rate_limiter: crate::ratelimit::RateLimiter,
    /// Numbers the requests of tenants with injected API faults.
    pub fault_requests: crate::faults::RequestCounter,
}

impl AppState {
    /// Opens the database named by `config` and loads the cursor key.
    ///
    /// # Errors
    /// The database cannot be opened, migrated or read.
    pub async fn open(config: Config) -> anyhow::Result<AppState> {
        use anyhow::Context as _;
        let db = Db::open(&config.db_path)
            .await
            .with_context(|| format!("opening database {}", config.db_path.display()))?;
        let key = db.cursor_key().await.context("loading the cursor key")?;
        let practice = Practice::open(&db, &config).await?;
        let audio_key = db
            .audio_link_key()
            .await
            .context("loading the audio link key")?;
        Ok(AppState {
            db,
            clock: config.clock.clone(),
            archive: Archive::new(config.audio_dir()),
            audio_links: Links::new(audio_key),
            rate_limiter: crate::ratelimit::RateLimiter::default(),
            fault_requests: crate::faults::RequestCounter::default(),
            config,
            cursors: CursorCodec::new(key),
            practice,
        })
    }

    /// The base URL of the links this server hands out, without a trailing `/`: the
    /// configured public URL, else `http://` and the request's `Host` (a server started by
    /// [`crate::run`] always has a public URL, so a forged `Host` is never echoed).
    pub fn public_base(&self, headers: &HeaderMap) -> String {
        if let Some(url) = &self.config.public_url {
            return url.trim_end_matches('/').to_owned();
        }
        let host = headers
            .get(axum::http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_graphic()))
            .map_or_else(|| self.config.listen.to_string(), str::to_string);
        format!("http://{host}")
    }

    /// The current time in Unix milliseconds, from the injectable clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now().timestamp_millis()
    }
}
