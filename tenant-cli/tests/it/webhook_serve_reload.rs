//! `svc-cli webhook serve --secret-file`: a rotated secret written to the file is taken without
//! a restart, when the file changes and on SIGHUP, and the secret it
//! replaces is still accepted for deliveries signed before the rotation.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use svc_contract::{CallScored, CallSource, sign};
use svc_test_support::webhook_serve;
use tokio::process::{Child, Command};

const OLD: &str = "whsec_reload_old_0123456789";
const NEW: &str = "whsec_reload_new_9876543210";

struct Serving {
    child: Child,
    url: String,
    secret_file: PathBuf,
    _dir: tempfile::TempDir,
}

async fn serve(extra_args: &[&str]) -> Serving {
    let dir = tempfile::tempdir().expect("temp dir");
    let secret_file = dir.path().join("webhook-secret");
    std::fs::write(&secret_file, format!("{OLD}\n")).expect("write secret");
    let mut command = Command::new(env!("CARGO_BIN_EXE_svc-cli"));
    command
        .args(["webhook", "serve", "--listen", "127.0.0.1:0"])
        .arg("--secret-file")
        .arg(&secret_file)
        .arg("--store")
        .arg(dir.path().join("store.db"))
        .args(extra_args)
        .env_clear()
        .env("HOME", dir.path())
        .stdout(Stdio::null());
    let started = webhook_serve::start(&mut command, Duration::from_secs(30)).await;
    Serving {
        url: started.url(),
        child: started.child,
        secret_file,
        _dir: dir,
    }
}

/// Posts a fresh delivery (its own webhook id) signed with `secret`; returns the status.
async fn post(url: &str, secret: &str) -> u16 {
    let id = format!("wh_{}", rand_suffix());
    let event = CallScored::scored(
        format!("svc_call_{id}"),
        CallSource::Roleplay,
        "svc_agent_1",
        "svc_agency_1",
        "2026-03-01T10:05:30.000Z",
        "req_1",
    );
    let body = serde_json::to_vec(&event).expect("serialise");
    let now = chrono::Utc::now().timestamp();
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("x-service-signature", sign(secret, now, &body))
        .header("x-service-webhook-id", id)
        .body(body)
        .send()
        .await
        .expect("post")
        .status()
        .as_u16()
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Waits until a delivery signed with `secret` is accepted, for at most `within`.
async fn accepted_within(url: &str, secret: &str, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if post(url, secret).await == 200 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn signal(child: &Child, name: &str) {
    let pid = child.id().expect("running").to_string();
    let sent = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid])
        .status()
        .expect("kill");
    assert!(sent.success());
}

async fn stop(mut serving: Serving) {
    signal(&serving.child, "TERM");
    let status = tokio::time::timeout(Duration::from_secs(30), serving.child.wait())
        .await
        .expect("exits after SIGTERM")
        .expect("wait");
    assert_eq!(status.code(), Some(0));
}

fn rotate(secret_file: &Path) {
    std::fs::write(secret_file, format!("{NEW}\n")).expect("rotate");
}

#[tokio::test]
async fn a_secret_written_to_the_file_is_taken_without_a_restart() {
    let serving = serve(&[]).await;
    assert_eq!(post(&serving.url, OLD).await, 200);
    assert_eq!(post(&serving.url, NEW).await, 401);
    rotate(&serving.secret_file);
    assert!(accepted_within(&serving.url, NEW, Duration::from_secs(10)).await);
    // Signed before the rotation, still on its way: accepted for a while.
    assert_eq!(post(&serving.url, OLD).await, 200);
    stop(serving).await;
}

#[tokio::test]
async fn sighup_reloads_the_secret_file_at_once() {
    // The file is polled too rarely to matter: only SIGHUP reloads it within the test.
    let serving = serve(&["--secret-poll-ms", "3600000"]).await;
    rotate(&serving.secret_file);
    assert_eq!(post(&serving.url, NEW).await, 401, "not read yet");
    signal(&serving.child, "HUP");
    assert!(accepted_within(&serving.url, NEW, Duration::from_secs(10)).await);
    stop(serving).await;
}
