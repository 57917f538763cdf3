//! The log lines written on this thread while a test runs, for the facts only the log carries.
//! A `#[tokio::test]` runtime is single-threaded, so the routes and workers it spawns log here
//! too.

use std::sync::{Arc, Mutex};

/// The captured text; a `MakeWriter` of `tracing_subscriber::fmt` (each clone writes into the
/// same buffer).
#[derive(Clone, Debug, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Captures this thread's log events (every level, plain text with span fields) until the
    /// guard is dropped.
    pub fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        Self::capture_at(tracing::Level::TRACE)
    }

    /// [`Logs::capture`] of the events at `max_level` and above only.
    pub fn capture_at(max_level: tracing::Level) -> (Self, tracing::subscriber::DefaultGuard) {
        // tracing caches, per call site, whether any subscriber wants it, computed when the
        // site is first hit. A site first hit by another test while no subscriber of this
        // binary was alive could be cached as wanted by none, and its events (or the webhook
        // span) lost here. A global subscriber that wants everything (a bare registry: it
        // records spans, prints nothing) keeps every site wanted.
        static WANT_EVERYTHING: std::sync::Once = std::sync::Once::new();
        WANT_EVERYTHING.call_once(|| {
            let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
        });
        let logs = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer({
                let logs = logs.clone();
                move || logs.clone()
            })
            .with_max_level(max_level)
            .with_ansi(false)
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// Everything captured so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("logs")).into_owned()
    }

    /// The lines that contain `needle`.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("logs").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
