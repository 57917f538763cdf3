//! What an import does when something outside the file goes wrong: a report path that cannot be
//! written, a key refused part-way, rows that failed only for a temporary reason. The summary is
//! printed in every case, and the exit code says what to do next.

use serde_json::json;
use svc_fixtures::{faults, respond};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer};

use super::{GOOD, import, report_lines_with, roster_sandbox, row_at};
use crate::helpers::{read, received, requests_to};

/// Registering rep-3 (line 4 of `GOOD`) gets the error of contract `code`; other rows go through.
async fn rep_3_gets(server: &MockServer, code: &str) {
    Mock::given(method("POST"))
        .and(path("/v1/agents"))
        .and(body_partial_json(json!({ "platformAgentId": "rep-3" })))
        .respond_with(respond::error(code))
        .with_priority(1)
        .mount(server)
        .await;
}

#[tokio::test]
async fn a_report_path_that_cannot_be_written_fails_with_exit_2_before_anything_is_sent() {
    let (server, roster, sandbox) = roster_sandbox().await;
    let report = sandbox.path("no-such-dir/out.csv");
    let run = import(
        &sandbox,
        GOOD,
        &["--report", report.to_str().expect("path")],
    )
    .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("cannot write report") && run.stderr.contains("no-such-dir"),
        "{run:?}"
    );
    assert!(received(&server).await.is_empty(), "nothing was sent");
    assert!(roster.agents().is_empty());
}

#[tokio::test]
async fn missing_settings_fail_before_the_report_of_an_earlier_run_is_touched() {
    let sandbox = crate::helpers::Sandbox::new();
    let earlier = "line,outcome\n2,registered\n";
    let report = sandbox.write("out.csv", earlier);
    let run = import(
        &sandbox,
        GOOD,
        &["--report", report.to_str().expect("path")],
    )
    .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(read(&report), earlier);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_report_that_fails_while_being_written_still_leaves_the_summary() {
    let (server, roster, sandbox) = roster_sandbox().await;
    // /dev/full opens but every write fails with "no space left on device".
    let run = import(&sandbox, GOOD, &["--json", "--report", "/dev/full"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("cannot write report /dev/full"),
        "{run:?}"
    );
    assert_eq!(run.json()["summary"]["registered"], json!(4), "{run:?}");
    assert_eq!(roster.agents().len(), 4);
    assert_eq!(requests_to(&server, "POST", "/v1/agents").await.len(), 4);
}

#[tokio::test]
async fn a_key_refused_part_way_stops_the_import_and_exits_4() {
    let (server, roster, sandbox) = roster_sandbox().await;
    // The key is refused on the third row; with --jobs 1 rows are sent in file order.
    rep_3_gets(&server, "API_KEY_REVOKED").await;
    let report = sandbox.path("out.csv");
    let run = import(
        &sandbox,
        GOOD,
        &[
            "--json",
            "--jobs",
            "1",
            "--report",
            report.to_str().expect("path"),
        ],
    )
    .await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(
        run.stderr.contains("API_KEY_REVOKED") && run.stderr.contains("1 row(s) not sent"),
        "{run:?}"
    );
    let out = run.json();
    assert_eq!(out["summary"]["registered"], json!(2), "{out}");
    assert_eq!(out["summary"]["failed"], json!(1), "{out}");
    assert_eq!(out["summary"]["not_sent"], json!(1), "{out}");
    assert_eq!(row_at(&out, 4)["outcome"], "failed");
    assert_eq!(row_at(&out, 5)["outcome"], "not_sent");
    assert_eq!(
        requests_to(&server, "POST", "/v1/agents").await.len(),
        3,
        "nothing is sent after the refusal"
    );
    assert_eq!(roster.agents().len(), 2);
    assert_eq!(report_lines_with(&read(&report), "not_sent"), 1);
}

#[tokio::test]
async fn rows_that_all_failed_for_a_temporary_reason_exit_75_and_a_rerun_registers_them() {
    let (server, roster, sandbox) = roster_sandbox().await;
    // POST /agents is never retried on 5xx: each row fails once.
    faults::error(&server, "SERVICE_UNAVAILABLE")
        .route("POST", "/agents")
        .times(4)
        .mount()
        .await;
    let run = import(&sandbox, GOOD, &["--json"]).await;
    assert_eq!(run.code, 75, "{run:?}");
    assert_eq!(run.json()["summary"]["failed"], json!(4), "{run:?}");
    assert!(run.stderr.contains("rerun the same file later"), "{run:?}");
    assert!(roster.agents().is_empty());

    let rerun = import(&sandbox, GOOD, &["--json"]).await;
    assert_eq!(rerun.code, 0, "{rerun:?}");
    assert_eq!(rerun.json()["summary"]["registered"], json!(4));
}

#[tokio::test]
async fn an_agency_still_rate_limited_after_retries_is_a_temporary_failure_of_its_rows() {
    let (server, _roster, sandbox) = roster_sandbox().await;
    faults::rate_limited(&server)
        .route("POST", "/agencies")
        .retry_after(0)
        .times(100)
        .mount()
        .await;
    let run = import(&sandbox, GOOD, &["--json", "--retries", "1"]).await;
    assert_eq!(run.code, 75, "{run:?}");
    assert_eq!(run.json()["summary"]["failed"], json!(4), "{run:?}");
    assert!(requests_to(&server, "POST", "/v1/agents").await.is_empty());
}

#[tokio::test]
async fn a_temporary_failure_mixed_with_a_bad_row_exits_1() {
    let (server, roster, sandbox) = roster_sandbox().await;
    rep_3_gets(&server, "INTERNAL_ERROR").await;
    let csv = format!("{GOOD}acme-1,Acme Insurance,No,Handle,,,\n");
    let run = import(&sandbox, csv, &["--json"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    let out = run.json();
    assert_eq!(out["summary"]["failed"], json!(1), "{out}");
    assert_eq!(out["summary"]["invalid"], json!(1), "{out}");
    assert_eq!(roster.agents().len(), 3);
}

#[tokio::test]
async fn the_import_help_lists_its_exit_codes() {
    let run = crate::helpers::Sandbox::new()
        .run(&["roster", "import", "--help"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    for code in ["  0 ", "  1 ", "  2 ", "  4 ", "  75 "] {
        assert!(
            run.stdout.contains(code),
            "missing {code:?} in {}",
            run.stdout
        );
    }
    assert!(
        run.stdout.contains("rerun the same file later"),
        "{}",
        run.stdout
    );
}
