//! Issue 25 through the real binary: nothing is written through a link planted where a file is
//! written (`store report --out`, `config set`, the reconcile lock, `demo --keep`).

use std::os::unix::fs::symlink;

use svc_fixtures::happy;
use wiremock::MockServer;

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
    svc_reconcile::store::Store::open_or_create(sandbox.path("calls.db")).expect("a store");
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
