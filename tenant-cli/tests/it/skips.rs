//! A test that cannot run here (no PostgreSQL, no Chromium, no systemd) passes without running;
//! its skip line must show in a plain `cargo test` run, not vanish into the harness's capture
//! of a passing test's output. Checked by running this test binary itself, as `cargo test`
//! does (no `--nocapture`), on one skipping test of each kind.

use std::process::Command;

use svc_test_support::skip::MARK;

/// Runs the test `name` of this binary alone, with the environment `env` changes; returns its
/// exit status's success and everything it printed.
fn run_alone(name: &str, unset: &[&str], set: &[(&str, &str)]) -> (bool, String) {
    let exe = std::env::current_exe().expect("this test binary");
    let mut command = Command::new(exe);
    command.args(["--exact", name, "--test-threads", "1"]);
    for var in unset {
        command.env_remove(var);
    }
    command.envs(set.iter().copied());
    let out = command.output().expect("run the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn a_browser_test_without_chromium_says_it_skipped_in_a_normal_run() {
    let (ok, text) = run_alone(
        "browser::report::the_demo_report_renders_its_charts_offline_with_no_console_errors",
        &["SVC_REQUIRE_BROWSER"],
        &[
            ("CHROME_BIN", "/nonexistent/chromium"),
            ("CHROMEDRIVER", "/nonexistent/chromedriver"),
        ],
    );
    assert!(ok, "{text}");
    assert!(text.contains("1 passed"), "the test ran: {text}");
    // A fresh machine has neither: the line names both, whichever it lists first.
    let line = text
        .lines()
        .find(|line| line.contains(&format!("{MARK} browser test report:")))
        .unwrap_or_else(|| panic!("no skip line: {text}"));
    assert!(line.contains("Chromium (Debian: chromium)"), "{line}");
    assert!(
        line.contains("chromedriver (Debian: chromium-driver)"),
        "{line}"
    );
}

#[test]
fn a_browser_test_with_only_chromedriver_missing_names_it() {
    let (ok, text) = run_alone(
        "browser::report::the_demo_report_renders_its_charts_offline_with_no_console_errors",
        &["SVC_REQUIRE_BROWSER"],
        &[("CHROMEDRIVER", "/nonexistent/chromedriver")],
    );
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!("{MARK} browser test report: chromedriver")),
        "{text}"
    );
}

#[test]
fn a_postgres_test_without_a_server_says_it_skipped_in_a_normal_run() {
    let (ok, text) = run_alone(
        "postgres::three_receiver_processes_share_one_queue_and_handle_each_delivery_once",
        &["SVC_TEST_POSTGRES_URL", "SVC_REQUIRE_POSTGRES"],
        &[],
    );
    assert!(ok, "{text}");
    assert!(text.contains("1 passed"), "the test ran: {text}");
    assert!(
        text.contains(MARK) && text.contains("no PostgreSQL"),
        "{text}"
    );
}
