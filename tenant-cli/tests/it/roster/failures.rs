//! What an import does when something outside the file goes wrong: a report path that cannot be
//! written, a key refused part-way, rows that failed only for a temporary reason. The summary is
//! printed in every case, and the exit code says what to do next.

use serde_json::json;

use super::{GOOD, import, roster_sandbox};
use crate::helpers::{received, requests_to};

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
