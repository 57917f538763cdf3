//! `svc-cli store report` as the real binary: the page a kept demo leaves, the
//! command on the same store, `--since`, and its errors. The page in a browser is
//! `browser::report`.

use serde_json::Value;

use crate::helpers::Sandbox as TestDir;

#[tokio::test]
async fn store_report_writes_one_html_page_of_the_store_and_a_kept_demo_leaves_one() {
    let dir = TestDir::new();
    let demo = dir
        .run(&["demo", "--calls", "6", "--keep", "kept", "--json"])
        .await;
    assert!(demo.code == 0 || demo.code == 1, "{demo:?}");
    let summary = demo.json();
    assert_eq!(summary["kept"]["report"], "kept/report.html", "{summary:#}");
    assert!(dir.path("kept/report.html").is_file());

    let run = dir
        .run(&[
            "store",
            "report",
            "--store",
            "kept/store.db",
            "--out",
            "report.html",
        ])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.trim(), "report.html", "the path is the data");
    assert!(run.stderr.contains("written"), "{run:?}");
    let page = std::fs::read_to_string(dir.path("report.html")).expect("the report");
    for section in [
        "score-distribution",
        "scores-over-time",
        "agents",
        "delivery-health",
    ] {
        assert!(
            page.contains(&format!(r#"<section id="{section}">"#)),
            "{section}"
        );
    }
    assert!(!page.contains("<script") && !page.contains("http://") && !page.contains("https://"));

    let json = dir
        .run(&[
            "store",
            "report",
            "--store",
            "kept/store.db",
            "--out",
            "report.html",
            "--json",
        ])
        .await;
    assert_eq!(json.code, 0, "{json:?}");
    let written = json.json();
    assert_eq!(written["calls"], summary["store"]["stored"], "{written:#}");
    assert_eq!(
        written["practiceCalls"].as_u64().unwrap_or(0) + written["realCalls"].as_u64().unwrap_or(0),
        written["calls"].as_u64().unwrap_or(0)
    );

    let later = dir
        .run(&[
            "store",
            "report",
            "--store",
            "kept/store.db",
            "--out",
            "later.html",
            "--since",
            "2999-01-01T00:00:00Z",
            "--json",
        ])
        .await;
    assert_eq!(later.code, 0, "{later:?}");
    assert_eq!(later.json()["calls"], Value::from(0));
    let empty = std::fs::read_to_string(dir.path("later.html")).expect("the report");
    assert!(empty.contains("No scored calls") && empty.contains("calls since 2999-01-01"));
}

#[tokio::test]
async fn store_report_refuses_a_missing_store_and_an_unwritable_path() {
    let dir = TestDir::new();
    let missing = dir
        .run(&["store", "report", "--store", "none.db", "--out", "r.html"])
        .await;
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(
        missing.stderr.contains("no store at none.db"),
        "{missing:?}"
    );
    assert!(!dir.path("r.html").exists());

    svc_store::Store::open_or_create(dir.path("empty.db")).expect("an empty store");
    let nowhere = dir
        .run(&[
            "store",
            "report",
            "--store",
            "empty.db",
            "--out",
            "no/such/dir/r.html",
        ])
        .await;
    assert_eq!(nowhere.code, 1, "{nowhere:?}");
    assert!(
        nowhere
            .stderr
            .contains("cannot write the report no/such/dir/r.html"),
        "{nowhere:?}"
    );
}
