//! The operator CLI, run as the real binary against the database of a running server:
//! every change applies at the server's next request.

use std::path::Path;

use reqwest::Method;
use serde_json::Value;

use crate::helpers::{TestApp, spawn_app};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn svc(db: &Path, args: &[&str]) -> Run {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-service"))
        .args(args)
        .arg("--db")
        .arg(db)
        .env_remove("SVC_DB")
        .env("RUST_LOG", "warn")
        .output()
        .await
        .expect("run svc-service");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

async fn svc_json(db: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let run = svc(db, &all).await;
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    serde_json::from_str(&run.stdout).expect("JSON on stdout")
}

async fn status_with(app: &TestApp, key: &str) -> u16 {
    app.send(Method::GET, "/v1/agents", Some(key), None)
        .await
        .status
        .as_u16()
}

#[tokio::test]
async fn tenant_create_prints_credentials_once_and_stores_the_key_only_hashed() {
    let app = spawn_app().await;
    let db = app.config.db_path.clone();
    let created = svc_json(
        &db,
        &[
            "tenant",
            "create",
            "--name",
            " Acme ",
            "--webhook-url",
            "https://hooks.example/in",
            "--allow-ip",
            "127.0.0.0/8",
            "--monthly-allowance-minutes",
            "600",
        ],
    )
    .await;
    let key = created["apiKey"].as_str().expect("apiKey");
    let secret = created["signingSecret"].as_str().expect("signingSecret");
    let tenant_id = created["tenantId"].as_str().expect("tenantId");
    assert!(key.starts_with("svc_live_") && secret.starts_with("whsec_"));
    assert_eq!(
        status_with(&app, key).await,
        200,
        "the key works on the running server"
    );

    let record = app
        .db
        .tenant(tenant_id)
        .await
        .expect("read")
        .expect("tenant");
    assert_eq!(record.name, "Acme");
    assert_eq!(record.signing_secret.expose(), secret);
    assert_eq!(
        record.webhook_url.as_deref(),
        Some("https://hooks.example/in")
    );
    assert_eq!(record.monthly_allowance_minutes, Some(600));
    assert!(
        !format!("{record:?}").contains(secret),
        "Debug hides the signing secret"
    );

    let listed = svc(&db, &["tenant", "list", "--json"]).await;
    assert_eq!(listed.code, 0);
    assert!(listed.stdout.contains(tenant_id));
    assert!(!listed.stdout.contains(key) && !listed.stdout.contains(secret));
    let human = svc(&db, &["tenant", "list"]).await;
    assert!(human.stdout.contains("Acme") && !human.stdout.contains(key));

    // Nothing on disk holds the clear key.
    let dir = db.parent().expect("dir");
    for entry in std::fs::read_dir(dir).expect("dir").flatten() {
        let bytes = std::fs::read(entry.path()).unwrap_or_default();
        let needle = key.as_bytes();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "{:?}",
            entry.path()
        );
    }
    app.shutdown().await;
}

#[tokio::test]
async fn key_and_activation_commands_apply_at_the_next_request() {
    let app = spawn_app().await;
    let db = app.config.db_path.clone();
    let created = svc_json(&db, &["tenant", "create", "--name", "T"]).await;
    let id = created["tenantId"].as_str().expect("id").to_owned();
    let key = created["apiKey"].as_str().expect("key").to_owned();

    svc_json(&db, &["tenant", "deactivate", "--tenant", &id]).await;
    app.send(Method::GET, "/v1/agents", Some(&key), None)
        .await
        .expect_error(403, "TENANT_INACTIVE");
    svc_json(&db, &["tenant", "activate", "--tenant", &id]).await;
    assert_eq!(status_with(&app, &key).await, 200);

    let revoked = svc_json(&db, &["tenant", "revoke-key", "--tenant", &id]).await;
    assert_eq!(revoked["revokedKeys"], 1);
    app.send(Method::GET, "/v1/agents", Some(&key), None)
        .await
        .expect_error(401, "API_KEY_REVOKED");
    let issued = svc_json(&db, &["tenant", "issue-key", "--tenant", &id]).await;
    let fresh = issued["apiKey"].as_str().expect("key");
    assert!(fresh.starts_with("svc_live_") && fresh != key);
    assert_eq!(status_with(&app, fresh).await, 200);

    svc_json(
        &db,
        &[
            "tenant",
            "set-allowlist",
            "--tenant",
            &id,
            "--allow-ip",
            "10.1.2.3",
        ],
    )
    .await;
    app.send(Method::GET, "/v1/agents", Some(fresh), None)
        .await
        .expect_error(403, "IP_NOT_ALLOWED");
    let cleared = svc_json(&db, &["tenant", "set-allowlist", "--tenant", &id]).await;
    assert_eq!(cleared["ipAllowlist"], serde_json::json!([]));
    assert_eq!(status_with(&app, fresh).await, 200);
    app.shutdown().await;
}

#[tokio::test]
async fn webhook_secret_and_allowance_commands_update_the_tenant() {
    let app = spawn_app().await;
    let db = app.config.db_path.clone();
    let created = svc_json(&db, &["tenant", "create", "--name", "T"]).await;
    let id = created["tenantId"].as_str().expect("id").to_owned();

    let http = svc(
        &db,
        &[
            "tenant",
            "set-webhook",
            "--tenant",
            &id,
            "--url",
            "http://127.0.0.1:9/x",
        ],
    )
    .await;
    assert_eq!(http.code, 1);
    assert!(http.stderr.contains("HTTPS"), "{}", http.stderr);
    let allowed = svc_json(
        &db,
        &[
            "tenant",
            "set-webhook",
            "--tenant",
            &id,
            "--url",
            "http://127.0.0.1:9/x",
            "--allow-http-webhooks",
        ],
    )
    .await;
    assert_eq!(allowed["webhookUrl"], "http://127.0.0.1:9/x");
    let https = svc_json(
        &db,
        &[
            "tenant",
            "set-webhook",
            "--tenant",
            &id,
            "--url",
            "https://h.example/w",
        ],
    )
    .await;
    assert_eq!(https["webhookUrl"], "https://h.example/w");
    let cleared = svc_json(&db, &["tenant", "set-webhook", "--tenant", &id, "--clear"]).await;
    assert_eq!(cleared["webhookUrl"], Value::Null);

    let rotated = svc_json(&db, &["tenant", "rotate-secret", "--tenant", &id]).await;
    let secret = rotated["signingSecret"].as_str().expect("secret");
    assert!(secret.starts_with("whsec_") && secret != created["signingSecret"]);
    let record = app.db.tenant(&id).await.expect("read").expect("tenant");
    assert_eq!(record.signing_secret.expose(), secret);

    let limited = svc_json(
        &db,
        &[
            "tenant",
            "set-allowance",
            "--tenant",
            &id,
            "--monthly-allowance-minutes",
            "90",
        ],
    )
    .await;
    assert_eq!(limited["monthlyAllowanceMinutes"], 90);
    let unlimited = svc_json(
        &db,
        &["tenant", "set-allowance", "--tenant", &id, "--unlimited"],
    )
    .await;
    assert_eq!(unlimited["monthlyAllowanceMinutes"], Value::Null);
    app.shutdown().await;
}

#[tokio::test]
async fn operator_mistakes_exit_non_zero_with_a_clear_message() {
    let app = spawn_app().await;
    let db = app.config.db_path.clone();
    let unknown = svc(&db, &["tenant", "deactivate", "--tenant", "ten_nope"]).await;
    assert_eq!(unknown.code, 1);
    assert!(unknown.stderr.contains("no tenant"), "{}", unknown.stderr);
    let bad_ip = svc(
        &db,
        &["tenant", "create", "--name", "T", "--allow-ip", "not-an-ip"],
    )
    .await;
    assert_eq!(bad_ip.code, 1);
    assert!(bad_ip.stderr.contains("not-an-ip"));
    let bad_url = svc(
        &db,
        &[
            "tenant",
            "create",
            "--name",
            "T",
            "--webhook-url",
            "ftp://x",
        ],
    )
    .await;
    assert_eq!(bad_url.code, 1);
    let blank = svc(&db, &["tenant", "create", "--name", "  "]).await;
    assert_eq!(blank.code, 1);
    let usage = svc(&db, &["tenant", "set-allowance", "--tenant", "x"]).await;
    assert_eq!(usage.code, 2);
    let negative = svc(
        &db,
        &[
            "tenant",
            "create",
            "--name",
            "T",
            "--monthly-allowance-minutes",
            "-5",
        ],
    )
    .await;
    assert_eq!(negative.code, 2);
    // None of the failed creates stored a tenant.
    let listed = svc_json(&db, &["tenant", "list"]).await;
    assert_eq!(listed, serde_json::json!([]));
    app.shutdown().await;
}
