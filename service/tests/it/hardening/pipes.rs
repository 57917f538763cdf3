//! Operator commands whose reader went away (`| head -0`) end quietly:
//! they used to panic with exit 101 on the closed stdout.

use std::process::{Command, Stdio};

/// Runs `svc-service args…` with its stdout (and stderr) closed before it writes.
fn with_closed_pipes(db: &std::path::Path, args: &[&str]) -> std::process::ExitStatus {
    let mut child = Command::new(env!("CARGO_BIN_EXE_svc-service"))
        .args(args)
        .arg("--db")
        .arg(db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    drop(child.stderr.take());
    child.wait().expect("wait")
}

#[test]
fn listings_into_a_closed_pipe_exit_without_a_panic() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("service.db");
    let created = Command::new(env!("CARGO_BIN_EXE_svc-service"))
        .args(["tenant", "create", "--name", "Piped", "--json", "--db"])
        .arg(&db)
        .output()
        .expect("create");
    assert!(created.status.success());
    for args in [
        &["tenant", "list"][..],
        &["tenant", "list", "--json"][..],
        &["deliveries", "list"][..],
        &["deliveries", "list", "--json"][..],
    ] {
        let status = with_closed_pipes(&db, args);
        assert_ne!(status.code(), Some(101), "{args:?} panicked");
        assert!(status.success(), "{args:?}: {status}");
    }
}
