//! `svc-cli webhook sign`: the header it prints verifies, and its curl
//! command delivers a body that a receiver accepts once.

use std::sync::Arc;

use axum::Router;
use svc_contract::{Keyring, SigningSecret, Verifier, sign};
use svc_receiver::Received;
use svc_receiver::axum::{WebhookReceiver, webhook_route};
use svc_receiver::dedup::MemoryDedupStore;
use tokio::sync::mpsc;

use crate::helpers::Sandbox;

const SECRET: &str = "whsec_sign_test_0123456789";
const T: i64 = 1_767_225_600;

fn body() -> String {
    r#"{"event":"call.scored","success":true,"callId":"svc_call_signed","source":"roleplay","agentId":"svc_agent_1","agencyId":"svc_agency_1","platformAgentId":null,"platformAgencyId":null,"occurredAt":"2026-01-01T00:00:00Z","requestId":"req_1"}"#.to_owned()
}

#[tokio::test]
async fn the_printed_header_is_the_services_signature_of_the_body() {
    let sandbox = Sandbox::new().env("WH", SECRET);
    let file = sandbox.write("body.json", body());
    let file = file.to_str().expect("utf-8 path");
    let run = sandbox
        .run(&[
            "webhook",
            "sign",
            "--secret-env",
            "WH",
            "--body-file",
            file,
            "--t",
            &T.to_string(),
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.trim_end(), sign(SECRET, T, body().as_bytes()));
    assert!(!run.stdout.contains(SECRET) && !run.stderr.contains(SECRET));

    let secret_file = sandbox.write("secret", format!("{SECRET}\n"));
    let json = sandbox
        .run(&[
            "--json",
            "webhook",
            "sign",
            "--secret-file",
            secret_file.to_str().expect("utf-8 path"),
            "--body-file",
            file,
            "--t",
            &T.to_string(),
            "--webhook-id",
            "wh_given",
        ])
        .await;
    assert_eq!(json.code, 0, "{json:?}");
    let printed = json.json();
    assert_eq!(printed["signature"], sign(SECRET, T, body().as_bytes()));
    assert_eq!(
        (printed["t"].as_i64(), printed["webhookId"].as_str()),
        (Some(T), Some("wh_given"))
    );
}

#[tokio::test]
async fn usage_errors_exit_2_and_never_show_the_secret() {
    let sandbox = Sandbox::new().env("WH", "not_a_whsec_value");
    let file = sandbox.write("body.json", body());
    let file = file.to_str().expect("utf-8 path");
    for args in [
        vec!["webhook", "sign", "--secret-env", "WH", "--body-file", file],
        vec![
            "webhook",
            "sign",
            "--secret-env",
            "UNSET",
            "--body-file",
            file,
        ],
        vec!["webhook", "sign", "--body-file", file],
        vec![
            "webhook",
            "sign",
            "--secret-env",
            "WH",
            "--body-file",
            "missing.json",
        ],
    ] {
        let run = sandbox.run(&args).await;
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(!run.stderr.contains("not_a_whsec_value"), "{run:?}");
    }
}

#[tokio::test]
async fn the_curl_command_delivers_the_body_to_a_receiver() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        svc_test_support::skip::announce(
            "the_curl_command_delivers_the_body_to_a_receiver",
            "curl is not installed",
        );
        return;
    }
    let (tx, mut events) = mpsc::unbounded_channel();
    let handler = move |received: Received| {
        let tx = tx.clone();
        async move {
            let _ = tx.send((received.webhook_id.to_string(), received.event.call_id));
            Ok::<(), String>(())
        }
    };
    let verifier = Verifier::new(Keyring::single(SigningSecret::new(SECRET).expect("secret")));
    let receiver = WebhookReceiver::new(verifier, Arc::new(MemoryDedupStore::default()), handler);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/webhooks", listener.local_addr().expect("addr"));
    let app = Router::new().route("/webhooks", webhook_route(receiver));
    tokio::spawn(async move { axum::serve(listener, app).await });

    let sandbox = Sandbox::new().env("WH", SECRET);
    let file = sandbox.write("body.json", body());
    let run = sandbox
        .run(&[
            "webhook",
            "sign",
            "--secret-env",
            "WH",
            "--body-file",
            file.to_str().expect("utf-8 path"),
            "--curl",
            &url,
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    // Issue 44: it says what the command is for, and what running it records.
    assert!(
        run.stderr.contains("The command tests your own receiver")
            && run
                .stderr
                .contains("Running it records a delivery of svc_call_signed"),
        "{run:?}"
    );
    let command = run.stdout.trim_end().to_owned();
    let delivered = tokio::process::Command::new("sh")
        .args(["-c", &command])
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("all_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .await
        .expect("run the curl command");
    let answer = String::from_utf8_lossy(&delivered.stdout);
    assert!(answer.starts_with("HTTP/1.1 200"), "{command}\n{answer}");
    let (webhook_id, call_id) = events.recv().await.expect("delivered to user code");
    assert_eq!(call_id, "svc_call_signed");
    assert!(webhook_id.starts_with("wh_test_"), "{webhook_id}");
}

/// The documentation writes the secret as `whsec_…`; pasted as is, it must be refused (exit 2)
/// by every command that takes a secret, not used to sign or verify (issue "Every command in
/// the docs works as pasted": "A placeholder is taken as a secret").
#[tokio::test]
async fn the_documentations_placeholder_secret_is_refused_with_exit_2() {
    let sandbox = Sandbox::new()
        .env("SVC_SIGNING_SECRET", "whsec_…")
        .env("ACCENTED", "whsec_sécret")
        .env("GOOD", SECRET);
    let file = sandbox.write("body.json", body());
    let file = file.to_str().expect("utf-8 path");
    let secret_file = sandbox.write("secret", "whsec_…\n");
    let secret_file = secret_file.to_str().expect("utf-8 path");
    let serve = |secret: &'static [&'static str]| {
        let mut args = vec!["webhook", "serve", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(secret);
        args.extend(["--store", "calls.db"]);
        args
    };
    for (args, placeholder) in [
        (
            vec![
                "webhook",
                "sign",
                "--secret-env",
                "SVC_SIGNING_SECRET",
                "--body-file",
                file,
            ],
            true,
        ),
        (
            vec![
                "webhook",
                "sign",
                "--secret-file",
                secret_file,
                "--body-file",
                file,
            ],
            true,
        ),
        (
            vec![
                "webhook",
                "sign",
                "--secret-env",
                "ACCENTED",
                "--body-file",
                file,
            ],
            false,
        ),
        (serve(&["--secret-env", "SVC_SIGNING_SECRET"]), true),
        (
            {
                let mut args = serve(&["--secret-env", "GOOD"]);
                args.extend(["--previous-secret-env", "SVC_SIGNING_SECRET"]);
                args
            },
            true,
        ),
        (
            vec![
                "webhook",
                "verify",
                "--secret",
                "whsec_…",
                "--signature",
                "t=1767225600,v1=00",
                "--body-file",
                file,
            ],
            true,
        ),
    ] {
        let run = sandbox.run(&args).await;
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        let expected = if placeholder {
            "the documentation's placeholder"
        } else {
            "not printable ASCII"
        };
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "nothing signed: {run:?}");
        assert!(!run.stderr.contains("sécret"), "never echoed: {run:?}");
    }
    assert!(
        !sandbox.path("calls.db").exists(),
        "serve stops before creating its store"
    );

    // `webhook serve --secret-file` is checked too (the file is read by svc-receiver).
    let mut args = serve(&[]);
    args.extend(["--secret-file", secret_file]);
    let run = sandbox.run(&args).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("the documentation's placeholder"),
        "{}",
        run.stderr
    );
}
