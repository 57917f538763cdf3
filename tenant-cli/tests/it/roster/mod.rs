//! `roster import` against the stateful fake roster: validation before any request, bad rows
//! never stopping good ones, each agency upserted once, idempotent reruns, conflicts, reports.
//! Submodules: [`already_exists`] (telling a rerun from another rep holding a handle),
//! [`failures`] (report path, refused key and temporary failures: summary and exit code),
//! [`csv_file`] (line numbers, quotes and cell counts of the file itself).

mod already_exists;
mod csv_file;
mod failures;

use serde_json::json;
use svc_fixtures::roster::Roster;
use wiremock::MockServer;

use crate::helpers::{Run, Sandbox, read, received, requests_to};

pub(super) const GOOD: &str = "\
npn,firstName,lastName,platformAgencyId,agencyName,email,platformAgentId,notes
11110001,Dana,Reyes,acme-1,Acme Insurance,dana@acme.example,rep-1,first
11110002,Sam,Okafor,acme-1,,sam@acme.example,,
,Lee,Park,beta-2,Beta Brokers,,rep-3,
11110004,Ana,Silva,beta-2,Beta Brokers,ana@beta.example,rep-4,
";

/// The stateful fake roster, and a sandbox pointed at it.
pub(super) async fn roster_sandbox() -> (MockServer, Roster, Sandbox) {
    let server = MockServer::start().await;
    let roster = Roster::mount(&server).await;
    let sandbox = Sandbox::for_server(&server);
    (server, roster, sandbox)
}

/// Writes `csv` to `roster.csv` in the sandbox and runs `roster import` on it with `flags`.
pub(super) async fn import(sandbox: &Sandbox, csv: impl AsRef<[u8]>, flags: &[&str]) -> Run {
    let file = sandbox.write("roster.csv", csv);
    let mut args = vec!["roster", "import", file.to_str().expect("path")];
    args.extend_from_slice(flags);
    sandbox.run(&args).await
}

/// How many lines of a `--report` file have this outcome.
pub(super) fn report_lines_with(report: &str, outcome: &str) -> usize {
    let column = format!(",{outcome},");
    report.lines().filter(|l| l.contains(&column)).count()
}

/// The `--json` output's row for a line of the file.
pub(super) fn row_at(out: &serde_json::Value, line: u64) -> serde_json::Value {
    out["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["line"] == json!(line))
        .unwrap_or_else(|| panic!("no row for line {line} in {out}"))
        .clone()
}

#[tokio::test]
async fn import_registers_every_row_and_upserts_each_agency_once() {
    let (server, roster, sandbox) = roster_sandbox().await;
    let run = import(&sandbox, GOOD, &["--json", "--jobs", "3"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["summary"]["registered"], json!(4));
    assert_eq!(roster.agents().len(), 4);
    assert_eq!(requests_to(&server, "POST", "/v1/agencies").await.len(), 2);
    let names: Vec<_> = roster
        .agencies()
        .iter()
        .map(|a| a["name"].clone())
        .collect();
    assert!(names.contains(&json!("Acme Insurance")) && names.contains(&json!("Beta Brokers")));
    let sam = roster
        .agents()
        .into_iter()
        .find(|a| a["npn"] == "11110002")
        .expect("sam");
    assert_eq!(
        sam["platformAgentId"],
        json!(null),
        "an empty cell is an absent value"
    );
}

#[tokio::test]
async fn rerunning_the_same_file_changes_nothing_and_reports_already_registered() {
    let (_server, roster, sandbox) = roster_sandbox().await;
    assert_eq!(import(&sandbox, GOOD, &[]).await.code, 0);
    let before = roster.agents();
    let report = sandbox.path("second.csv");
    let run = import(
        &sandbox,
        GOOD,
        &["--report", report.to_str().expect("path")],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(roster.agents(), before);
    assert!(run.stdout.contains("already_registered"), "{run:?}");
    let report = read(&report);
    assert_eq!(
        report_lines_with(&report, "already_registered"),
        4,
        "{report}"
    );
}

#[tokio::test]
async fn bad_rows_are_reported_with_line_numbers_and_never_stop_the_others() {
    let (_server, roster, sandbox) = roster_sandbox().await;
    let report = sandbox.path("out.csv");
    let run = import(
        &sandbox,
        "platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId
acme-1,Acme,Dana,Reyes,dana@acme.example,11110001,rep-1
acme-1,Acme,No,Handle,,,
acme-1,Acme,Bad,Npn,,12,
acme-1,Acme,Dup,Email,DANA@acme.example,,rep-9
,Acme,No,Agency,x@acme.example,,
acme-1,Acme,Good,Two,two@acme.example,,svc_agent_reserved
acme-1,Acme,Good,Three,three@acme.example,,rep-3
",
        &["--report", report.to_str().expect("path")],
    )
    .await;
    assert_eq!(run.code, 1, "{run:?}");
    for expected in [
        "line 3: missing handle",
        "line 4: npn \"12\"",
        "line 5: duplicate email \"dana@acme.example\" (first on line 2)",
        "line 6: missing platformAgencyId",
        "line 7: platformAgentId \"svc_agent_reserved\" uses a reserved",
    ] {
        assert!(
            run.stderr.contains(expected),
            "missing {expected:?} in {}",
            run.stderr
        );
    }
    assert_eq!(roster.agents().len(), 2, "the two good rows are registered");
    let report = read(&report);
    assert!(report.starts_with(
        "line,platformAgencyId,platformAgentId,npn,email,outcome,agentId,agencyId,message"
    ));
    assert_eq!(report_lines_with(&report, "invalid"), 5, "{report}");
    assert_eq!(report_lines_with(&report, "registered"), 2, "{report}");
}

#[tokio::test]
async fn a_handle_registered_in_another_agency_is_a_conflict() {
    let (_server, roster, sandbox) = roster_sandbox().await;
    roster.seed_agency("other-9", "Other Agency");
    roster
        .seed_agent(
            "other-9",
            json!({ "firstName": "Dana", "lastName": "Reyes", "npn": "11110001" }),
        )
        .expect("seeded");
    let run = import(&sandbox, GOOD, &["--json"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    let out = run.json();
    assert_eq!(out["summary"]["conflict"], json!(1));
    assert_eq!(out["summary"]["registered"], json!(3));
    let conflict = out["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["outcome"] == "conflict")
        .expect("conflict row")
        .clone();
    assert_eq!(conflict["line"], json!(2));
    assert!(
        conflict["message"].as_str().unwrap_or("").contains("npn"),
        "{conflict}"
    );
}

#[tokio::test]
async fn dry_run_validates_and_sends_nothing() {
    let (server, _, sandbox) = roster_sandbox().await;
    let run = import(&sandbox, GOOD, &["--dry-run"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("would_register") && run.stderr.contains("2 agencies"),
        "{run:?}"
    );
    assert!(received(&server).await.is_empty());
}

#[tokio::test]
async fn missing_columns_or_bad_encoding_fail_before_anything_is_sent() {
    let (server, _, sandbox) = roster_sandbox().await;
    let run = import(
        &sandbox,
        "platformAgencyId,firstName,lastName,email\nacme-1,A,B,a@b.example\n",
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("missing column(s) agencyName, npn, platformAgentId"),
        "{run:?}"
    );

    let latin1 = b"platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId\nacme-1,Acme,Jos\xe9,Ruiz,j@acme.example,,\n";
    let run = import(&sandbox, latin1, &[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("line 2 is not valid UTF-8"), "{run:?}");

    let absent = sandbox.run(&["roster", "import", "no-such-file.csv"]).await;
    assert_eq!(absent.code, 2, "{absent:?}");
    assert!(received(&server).await.is_empty());
}

#[tokio::test]
async fn rows_of_an_agency_without_any_name_are_invalid() {
    let (_server, roster, sandbox) = roster_sandbox().await;
    let run = import(
        &sandbox,
        "platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId\nnameless,,A,B,a@b.example,,\nacme-1,Acme,C,D,c@d.example,,\n",
        &[],
    )
    .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("line 2: agency \"nameless\" has no agencyName"),
        "{run:?}"
    );
    assert_eq!(roster.agents().len(), 1);
    assert_eq!(roster.agencies().len(), 1);
}

#[tokio::test]
async fn a_revoked_key_stops_the_import_with_exit_4() {
    let server = MockServer::start().await;
    svc_fixtures::happy::mount(&server).await;
    let sandbox = Sandbox::new()
        .env("SVC_BASE_URL", &svc_fixtures::base_url(&server))
        .env("SVC_API_KEY", "svc_live_revoked");
    let run = import(&sandbox, GOOD, &["--json"]).await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(requests_to(&server, "POST", "/v1/agents").await.is_empty());
    assert_eq!(
        run.json()["summary"]["not_sent"],
        json!(4),
        "the summary is printed: {run:?}"
    );
}
