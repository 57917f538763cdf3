//! Runs the real `svc-cli webhook verify` binary on the shared fixture vectors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/webhooks")
}

fn vectors() -> serde_json::Value {
    let text = std::fs::read_to_string(fixtures().join("vectors.json")).expect("vectors.json");
    serde_json::from_str(&text).expect("vectors.json is JSON")
}

fn vector(group: &str, name: &str) -> serde_json::Value {
    vectors()[group]
        .as_array()
        .expect("vector group")
        .iter()
        .find(|v| v["name"] == name)
        .cloned()
        .expect("vector exists")
}

fn verify(secret: &str, header: &str, body: &[u8], now: i64, extra: &[&str]) -> Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let body_file = dir.path().join("body.json");
    std::fs::write(&body_file, body).expect("write body");
    Command::new(env!("CARGO_BIN_EXE_svc-cli"))
        .args([
            "webhook",
            "verify",
            "--signature",
            header,
            "--now",
            &now.to_string(),
        ])
        .arg("--body-file")
        .arg(&body_file)
        .args(extra)
        .env("SVC_SIGNING_SECRET", secret)
        .env_remove("RUST_LOG")
        .output()
        .expect("run svc-cli")
}

fn str_of<'a>(v: &'a serde_json::Value, key: &str) -> &'a str {
    v[key].as_str().expect("string field")
}

#[test]
fn a_valid_fixture_exits_zero_and_prints_the_decoded_event() {
    let v = vector("valid", "failure_scoring_incomplete");
    let out = verify(
        str_of(&v, "secret"),
        str_of(&v, "header"),
        str_of(&v, "body").as_bytes(),
        v["now"].as_i64().expect("now"),
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let sent: serde_json::Value = serde_json::from_str(str_of(&v, "body")).expect("body");
    assert_eq!(printed, sent);
    assert_eq!(printed["reason"], "SCORING_INCOMPLETE");
}

#[test]
fn an_altered_body_exits_one_with_a_single_line_reason() {
    let v = vector("invalid", "body_altered");
    let out = verify(
        str_of(&v, "secret"),
        str_of(&v, "header"),
        str_of(&v, "body").as_bytes(),
        v["now"].as_i64().expect("now"),
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no signature matches"), "{stderr}");
    assert!(
        !stderr.contains("whsec_fixture"),
        "the secret must never be printed: {stderr}"
    );
}

#[test]
fn an_old_capture_fails_on_tolerance_unless_it_is_disabled_explicitly() {
    let v = vector("invalid", "timestamp_too_old");
    let (secret, header, body) = (
        str_of(&v, "secret"),
        str_of(&v, "header"),
        str_of(&v, "body"),
    );
    let now = v["now"].as_i64().expect("now");
    let out = verify(secret, header, body.as_bytes(), now, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("301 s old"));
    let out = verify(
        secret,
        header,
        body.as_bytes(),
        now,
        &["--tolerance", "301"],
    );
    assert_eq!(out.status.code(), Some(0));
    let out = verify(secret, header, body.as_bytes(), now, &["--no-tolerance"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_malformed_header_names_what_is_wrong() {
    let v = vector("invalid", "duplicate_timestamp");
    let out = verify(
        str_of(&v, "secret"),
        str_of(&v, "header"),
        str_of(&v, "body").as_bytes(),
        v["now"].as_i64().expect("now"),
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("more than one t="));
}

#[test]
fn usage_errors_exit_two_without_echoing_the_secret() {
    let v = vector("valid", "success_roleplay");
    let out = verify("not-a-secret", str_of(&v, "header"), b"{}", 0, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not-a-secret"));
    let out = Command::new(env!("CARGO_BIN_EXE_svc-cli"))
        .args(["webhook", "verify", "--secret", "whsec_x"])
        .output()
        .expect("run svc-cli");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_readme_example_files_verify() {
    let header = std::fs::read_to_string(fixtures().join("example.sig")).expect("example.sig");
    let body = std::fs::read(fixtures().join("example.json")).expect("example.json");
    let out = verify(
        "whsec_fixture",
        header.trim_end(),
        &body,
        1_767_225_600,
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
