//! The cron line and systemd units of `OPERATIONS.md`, as an operator pastes them: the cron
//! line run as cron runs it (`/bin/sh -c` under `env -i` with cron's `PATH`,
//! the binary and the paths swapped for the test's), and the units checked for what an operator
//! trips on and by `systemd-analyze verify` where systemd is installed (a visible skip line
//! otherwise).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use svc_fixtures::calls::ROLEPLAY;

use crate::reconcile::{fake, hours_ago};

const OPERATIONS: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/OPERATIONS.md"));

/// The PATH cron gives a job (Debian's and most crons').
const CRON_PATH: &str = "/usr/bin:/bin";

/// The fenced block of `OPERATIONS.md` that starts with "```{lang}" and contains `marker`.
fn block(lang: &str, marker: &str) -> String {
    let fence = format!("```{lang}\n");
    OPERATIONS
        .split(&fence)
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .find(|body| body.contains(marker))
        .unwrap_or_else(|| panic!("no ```{lang} block with {marker:?} in OPERATIONS.md"))
        .to_owned()
}

/// The crontab line (the one line of its cron block that is not a comment).
fn cron_line() -> String {
    let block = block("cron", "reconcile");
    let lines: Vec<&str> = block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(lines.len(), 1, "one crontab line: {block}");
    lines[0].to_owned()
}

/// The command of a user crontab line: what follows the five schedule fields.
fn command_of(line: &str) -> &str {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        let end = rest
            .find(char::is_whitespace)
            .expect("five schedule fields");
        let field = &rest[..end];
        assert!(
            field
                .chars()
                .all(|c| c.is_ascii_digit() || "*/,-".contains(c)),
            "{field:?} is not a schedule field: {line}"
        );
        rest = &rest[end..];
    }
    rest.trim_start()
}

#[test]
fn the_cron_line_is_a_user_crontab_line_naming_the_binary_by_its_absolute_path() {
    let line = cron_line();
    let command = command_of(&line);
    // Leading words are variable assignments, then the program: a bare word here is either the
    // user field (only /etc/crontab and /etc/cron.d have one) or a program cron's PATH lacks.
    let program = command
        .split_whitespace()
        .find(|word| !word.contains('='))
        .expect("a program");
    assert!(
        program.starts_with('/'),
        "the program is an absolute path, not {program:?} (a user field, or a PATH lookup \
         that fails under cron's PATH={CRON_PATH}): {line}"
    );
    assert!(
        command.contains("--metrics-file "),
        "the alerts need it: {line}"
    );
    assert!(command.contains("--json"), "{line}");
}

#[tokio::test]
async fn the_cron_line_runs_as_cron_runs_it_and_logs_one_report_per_line() {
    let fake = fake().await;
    fake.calls.add_many(ROLEPLAY, [hours_ago(2), hours_ago(3)]);
    let dir = fake.sandbox.dir.path();
    for sub in ["state", "textfile", "log"] {
        std::fs::create_dir_all(dir.join(sub)).expect("dir");
    }
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[profiles.default]\nbase_url = \"{}\"\napi_key = \"{}\"\n",
            svc_fixtures::base_url(&fake.server),
            svc_fixtures::API_KEY
        ),
    )
    .expect("config");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).expect("chmod");

    let line = cron_line();
    let mut command = command_of(&line).to_owned();
    let at = |p: &Path| format!("{}/", p.display());
    for (pasted, here) in [
        (
            "/usr/local/bin/svc-cli",
            env!("CARGO_BIN_EXE_svc-cli").to_owned(),
        ),
        ("/etc/svc-cli/config.toml", config.display().to_string()),
        ("/var/lib/svc/", at(&dir.join("state"))),
        (
            "/var/lib/node_exporter/textfile/",
            at(&dir.join("textfile")),
        ),
        ("/var/log/svc/", at(&dir.join("log"))),
    ] {
        assert!(command.contains(pasted), "{pasted} in {line}");
        command = command.replace(pasted, &here);
    }
    for system in ["/usr/local/", "/etc/", "/var/"] {
        assert!(!command.contains(system), "every path swapped: {command}");
    }
    for run in 1..=2 {
        let out = Command::new("/usr/bin/env")
            .args([
                "-i",
                &format!("PATH={CRON_PATH}"),
                "SHELL=/bin/sh",
                "LOGNAME=svc",
            ])
            .arg(format!("HOME={}", dir.display()))
            .args(["/bin/sh", "-c", &command])
            .current_dir(dir)
            .output()
            .expect("run /bin/sh");
        assert!(
            out.status.success(),
            "run {run}: {out:?}\n{}",
            std::fs::read_to_string(dir.join("log/reconcile.err")).unwrap_or_default()
        );
    }
    let err = std::fs::read_to_string(dir.join("log/reconcile.err")).expect("the error log");
    assert_eq!(err, "", "nothing went wrong");
    let log = std::fs::read_to_string(dir.join("log/reconcile.jsonl")).expect("the log");
    let reports: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(reports.len(), 2, "one report per line, per run: {log}");
    assert_eq!(reports[0]["totals"]["new"], 2);
    assert_eq!(reports[1]["exitCode"], 0);
    let figures = std::fs::read_to_string(dir.join("textfile/svc_reconcile.prom"))
        .expect("the metrics file the alerts read");
    assert!(
        figures.contains("svc_cli_reconcile_last_success_timestamp_seconds{source=\"roleplay\"}"),
        "{figures}"
    );
    assert!(dir.join("state/calls.db").is_file());
}

/// The units: (file name, text) of each, split on their `# /etc/systemd/system/…`
/// comment lines.
fn units() -> Vec<(String, String)> {
    let block = block("ini", "svc-reconcile.service");
    let mut units: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        if let Some(path) = line.strip_prefix("# /etc/systemd/system/") {
            units.push((path.trim().to_owned(), String::new()));
        } else if let Some((_, text)) = units.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    assert_eq!(units.len(), 2, "a service and a timer: {block}");
    units
}

/// `(section, line)` of each line of a unit.
fn sectioned(text: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut lines = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with('[') {
            section = line.to_owned();
        } else {
            lines.push((section.clone(), line.to_owned()));
        }
    }
    lines
}

#[test]
fn the_service_unit_has_on_failure_in_unit_a_state_directory_and_the_metrics_file() {
    let (name, service) = units().remove(0);
    assert_eq!(name, "svc-reconcile.service");
    let lines = sectioned(&service);
    let in_section = |key: &str| -> Vec<(String, String)> {
        lines
            .iter()
            .filter(|(_, l)| l.trim_start_matches(['#', ' ']).starts_with(key))
            .cloned()
            .collect()
    };
    let on_failure = in_section("OnFailure=");
    assert!(!on_failure.is_empty(), "OnFailure= is shown: {service}");
    assert!(
        on_failure.iter().all(|(s, _)| s == "[Unit]"),
        "OnFailure= belongs in [Unit] (systemd ignores it in [Service]): {on_failure:?}"
    );
    let state = in_section("StateDirectory=");
    assert_eq!(state.len(), 1, "{service}");
    assert_eq!(state[0].0, "[Service]");
    let dir = state[0].1.trim_start_matches("StateDirectory=").trim();
    let exec = in_section("ExecStart=");
    assert_eq!(exec.len(), 1, "{service}");
    let exec = exec[0].1.trim_start_matches("ExecStart=");
    assert!(exec.starts_with('/'), "{exec}");
    assert!(
        exec.contains(&format!("--store /var/lib/{dir}/")),
        "the store, its lock, -wal and -shm live in the state directory: {exec}"
    );
    assert!(
        exec.contains("--metrics-file "),
        "the alerts need it: {exec}"
    );
    assert_eq!(in_section("User=").len(), 1, "{service}");
}

#[test]
fn the_units_pass_systemd_analyze_verify() {
    let test = "the_units_pass_systemd_analyze_verify";
    let Some(analyze) = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file())
    else {
        svc_test_support::skip::announce(
            test,
            "systemd-analyze is not installed (Debian: systemd); the units' structure is \
             still checked",
        );
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut paths = Vec::new();
    for (name, text) in units() {
        // verify checks that ExecStart= names an executable file.
        let text = text.replace("/usr/local/bin/svc-cli", env!("CARGO_BIN_EXE_svc-cli"));
        let path = dir.path().join(&name);
        std::fs::write(&path, text).expect("write the unit");
        paths.push(path);
    }
    let out = Command::new(analyze)
        .args(["verify", "--man=no"])
        .args(&paths)
        .output()
        .expect("run systemd-analyze");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    // verify exits 0 on an unknown or misplaced key, with a warning: none is allowed.
    assert_eq!(said.trim(), "", "systemd-analyze verify is silent");
}
