//! The signal that stops a server: Ctrl-C (SIGINT), or SIGTERM on Unix (what `systemd stop` and
//! `docker stop` send).

use std::future::Future;

/// A future that resolves on Ctrl-C or SIGTERM. The handlers are installed when this is called,
/// not when the future is first polled, so a signal that arrives right after (while the caller
/// still prints its start-up lines, say) stops the process cleanly instead of killing it.
///
/// # Errors
/// The signal handlers cannot be installed.
pub fn signal() -> std::io::Result<impl Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Duration;

    #[tokio::test]
    async fn sigterm_after_the_call_resolves_the_signal() {
        let stopped = super::signal().expect("handlers");
        // Sent before the future is polled: the handler is already there.
        std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .expect("kill");
        tokio::time::timeout(Duration::from_secs(5), stopped)
            .await
            .expect("the signal resolves");
    }
}
