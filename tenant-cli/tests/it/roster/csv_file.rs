//! Reading the roster file: every row is accounted for at its real line, whatever the line
//! endings; a quote left open is never allowed to swallow rows silently; cells past the header
//! are ignored while missing cells make the row invalid.

use serde_json::Value;

use super::{import, roster_sandbox};
use crate::helpers::{Sandbox, received};

const HEADER: &str = "platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId";

/// `--dry-run --json` of `csv`: the exit code, each row's (line, outcome), and stderr.
async fn dry_run(csv: &str) -> (i32, Vec<(u64, String)>, String) {
    let sandbox = Sandbox::new();
    let run = import(&sandbox, csv, &["--dry-run", "--json"]).await;
    let rows = match serde_json::from_str::<Value>(&run.stdout) {
        Ok(out) => out["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| {
                let line = r["line"].as_u64().expect("line");
                (line, r["outcome"].as_str().unwrap_or_default().to_owned())
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    (run.code, rows, run.stderr)
}

fn lines(rows: &[(u64, String)]) -> Vec<u64> {
    rows.iter().map(|(line, _)| *line).collect()
}

#[tokio::test]
async fn crlf_and_lf_files_report_the_same_real_line_numbers() {
    let lf = format!(
        "{HEADER}\nacme-1,Acme,Dana,Reyes,dana@acme.example,,\nacme-1,Acme,No,Handle,,,\n\n\
         acme-1,Acme,Sam,Okafor,sam@acme.example,,\n"
    );
    let crlf = lf.replace('\n', "\r\n");
    for (endings, text) in [("LF", lf), ("CRLF", crlf)] {
        let (code, rows, stderr) = dry_run(&text).await;
        assert_eq!(code, 1, "{endings}: {stderr}");
        assert_eq!(lines(&rows), [2, 3, 5], "{endings}: {rows:?}");
        assert!(
            stderr.contains("line 3: missing handle"),
            "{endings}: {stderr}"
        );
    }
}

#[tokio::test]
async fn cells_past_the_header_are_ignored_and_missing_cells_make_the_row_invalid() {
    let csv = format!(
        "{HEADER}\nacme-1,Acme,Dana,Reyes,dana@acme.example,,rep-1,left by the export\n\
         acme-1,Acme,Sam,Okafor,sam@acme.example,\n\
         acme-1,Acme,Lee,Park,lee@acme.example,,rep-3\n"
    );
    let (code, rows, stderr) = dry_run(&csv).await;
    assert_eq!(code, 1, "{stderr}");
    let expected = [(2, "would_register"), (3, "invalid"), (4, "would_register")];
    let expected: Vec<(u64, String)> = expected
        .iter()
        .map(|(line, outcome)| (*line, (*outcome).to_owned()))
        .collect();
    assert_eq!(rows, expected, "{stderr}");
    assert!(
        stderr.contains("line 3: has 6 fields but the header has 7"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_quote_left_open_refuses_the_file_naming_its_line_and_sends_nothing() {
    let (server, roster, sandbox) = roster_sandbox().await;
    let csv = format!(
        "{HEADER}\nacme-1,Acme,Dana,Reyes,dana@acme.example,,rep-1\n\
         acme-1,Acme,\"Sam,Okafor,sam@acme.example,,rep-2\n\
         acme-1,Acme,Lee,Park,lee@acme.example,,rep-3\n\
         acme-1,Acme,Ann,Lee,ann@acme.example,,rep-4\n"
    );
    let run = import(&sandbox, csv, &[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("the quote that opens a cell on line 3 is never closed"),
        "{run:?}"
    );
    assert!(received(&server).await.is_empty(), "nothing was sent");
    assert!(roster.agents().is_empty());
}

#[tokio::test]
async fn a_stray_quote_closed_lines_later_makes_its_row_invalid_naming_the_lines_it_took() {
    let csv = format!(
        "{HEADER}\nacme-1,Acme,Dana,Reyes,dana@acme.example,,rep-1\n\
         acme-1,Acme,\"Sam,Okafor,sam@acme.example,,rep-2\n\
         acme-1,Acme,Lee,Park,lee@acme.example,,rep-3\n\
         acme-1,Acme,Ann\",Lee,ann@acme.example,,rep-4\n\
         acme-1,Acme,Bo,Diaz,bo@acme.example,,rep-5\n"
    );
    let (code, rows, stderr) = dry_run(&csv).await;
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(lines(&rows), [2, 3, 6], "{rows:?}");
    assert_eq!(rows[1].1, "invalid", "{rows:?}");
    assert!(
        stderr.contains("line 3: runs over lines 3-5: its firstName cell holds line breaks")
            && stderr.contains("lines 4-5 are not read as rows"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_quoted_cell_of_another_column_may_hold_line_breaks() {
    let csv = format!(
        "{HEADER},notes\nacme-1,Acme,Dana,Reyes,dana@acme.example,,rep-1,\"two\nlines\"\n\
         acme-1,Acme,Sam,Okafor,sam@acme.example,,rep-2,\n"
    );
    let (code, rows, stderr) = dry_run(&csv).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(lines(&rows), [2, 4], "{rows:?}");
}
