//! What every handler receives: storage, settings, the clock and the cursor codec.

use crate::clock::Clock;
use crate::config::Config;
use crate::cursor::CursorCodec;
use crate::db::Db;
use crate::practice::state::Practice;

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
        Ok(AppState {
            db,
            clock: config.clock.clone(),
            config,
            cursors: CursorCodec::new(key),
            practice,
        })
    }

    /// The current time in Unix milliseconds, from the injectable clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now().timestamp_millis()
    }
}
