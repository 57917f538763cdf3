//! `--log-format json`: every stderr line of `webhook serve` and `reconcile` is one JSON
//! object with `time`, `level`, `message` and `fields`; a delivery's events carry its
//! `webhook_id`; the signing secret never appears.

use serde_json::Value;
use svc_contract::{CallSource, sign};
use svc_fixtures::calls::ROLEPLAY;

use super::{SECRET, deliver, event, now, serve, signed};
use crate::reconcile::{days_ago, fake, hours_ago, record_webhook};

/// Parses every line as a log object and checks its shape.
fn parse_lines(lines: &[String]) -> Vec<Value> {
    assert!(!lines.is_empty(), "some lines were logged");
    lines
        .iter()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line:?}"));
            let time = value["time"]
                .as_str()
                .unwrap_or_else(|| panic!("time: {line}"));
            chrono::DateTime::parse_from_rfc3339(time)
                .unwrap_or_else(|e| panic!("time is RFC 3339 ({e}): {line}"));
            let level = value["level"]
                .as_str()
                .unwrap_or_else(|| panic!("level: {line}"));
            assert!(
                ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"].contains(&level),
                "{line}"
            );
            assert!(value["message"].is_string(), "message: {line}");
            assert!(value["fields"].is_object(), "fields: {line}");
            value
        })
        .collect()
}

fn find<'a>(logs: &'a [Value], message: &str) -> &'a Value {
    logs.iter()
        .find(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(message))
        })
        .unwrap_or_else(|| panic!("no {message:?} in {logs:#?}"))
}

#[tokio::test]
async fn webhook_serve_writes_one_json_object_per_line_with_the_webhook_id_in_fields() {
    let mut serving = serve(&[], &["--log-format", "json"]).await;
    let url = format!("{}/webhooks", serving.base);
    let good = event("svc_call_json");
    assert_eq!(
        deliver(&url, Some("wh_good"), Some(&signed(&good)), &good).await,
        200
    );
    let bad = sign("whsec_wrong", now(), &good);
    assert_eq!(deliver(&url, Some("wh_bad"), Some(&bad), &good).await, 401);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(serving.terminate().await, 0);
    let lines = serving.stderr_lines().await;
    let logs = parse_lines(&lines);

    let started = find(&logs, "receiving webhooks on http://");
    assert_eq!(started["level"], "INFO");
    let rejected = find(&logs, "webhook delivery rejected");
    assert_eq!(rejected["level"], "WARN");
    assert_eq!(rejected["fields"]["webhook_id"], "wh_bad", "{rejected}");
    assert_eq!(rejected["fields"]["status"], "401 Unauthorized");
    let scored = find(&logs, "call scored");
    assert_eq!(scored["level"], "INFO");
    assert_eq!(scored["fields"]["webhook_id"], "wh_good", "{scored}");
    assert_eq!(scored["fields"]["call_id"], "svc_call_json");
    find(&logs, "stopped");
    assert!(
        lines.iter().all(|line| !line.contains(SECRET)),
        "the secret is never logged"
    );
}

#[tokio::test]
async fn reconcile_writes_its_notes_and_errors_as_json_lines() {
    let fake = fake().await;
    let ids = fake.calls.add_many(ROLEPLAY, [hours_ago(2), hours_ago(3)]);
    record_webhook(
        &fake.store,
        "svc_call_older",
        CallSource::Roleplay,
        days_ago(3),
    );
    record_webhook(&fake.store, &ids[0], CallSource::Roleplay, hours_ago(2));
    let store = fake.store.to_str().expect("utf-8");
    let run = fake
        .sandbox
        .run(&[
            "reconcile",
            "--store",
            store,
            "--source",
            "roleplay",
            "--delivery-grace",
            "0s",
            "--retry-base-ms",
            "1",
            "--log-format",
            "json",
        ])
        .await;
    assert_eq!(run.code, 3, "{run:?}");
    let lines: Vec<String> = run.stderr.lines().map(str::to_owned).collect();
    let logs = parse_lines(&lines);
    let recovered = find(&logs, "recovered 1 call(s) whose webhook never arrived");
    assert_eq!(recovered["level"], "INFO");
    assert!(
        run.stdout.contains("roleplay"),
        "the report table is data, on stdout"
    );

    // A fatal error is a JSON line too.
    let missing = fake.sandbox.path("no/such/dir/calls.db");
    let run = fake
        .sandbox
        .run(&[
            "reconcile",
            "--store",
            missing.to_str().expect("utf-8"),
            "--log-format",
            "json",
        ])
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    let lines: Vec<String> = run.stderr.lines().map(str::to_owned).collect();
    let logs = parse_lines(&lines);
    let failed = find(&logs, "svc-cli: error: ");
    assert_eq!(failed["level"], "ERROR");
}

#[tokio::test]
async fn reconcile_json_into_a_pipe_is_one_line_per_report_with_its_notes_as_json_logs() {
    let fake = fake().await;
    let ids = fake.calls.add_many(ROLEPLAY, [hours_ago(2), hours_ago(3)]);
    record_webhook(
        &fake.store,
        "svc_call_older",
        CallSource::Roleplay,
        days_ago(3),
    );
    record_webhook(&fake.store, &ids[0], CallSource::Roleplay, hours_ago(2));
    let store = fake.store.to_str().expect("utf-8");
    let args = [
        "--json",
        "reconcile",
        "--store",
        store,
        "--source",
        "roleplay",
        "--delivery-grace",
        "0s",
        "--retry-base-ms",
        "1",
        "--log-format",
        "json",
    ];
    // Twice, appended as cron's `>> log` would: the log is JSON Lines, a report per line.
    let mut log = String::new();
    for expected in [3, 0] {
        let run = fake.sandbox.run(&args).await;
        assert_eq!(run.code, expected, "{run:?}");
        assert_eq!(run.stdout.lines().count(), 1, "one line: {}", run.stdout);
        log.push_str(&run.stdout);
        if expected == 3 {
            // The notes are not lost under --json: JSON log events on stderr.
            let lines: Vec<String> = run.stderr.lines().map(str::to_owned).collect();
            let logs = parse_lines(&lines);
            find(&logs, "recovered 1 call(s) whose webhook never arrived");
        }
    }
    let reports: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is a report"))
        .collect();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0]["totals"]["recovered"], 1);
    assert_eq!(reports[1]["exitCode"], 0);
}
