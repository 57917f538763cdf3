//! Configuration: precedence flag > env > profile, `config set` writes 0600, the key never shows,
//! a config file named explicitly must exist unless `config set` is creating it.

use std::path::Path;

use crate::helpers::{Sandbox, read};

const FILE: &str = r#"
[profiles.default]
base_url = "http://127.0.0.1:1/v1"
api_key = "svc_live_from_default_profile"

[profiles.staging]
base_url = "http://127.0.0.1:2/v1"
api_key = "svc_live_from_staging_profile"
"#;

#[tokio::test]
async fn settings_resolve_flag_over_env_over_profile() {
    let sandbox = Sandbox::new();
    let config = sandbox.write("config.toml", FILE);
    let config = config.to_str().expect("utf-8 path");

    let file_only = sandbox
        .run(&["--json", "--config", config, "config", "show"])
        .await;
    assert_eq!(file_only.code, 0, "{file_only:?}");
    let shown = file_only.json();
    assert_eq!(shown["baseUrl"], "http://127.0.0.1:1/v1");
    assert_eq!(shown["baseUrlSource"], "config profile \"default\"");
    assert_eq!(shown["apiKeySet"], true);

    let staging = sandbox
        .run(&[
            "--json",
            "--config",
            config,
            "--profile",
            "staging",
            "config",
            "show",
        ])
        .await;
    assert_eq!(staging.json()["baseUrl"], "http://127.0.0.1:2/v1");

    let sandbox = Sandbox::new()
        .env("SVC_BASE_URL", "http://127.0.0.1:3/v1")
        .env("SVC_API_KEY", "svc_live_env");
    let config = sandbox.write("config.toml", FILE);
    let config = config.to_str().expect("utf-8 path");
    let env = sandbox
        .run(&["--json", "--config", config, "config", "show"])
        .await;
    assert_eq!(env.json()["baseUrl"], "http://127.0.0.1:3/v1");
    assert_eq!(env.json()["apiKeySource"], "environment");
    let flag = sandbox
        .run(&[
            "--json",
            "--config",
            config,
            "--base-url",
            "http://127.0.0.1:4/v1",
            "config",
            "show",
        ])
        .await;
    assert_eq!(flag.json()["baseUrl"], "http://127.0.0.1:4/v1");
    assert_eq!(flag.json()["baseUrlSource"], "flag");
    for run in [&file_only, &staging, &env, &flag] {
        assert!(!run.stdout.contains("svc_live_"), "a key leaked: {run:?}");
    }
}

#[tokio::test]
async fn an_unknown_profile_named_explicitly_is_a_usage_error() {
    let sandbox = Sandbox::new();
    let config = sandbox.write("config.toml", FILE);
    let run = sandbox
        .run(&[
            "--config",
            config.to_str().expect("path"),
            "--profile",
            "prod",
            "config",
            "show",
        ])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("prod"));
}

#[tokio::test]
async fn config_set_writes_the_key_from_stdin_to_a_0600_file_and_never_prints_it() {
    let sandbox = Sandbox::new();
    let run = sandbox
        .run_with_stdin(
            &[
                "--profile",
                "prod",
                "--base-url",
                "http://127.0.0.1:5/v1",
                "config",
                "set",
                "--api-key-stdin",
            ],
            "svc_live_stdin_secret\n",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("stdin_secret") && !run.stderr.contains("stdin_secret"));
    let path = sandbox.dir.path().join("xdg/svc-cli/config.toml");
    let text = read(&path);
    assert!(
        text.contains("[profiles.prod]") && text.contains("svc_live_stdin_secret"),
        "{text}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }
    let shown = sandbox
        .run(&["--json", "--profile", "prod", "config", "show"])
        .await;
    assert_eq!(shown.json()["baseUrl"], "http://127.0.0.1:5/v1");
    assert_eq!(shown.json()["apiKeySet"], true);
    assert!(!shown.stdout.contains("stdin_secret"));
}

#[tokio::test]
async fn config_set_rejects_a_base_url_without_v1_and_writes_nothing() {
    let sandbox = Sandbox::new();
    let run = sandbox
        .run(&["--base-url", "http://127.0.0.1:5", "config", "set"])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(!sandbox.dir.path().join("xdg/svc-cli/config.toml").exists());
}

#[tokio::test]
async fn a_named_config_file_that_does_not_exist_is_a_usage_error_but_a_missing_default_is_not() {
    let sandbox = Sandbox::new()
        .env("SVC_BASE_URL", "http://127.0.0.1:9/v1")
        .env("SVC_API_KEY", "svc_live_env");
    let missing = sandbox.path("typo.toml");
    let missing = missing.to_str().expect("utf-8 path");

    let by_flag = sandbox
        .run(&["--config", missing, "calls", "show", "svc_call_1"])
        .await;
    assert_eq!(by_flag.code, 2, "{by_flag:?}");
    assert!(
        by_flag.stderr.contains("typo.toml")
            && by_flag.stderr.contains("--config")
            && by_flag.stderr.contains("does not exist"),
        "{by_flag:?}"
    );

    let by_env = Sandbox::new()
        .env("SVC_CONFIG", missing)
        .run(&["config", "show"])
        .await;
    assert_eq!(by_env.code, 2, "{by_env:?}");
    assert!(
        by_env.stderr.contains("typo.toml") && by_env.stderr.contains("SVC_CONFIG"),
        "{by_env:?}"
    );

    let default_absent = sandbox.run(&["--json", "config", "show"]).await;
    assert_eq!(default_absent.code, 0, "{default_absent:?}");
    assert_eq!(default_absent.json()["baseUrl"], "http://127.0.0.1:9/v1");
    assert!(!sandbox.path("xdg/svc-cli/config.toml").exists());
}

#[tokio::test]
async fn config_set_creates_a_file_named_by_flag_or_environment() {
    let sandbox = Sandbox::new();
    let by_flag = sandbox.path("new/by-flag.toml");
    let by_flag = by_flag.to_str().expect("utf-8 path");
    let run = sandbox
        .run(&[
            "--config",
            by_flag,
            "--base-url",
            "http://127.0.0.1:6/v1",
            "config",
            "set",
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let shown = sandbox
        .run(&["--json", "--config", by_flag, "config", "show"])
        .await;
    assert_eq!(shown.code, 0, "{shown:?}");
    assert_eq!(shown.json()["baseUrl"], "http://127.0.0.1:6/v1");

    let by_env = sandbox.path("by-env.toml");
    let by_env = by_env.to_str().expect("utf-8 path");
    let sandbox = sandbox.env("SVC_CONFIG", by_env);
    let run = sandbox
        .run(&["--base-url", "http://127.0.0.1:7/v1", "config", "set"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(read(Path::new(by_env)).contains("http://127.0.0.1:7/v1"));
    let shown = sandbox.run(&["--json", "config", "show"]).await;
    assert_eq!(shown.json()["baseUrl"], "http://127.0.0.1:7/v1");
}

/// A config file that group or others may read or write gets a warning on
/// stderr naming it and its mode, and still works; one of mode 0600 gets none.
#[cfg(unix)]
#[tokio::test]
async fn a_config_file_open_to_group_or_others_is_warned_about_but_still_used() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let config = sandbox.write("config.toml", FILE);
    let path = config.to_str().expect("utf-8 path");
    for mode in [0o644, 0o640, 0o620, 0o604, 0o660] {
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let run = sandbox
            .run(&["--json", "--config", path, "config", "show"])
            .await;
        assert_eq!(run.code, 0, "{mode:o}: {run:?}");
        assert_eq!(run.json()["baseUrl"], "http://127.0.0.1:1/v1");
        let warnings = run.stderr.matches("warning").count();
        assert_eq!(warnings, 1, "{mode:o}: {run:?}");
        assert!(
            run.stderr.contains(path)
                && run.stderr.contains(&format!("{mode:04o}"))
                && run.stderr.contains("chmod 600"),
            "{mode:o}: {run:?}"
        );
    }
    for mode in [0o600, 0o400] {
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let run = sandbox.run(&["--config", path, "config", "show"]).await;
        assert_eq!(run.code, 0, "{mode:o}: {run:?}");
        assert!(!run.stderr.contains("warning"), "{mode:o}: {run:?}");
    }
}

#[cfg(unix)]
#[tokio::test]
async fn config_set_writes_mode_0600_even_without_a_key() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let run = sandbox
        .run(&["--base-url", "http://127.0.0.1:5/v1", "config", "set"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let path = sandbox.dir.path().join("xdg/svc-cli/config.toml");
    let mode = std::fs::metadata(&path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let shown = sandbox.run(&["config", "show"]).await;
    assert!(!shown.stderr.contains("warning"), "{shown:?}");
}
