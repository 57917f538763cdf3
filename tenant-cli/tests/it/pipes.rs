//! Commands whose stdout and stderr are both closed pipes (`svc-cli calls list … | head -0`
//! with stderr closed too) end quietly with their usual exit code: writing
//! the data, a note or the error message to a closed pipe used to panic (exit 101).

use std::path::Path;
use std::process::{ExitStatus, Stdio};

use svc_fixtures::bodies::ROLEPLAY_CALL_ID;
use svc_fixtures::happy;
use wiremock::MockServer;

use crate::helpers::Sandbox;

const FROM: &str = "2026-01-01T00:00:00Z";

/// Runs `svc-cli args…` with the read ends of its stdout and stderr dropped before it writes.
async fn with_closed_pipes(sandbox: &Sandbox, args: &[&str]) -> ExitStatus {
    let mut command = sandbox.command(args);
    command.stdin(Stdio::null());
    let mut child = command.spawn().expect("spawn svc-cli");
    drop(child.stdout.take());
    drop(child.stderr.take());
    child.wait().await.expect("wait for svc-cli")
}

async fn assert_exits(sandbox: &Sandbox, args: &[&str], expected: i32) {
    let status = with_closed_pipes(sandbox, args).await;
    assert_ne!(status.code(), Some(101), "{args:?} panicked");
    assert_eq!(status.code(), Some(expected), "{args:?}: {status}");
}

#[tokio::test]
async fn listings_notes_and_errors_into_closed_pipes_exit_with_their_usual_code() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    let sandbox = Sandbox::for_server(&server);
    let list = ["calls", "list", "--source", "roleplay", "--from", FROM];
    // Data on stdout, then notes on stderr ("1 call(s)").
    assert_exits(&sandbox, &list, 0).await;
    assert_exits(&sandbox, &[&["--json"][..], &list].concat(), 0).await;
    assert_exits(&sandbox, &["calls", "show", ROLEPLAY_CALL_ID], 0).await;
    // A note only.
    let register = [
        "agents",
        "register",
        "--first-name",
        "Ada",
        "--last-name",
        "Piped",
        "--platform-agent-id",
        "rep-piped",
        "--platform-agency-id",
        "acme-1",
    ];
    assert_exits(&sandbox, &register, 0).await;
    assert_exits(&sandbox, &["config", "show"], 0).await;
    assert_exits(&sandbox, &["completions", "bash"], 0).await;
    // The error message: CALL_NOT_FOUND is exit 1, a usage error 2.
    assert_exits(&sandbox, &["calls", "show", "svc_call_missing"], 1).await;
    assert_exits(&sandbox, &["calls", "show", "not-a-call-id"], 2).await;
}

#[tokio::test]
async fn webhook_verify_into_closed_pipes_exits_with_its_usual_code() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/webhooks");
    let header = std::fs::read_to_string(fixtures.join("example.sig")).expect("example.sig");
    let body = fixtures.join("example.json");
    let body = body.to_str().expect("utf-8 path");
    let sandbox = Sandbox::new();
    // Valid: the event on stdout and a note on stderr; invalid: the reason on stderr.
    for (secret, code) in [("whsec_fixture", 0), ("whsec_another", 1)] {
        let args = [
            "webhook",
            "verify",
            "--secret",
            secret,
            "--signature",
            header.trim_end(),
            "--body-file",
            body,
            "--now",
            "1767225600",
        ];
        assert_exits(&sandbox, &args, code).await;
    }
}
