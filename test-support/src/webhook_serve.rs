//! `svc-cli webhook serve` started as a process: spawned with its stderr piped, waited for until
//! it logs `receiving webhooks on …`, and its stderr read on for good, so the process never
//! blocks on a full pipe. The caller builds the command (binary, flags, environment): only the
//! crate that owns the binary knows its path (`env!("CARGO_BIN_EXE_svc-cli")`).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// What the server logs once it listens.
pub const LISTENING: &str = "receiving webhooks on ";

/// A started server.
#[derive(Debug)]
pub struct Started {
    /// The process (killed when dropped).
    pub child: Child,
    /// The line that says where it listens, plain or as the message of a JSON line.
    pub line: String,
    /// The stderr lines up to and including [`Started::line`].
    pub early: Vec<String>,
    /// Every later stderr line (read on whether or not this receiver is kept).
    pub stderr: mpsc::UnboundedReceiver<String>,
}

impl Started {
    /// The URL deliveries go to (`http://host:port/path`).
    pub fn url(&self) -> String {
        let rest = &self.line[self.line.find(LISTENING).expect(LISTENING) + LISTENING.len()..];
        rest.split(' ').next().expect("url").to_owned()
    }

    /// The `host:port` it listens on.
    pub fn addr(&self) -> String {
        self.url()
            .trim_start_matches("http://")
            .split('/')
            .next()
            .expect("host:port")
            .to_owned()
    }
}

/// Spawns `command` (with stderr piped and `kill_on_drop`) and waits up to `wait` until it logs
/// [`LISTENING`].
///
/// # Panics
/// When it cannot be spawned, exits before listening, or does not listen within `wait`.
pub async fn start(command: &mut Command, wait: Duration) -> Started {
    let mut child = command
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn svc-cli webhook serve");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let (tx, mut stderr) = mpsc::unbounded_channel();
    // Every line is kept for the test to read, and the pipe never fills up (read on after the
    // test drops the receiver).
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(line);
        }
    });
    let mut early = Vec::new();
    let line = tokio::time::timeout(wait, async {
        while let Some(line) = stderr.recv().await {
            early.push(line.clone());
            if line.contains(LISTENING) {
                return line;
            }
        }
        panic!("webhook serve exited before listening: {early:?}");
    })
    .await
    .expect("webhook serve starts listening");
    Started {
        child,
        line,
        early,
        stderr,
    }
}
