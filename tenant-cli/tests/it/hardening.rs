//! Hardening, through the real binary: nothing is written through a link planted where a file is
//! written (`store report --out`, `config set`, the reconcile lock, `demo --keep`), text from
//! the service cannot drive the terminal, a console beyond loopback is refused unless asked
//! for, and a secret file others can read gets a warning.

use std::os::unix::fs::symlink;
use std::time::Duration;

use serde_json::json;
use svc_fixtures::{bodies, happy, respond};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

use crate::helpers::Sandbox;

/// What the planted link points at: also a valid (empty) config file.
const VICTIM: &str = "# precious\n";

/// A file outside the sandbox's control, and a link to it at `name` in the sandbox.
fn planted(sandbox: &Sandbox, name: &str) -> std::path::PathBuf {
    let victim = sandbox.write("victim.txt", VICTIM);
    symlink(&victim, sandbox.path(name)).expect("plant a link");
    victim
}

#[tokio::test]
async fn store_report_replaces_a_link_at_its_out_path_and_leaves_no_temporary_file() {
    let sandbox = Sandbox::new();
    svc_store::Store::open_or_create(sandbox.path("calls.db")).expect("a store");
    // A link at a guessable temporary name is the unit test's (`report::tests`).
    let victim = planted(&sandbox, "report.html");
    let run = sandbox
        .run(&[
            "store",
            "report",
            "--store",
            "calls.db",
            "--out",
            "report.html",
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), VICTIM);
    let out = std::fs::symlink_metadata(sandbox.path("report.html")).expect("the report");
    assert!(out.is_file(), "the link was replaced by the report itself");
    let leftovers: Vec<_> = std::fs::read_dir(sandbox.dir.path())
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[tokio::test]
async fn config_set_never_writes_the_key_through_a_link_at_its_old_temp_name_or_the_file() {
    let sandbox = Sandbox::new();
    let set = [
        "--base-url",
        "http://127.0.0.1:5/v1",
        "config",
        "set",
        "--api-key-stdin",
    ];
    let key = "svc_live_secret_for_link_test\n";
    let dir = sandbox.path("xdg/svc-cli");
    std::fs::create_dir_all(&dir).expect("config dir");
    let victim = sandbox.write("victim.txt", VICTIM);
    symlink(&victim, dir.join("config.toml.tmp")).expect("link at the old temp name");
    let run = sandbox.run_with_stdin(&set, key).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        VICTIM,
        "the key was not written into the link's target"
    );
    std::fs::remove_file(dir.join("config.toml")).expect("remove the config");
    symlink(&victim, dir.join("config.toml")).expect("link at the config file");
    let run = sandbox.run_with_stdin(&set, key).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), VICTIM);
    let config = std::fs::symlink_metadata(dir.join("config.toml")).expect("config");
    assert!(
        config.is_file(),
        "a config file of its own replaced the link"
    );
}

#[tokio::test]
async fn reconcile_refuses_a_link_at_the_lock_path_and_leaves_its_target_untouched() {
    let server = MockServer::start().await;
    happy::mount(&server).await;
    let sandbox = Sandbox::for_server(&server);
    let victim = planted(&sandbox, "calls.db.lock");
    let run = sandbox
        .run(&["reconcile", "--store", "calls.db", "--retry-base-ms", "1"])
        .await;
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("symbolic link"), "{run:?}");
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), VICTIM);
}

#[tokio::test]
async fn demo_keep_never_writes_its_roster_through_a_link() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.path("kept")).expect("kept");
    let victim = planted(&sandbox, "kept/roster.csv");
    let run = sandbox
        .run(&["demo", "--calls", "6", "--keep", "kept", "--json"])
        .await;
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), VICTIM);
    assert!(
        std::fs::symlink_metadata(sandbox.path("kept/roster.csv"))
            .expect("roster")
            .is_file()
    );
}

/// A call whose transcript, summary and agent carry terminal escapes.
fn hostile_call() -> serde_json::Value {
    let mut call = bodies::call_real_call();
    call["transcript"][0]["content"] = json!("\u{1b}]0;pwned\u{7}Hi\u{0}\r\u{1b}[2J");
    call["score"]["summary"] = json!("\u{1b}[31mred\u{1b}[0m");
    call["platformAgentId"] = json!("rep\u{1b}[8m");
    call
}

#[tokio::test]
async fn calls_show_escapes_control_characters_and_json_keeps_them_exact() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/calls/{}", bodies::REAL_CALL_ID)))
        .respond_with(respond::json(200, hostile_call()))
        .mount(&server)
        .await;
    let sandbox = Sandbox::for_server(&server);
    let run = sandbox.run(&["calls", "show", bodies::REAL_CALL_ID]).await;
    assert_eq!(run.code, 0, "{run:?}");
    for raw in ['\u{1b}', '\u{7}', '\u{0}', '\r'] {
        assert!(
            !run.stdout.contains(raw),
            "{raw:?} printed raw:\n{}",
            run.stdout
        );
    }
    assert!(
        run.stdout
            .contains("\\u{1b}]0;pwned\\u{7}Hi\\u{0}\\u{d}\\u{1b}[2J"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("\\u{1b}[31mred"), "{}", run.stdout);
    let json = sandbox
        .run(&["--json", "calls", "show", bodies::REAL_CALL_ID])
        .await;
    assert_eq!(json.code, 0, "{json:?}");
    let call = json.json();
    assert_eq!(
        call["transcript"][0]["content"],
        hostile_call()["transcript"][0]["content"]
    );
    assert_eq!(call["score"]["summary"], hostile_call()["score"]["summary"]);
}

#[tokio::test]
async fn a_console_beyond_loopback_is_refused_unless_allowed_and_then_warned_about() {
    let sandbox = Sandbox::new();
    let refused = tokio::time::timeout(
        Duration::from_secs(60),
        sandbox.run(&[
            "sandbox",
            "--listen",
            "127.0.0.1:0",
            "--db",
            "sandbox.db",
            "--console-listen",
            "0.0.0.0:0",
        ]),
    )
    .await
    .expect("refused at once, not served");
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused.stderr.contains("not a loopback address")
            && refused.stderr.contains("--console-allow-remote"),
        "{refused:?}"
    );
    assert!(!sandbox.path("sandbox.db").exists(), "nothing started");

    let mut child = sandbox
        .command(&[
            "sandbox",
            "--listen",
            "127.0.0.1:0",
            "--db",
            "sandbox.db",
            "--console-listen",
            "0.0.0.0:0",
            "--console-allow-remote",
        ])
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the sandbox");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let warning = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("read stderr") {
            if line.contains("WARNING") {
                return line;
            }
        }
        panic!("the sandbox exited without a warning");
    })
    .await
    .expect("a warning at start");
    assert!(
        warning.contains("0.0.0.0") && warning.contains("reachable from other machines"),
        "{warning}"
    );
    child.start_kill().expect("stop the sandbox");
}

#[tokio::test]
async fn a_secret_file_others_can_read_gets_a_warning_and_a_private_one_none() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let secret = sandbox.write("secret", "whsec_0123456789abcdef0123456789abcdef\n");
    let body = sandbox.write("event.json", "{}");
    let (secret_arg, body_arg) = (secret.display().to_string(), body.display().to_string());
    let sign = [
        "webhook",
        "sign",
        "--secret-file",
        secret_arg.as_str(),
        "--body-file",
        body_arg.as_str(),
    ];
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let open = sandbox.run(&sign).await;
    assert_eq!(open.code, 0, "{open:?}");
    assert!(
        open.stderr.contains("warning") && open.stderr.contains("chmod 600"),
        "{open:?}"
    );
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let private = sandbox.run(&sign).await;
    assert_eq!(private.code, 0, "{private:?}");
    assert!(!private.stderr.contains("warning"), "{private:?}");
}

#[tokio::test]
async fn webhook_serve_warns_about_a_secret_file_others_can_read() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let secret = sandbox.write("secret", "whsec_0123456789abcdef0123456789abcdef\n");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let started = svc_test_support::webhook_serve::start(
        &mut sandbox.command(&[
            "webhook",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "calls.db",
            "--secret-file",
            "secret",
        ]),
        Duration::from_secs(60),
    )
    .await;
    let (mut child, seen) = (started.child, started.early);
    assert!(
        seen.iter()
            .any(|l| l.contains("secret file") && l.contains("0640") && l.contains("chmod 600")),
        "{seen:?}"
    );
    child.start_kill().expect("stop");
}
