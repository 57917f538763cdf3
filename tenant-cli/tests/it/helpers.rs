//! Test helpers: run the real `svc-cli` binary in a per-test temp dir with a clean environment,
//! and build library clients whose retry sleeps are recorded instead of waited out.

use std::path::{Path, PathBuf};

use svc_fixtures::{API_KEY, base_url};
use tempfile::TempDir;
use wiremock::MockServer;

/// In svc-test-support: the waits recorded, and a client for a mock server.
pub(crate) use svc_test_support::retry::{client, recording_policy};

/// The finished process.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// A per-test sandbox: a temp dir used as working dir, HOME and config dir.
#[derive(Debug)]
pub(crate) struct Sandbox {
    pub(crate) dir: TempDir,
    env: Vec<(String, String)>,
}

impl Sandbox {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            env: Vec::new(),
        }
    }

    /// A sandbox whose temp dir is made inside `parent` (a file system a test mounted, say).
    pub(crate) fn inside(parent: &Path) -> Self {
        Self {
            dir: tempfile::tempdir_in(parent).expect("temp dir"),
            env: Vec::new(),
        }
    }

    /// A sandbox pointed at `server` with the fixture key in the environment.
    pub(crate) fn for_server(server: &MockServer) -> Self {
        Self::new()
            .env("SVC_BASE_URL", &base_url(server))
            .env("SVC_API_KEY", API_KEY)
    }

    pub(crate) fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(crate) fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, contents).expect("write test file");
        path
    }

    pub(crate) async fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, "").await
    }

    /// The `svc-cli` command with `args`, run in the sandbox with its environment and piped
    /// stdio, for a test that needs the child itself (to kill it, say).
    pub(crate) fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-cli"));
        command
            .args(args)
            .current_dir(self.dir.path())
            .env_clear()
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path().join("xdg"))
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command
    }

    pub(crate) async fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Run {
        use tokio::io::AsyncWriteExt;
        let mut child = self.command(args).spawn().expect("spawn svc-cli");
        if let Some(mut input) = child.stdin.take() {
            input
                .write_all(stdin.as_bytes())
                .await
                .expect("write stdin");
        }
        let output = child.wait_with_output().await.expect("run svc-cli");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// Every request the server received.
pub(crate) async fn received(server: &MockServer) -> Vec<wiremock::Request> {
    server.received_requests().await.unwrap_or_default()
}

/// Requests the server received for a method and path.
pub(crate) async fn requests_to(
    server: &MockServer,
    method: &str,
    path: &str,
) -> Vec<wiremock::Request> {
    received(server)
        .await
        .into_iter()
        .filter(|r| r.method.as_str() == method && r.url.path() == path)
        .collect()
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read file")
}

/// The arguments that start `svc-cli webhook serve` on a free port of the loopback, its secret
/// in `$WH` (the store and any other flag follow).
pub(crate) const WEBHOOK_SERVE: [&str; 6] = [
    "webhook",
    "serve",
    "--listen",
    "127.0.0.1:0",
    "--secret-env",
    "WH",
];

/// `svc-cli webhook serve` on a free port of the loopback, with `secret` in `$WH` and its store
/// at `store`, in an environment holding nothing but `HOME=home` and `env`; stdout discarded
/// (start it with `svc_test_support::webhook_serve::start`).
pub(crate) fn webhook_serve_command(
    home: &Path,
    store: &Path,
    secret: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-cli"));
    command
        .args(WEBHOOK_SERVE)
        .arg("--store")
        .arg(store)
        .args(extra)
        .env_clear()
        .env("HOME", home)
        .env("WH", secret)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null());
    command
}
