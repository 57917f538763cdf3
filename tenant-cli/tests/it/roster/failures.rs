//! What an import does when something outside the file goes wrong: a report path that cannot be
//! written, a key refused part-way, rows that failed only for a temporary reason. The summary is
//! printed in every case, and the exit code says what to do next.

use serde_json::json;
use svc_fixtures::respond;
use wiremock::Mock;
use wiremock::matchers::{body_partial_json, method, path};

use super::{GOOD, import, report_lines_with, roster_sandbox, row_at};
use crate::helpers::{read, received, requests_to};

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
    // The key is refused from the third row on (line 4, rep-3); with --jobs 1 rows go in order.
    Mock::given(method("POST"))
        .and(path("/v1/agents"))
        .and(body_partial_json(json!({ "platformAgentId": "rep-3" })))
        .respond_with(respond::error("API_KEY_REVOKED"))
        .with_priority(1)
        .mount(&server)
        .await;
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
