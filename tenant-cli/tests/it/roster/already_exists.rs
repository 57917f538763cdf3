//! `AGENT_ALREADY_EXISTS` names only the first handle that matched and the agent holding it,
//! and handles are unique across the tenant: a row is `already_registered` only when that agent
//! is the row's rep (every handle of the row is the agent's, in the row's agency). A new rep who
//! reuses another rep's email or NPN is a conflict naming that agent, never a silent success.

use serde_json::{Value, json};
use svc_fixtures::roster::Roster;
use wiremock::MockServer;

use super::{import, report_lines_with, roster_sandbox, row_at};
use crate::helpers::{Sandbox, read, requests_to};

const HEADER: &str = "platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId\n";

/// A roster where Ann (rep-1, ann@example.com, NPN 12345) is registered in agency ag1; returns
/// her service id too.
async fn with_ann() -> (MockServer, Roster, Sandbox, String) {
    let (server, roster, sandbox) = roster_sandbox().await;
    roster.seed_agency("ag1", "Agency One");
    let ann = roster
        .seed_agent(
            "ag1",
            json!({ "firstName": "Ann", "lastName": "Lee", "email": "ann@example.com",
                    "npn": "12345", "platformAgentId": "rep-1" }),
        )
        .expect("Ann seeded");
    (server, roster, sandbox, ann)
}

fn message(row: &Value) -> &str {
    row["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_new_rep_reusing_another_reps_email_or_npn_is_a_conflict_naming_that_agent() {
    let (_server, roster, sandbox, ann) = with_ann().await;
    let report = sandbox.path("out.csv");
    let csv = format!(
        "{HEADER}ag1,Agency One,Dan,Four,ann@example.com,,rep-4\n\
         ag1,Agency One,Eve,Five,eve@example.com,12345,rep-5\n"
    );
    let run = import(
        &sandbox,
        csv,
        &["--json", "--report", report.to_str().expect("path")],
    )
    .await;
    assert_eq!(run.code, 1, "{run:?}");
    let out = run.json();
    assert_eq!(out["summary"]["conflict"], json!(2), "{out}");
    assert_eq!(out["summary"]["already_registered"], json!(0), "{out}");
    for (line, handle, value) in [(2, "email", "ann@example.com"), (3, "npn", "12345")] {
        let row = row_at(&out, line);
        assert_eq!(row["outcome"], "conflict", "{row}");
        assert_eq!(row["agentId"], json!(ann), "{row}");
        assert!(
            message(&row).contains(handle)
                && message(&row).contains(value)
                && message(&row).contains(&ann),
            "the message names the handle and the agent holding it: {row}"
        );
    }
    assert!(
        run.stderr.contains("line 2: conflict") && run.stderr.contains("line 3: conflict"),
        "{run:?}"
    );
    assert_eq!(report_lines_with(&read(&report), "conflict"), 2);
    assert_eq!(roster.agents().len(), 1, "nobody else was registered");
}

#[tokio::test]
async fn a_row_sharing_only_some_handles_with_the_agent_is_a_conflict() {
    let (_server, _roster, sandbox, ann) = with_ann().await;
    // Ann's platformAgentId and email, another NPN: the service matches on platformAgentId.
    let csv = format!("{HEADER}ag1,Agency One,Ann,Lee,ann@example.com,99999,rep-1\n");
    let run = import(&sandbox, csv, &["--json"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    let row = row_at(&run.json(), 2);
    assert_eq!(row["outcome"], "conflict", "{row}");
    assert_eq!(row["agentId"], json!(ann), "{row}");
    assert!(
        message(&row).contains("npn") && message(&row).contains("99999"),
        "the message names the handle that differs: {row}"
    );
}

#[tokio::test]
async fn a_row_whose_handles_are_all_the_agents_is_already_registered() {
    let (server, roster, sandbox, ann) = with_ann().await;
    // Emails match case-insensitively, as the service compares them.
    let full = format!("{HEADER}ag1,Agency One,Ann,Lee,ANN@example.com,12345,rep-1\n");
    let run = import(&sandbox, full, &["--json"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let row = row_at(&run.json(), 2);
    assert_eq!(row["outcome"], "already_registered", "{row}");
    assert_eq!(row["agentId"], json!(ann), "{row}");

    // A row with one handle, the one the service matched on, needs no lookup.
    let lookups_before = requests_to(&server, "GET", "/v1/agents").await.len();
    let email_only = format!("{HEADER}ag1,Agency One,Ann,Lee,ann@example.com,,\n");
    let run = import(&sandbox, email_only, &["--json"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(row_at(&run.json(), 2)["outcome"], "already_registered");
    assert_eq!(
        requests_to(&server, "GET", "/v1/agents").await.len(),
        lookups_before
    );
    assert_eq!(roster.agents().len(), 1);
}
