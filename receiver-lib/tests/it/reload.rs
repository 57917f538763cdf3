//! A secret file reloaded into a running verifier: on change, on SIGHUP,
//! with the replaced secret accepted for a while and a broken file never taking keys away.

use std::time::Duration;

use svc_contract::{Clock, SystemClock, Verifier, sign};
use svc_receiver::reload::{Reloaded, SecretFile, SecretFileError};

use crate::helpers::{SECRET, T};

const NEW_SECRET: &str = "whsec_rotated_4c3b2a";

/// Whether `verifier` accepts a body signed with `secret` at `now`.
fn accepts(verifier: &Verifier, secret: &str, now: i64) -> bool {
    let body = b"{}";
    verifier
        .verify(sign(secret, now, body).as_bytes(), body, now)
        .is_ok()
}

fn secret_file(contents: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("webhook-secret");
    std::fs::write(&path, contents).expect("write");
    (dir, path)
}

#[test]
fn a_reload_takes_the_new_secret_and_keeps_the_replaced_one_for_a_while() {
    let (_dir, path) = secret_file(&format!("{SECRET}\n"));
    let file = SecretFile::open(&path)
        .expect("open")
        .keep_replaced_for(Duration::from_secs(600));
    let verifier = Verifier::with_shared_keyring(file.keys());
    assert!(accepts(&verifier, SECRET, T));
    assert!(!accepts(&verifier, NEW_SECRET, T));
    assert_eq!(file.reload(T).expect("reload"), Reloaded::Unchanged);

    std::fs::write(&path, NEW_SECRET).expect("rotate");
    assert_eq!(file.reload(T).expect("reload"), Reloaded::Replaced);
    assert!(accepts(&verifier, NEW_SECRET, T));
    assert!(
        accepts(&verifier, SECRET, T + 600),
        "in flight before the rotation"
    );
    assert!(!accepts(&verifier, SECRET, T + 601), "not for ever");
    let matched = verifier
        .verify(sign(SECRET, T, b"{}").as_bytes(), b"{}", T)
        .expect("valid");
    assert_eq!(matched.key(), "replaced");
}

#[test]
fn a_file_that_cannot_be_used_leaves_the_keys_in_use() {
    let (_dir, path) = secret_file(SECRET);
    let file = SecretFile::open(&path).expect("open");
    let verifier = Verifier::with_shared_keyring(file.keys());
    std::fs::write(&path, "whsec_half pasted").expect("write");
    let err = file.reload(T).expect_err("whitespace inside");
    assert!(matches!(err, SecretFileError::Invalid { .. }), "{err}");
    assert!(!err.to_string().contains("half"), "never the secret: {err}");
    std::fs::remove_file(&path).expect("remove");
    assert!(matches!(file.reload(T), Err(SecretFileError::Read { .. })));
    assert!(accepts(&verifier, SECRET, T));
}

#[test]
fn an_extra_key_is_accepted_whatever_the_file_holds() {
    let (_dir, path) = secret_file(SECRET);
    let other = svc_contract::SigningSecret::new("whsec_from_the_environment").expect("secret");
    let file = SecretFile::open(&path)
        .expect("open")
        .with_key("previous", other)
        .keep_replaced_for(Duration::ZERO);
    let verifier = Verifier::with_shared_keyring(file.keys());
    std::fs::write(&path, NEW_SECRET).expect("rotate");
    file.reload(T).expect("reload");
    assert!(accepts(&verifier, "whsec_from_the_environment", T + 3600));
    assert!(accepts(&verifier, NEW_SECRET, T + 3600));
    assert!(!accepts(&verifier, SECRET, T + 1));
}

/// Waits until `verifier` accepts `secret` now, for at most `within`.
async fn until_accepted(verifier: &Verifier, secret: &str, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if accepts(verifier, secret, SystemClock.now()) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn watch_reloads_when_the_file_changes() {
    let (_dir, path) = secret_file(SECRET);
    let file = SecretFile::open(&path)
        .expect("open")
        .poll_interval(Duration::from_millis(50));
    let verifier = Verifier::with_shared_keyring(file.keys());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let watching = tokio::spawn(file.watch(async move {
        let _ = stopped.await;
    }));
    std::fs::write(&path, NEW_SECRET).expect("rotate");
    assert!(until_accepted(&verifier, NEW_SECRET, Duration::from_secs(5)).await);
    stop.send(()).expect("stop");
    watching.await.expect("watch stops");
}

#[cfg(unix)]
#[tokio::test]
async fn watch_reloads_on_sighup() {
    let (_dir, path) = secret_file(SECRET);
    // Polled too rarely to matter: only the signal can reload it within the test.
    let file = SecretFile::open(&path)
        .expect("open")
        .poll_interval(Duration::from_secs(3600));
    let verifier = Verifier::with_shared_keyring(file.keys());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // The handler is installed by `watch` itself, before the signal is sent below.
    let watching = tokio::spawn(file.watch(async move {
        let _ = stopped.await;
    }));
    std::fs::write(&path, NEW_SECRET).expect("rotate");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !accepts(&verifier, NEW_SECRET, SystemClock.now()),
        "no poll in between"
    );
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    assert!(until_accepted(&verifier, NEW_SECRET, Duration::from_secs(5)).await);
    stop.send(()).expect("stop");
    watching.await.expect("watch stops");
}
