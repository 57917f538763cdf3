//! `calls ingest-real` run as the real binary: a JSON array, JSON lines and `-` on stdin, one
//! result line per record with `--json`, exit 0 (every record processed, drops included), 1 (a
//! record was invalid) or 2 (a usage error), and the running server delivering what it queued.

use serde_json::{Value, json};
use svc_service::Clock;

use super::operator::{array, file, svc, svc_in};
use super::support::*;

#[tokio::test]
async fn enable_real_calls_then_ingest_real_of_a_json_array_prints_one_json_line_per_record() {
    let world = World::new().await;
    let tenant = world.tenant.id.clone();
    let agency = world.agency("ag-cli", None).await;
    world
        .agent("ag-cli", json!({ "platformAgentId": "rep-cli" }))
        .await;
    let rep = json!({ "rep": { "agentId": "rep-cli" } });
    let enabled = svc(
        &world,
        &[
            "agency",
            "enable-real-calls",
            "--tenant",
            &tenant,
            "--agency-id",
            &agency,
            "--json",
        ],
    )
    .await
    .expect(0);
    assert_eq!(
        serde_json::from_str::<Value>(&enabled.stdout).expect("JSON"),
        json!({ "agencyId": agency, "platformAgencyId": "ag-cli", "realCalls": true,
                "thirdPartyDialer": false, "rubric": "default" })
    );

    let records = array(&[
        with(record("d-1", &agency), rep.clone()),
        with(
            record("d-2", &agency),
            json!({ "rep": rep["rep"], "durationSec": 12 }),
        ),
        with(record("d-1", &agency), rep.clone()),
    ]);
    // A relative recording path is read from the file's directory, whatever the cwd.
    let path = file(&world, "records.json", &records);
    let run = svc_in(
        &world.app.config.db_path,
        &[
            "calls",
            "ingest-real",
            "--tenant",
            &tenant,
            "--file",
            &path,
            "--json",
        ],
        std::env::temp_dir().as_path(),
        None,
    )
    .await
    .expect(0);
    let lines = run.lines();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    let call_id = lines[0]["callId"].as_str().expect("callId").to_owned();
    assert!(call_id.starts_with("svc_call_"));
    assert_eq!(
        (&lines[0]["dialerCallId"], &lines[0]["dropped"]),
        (&json!("d-1"), &Value::Null)
    );
    assert_eq!(
        (
            &lines[1]["dialerCallId"],
            &lines[1]["callId"],
            &lines[1]["dropped"]
        ),
        (&json!("d-2"), &Value::Null, &json!("too_short"))
    );
    assert_eq!(
        (
            &lines[2]["dialerCallId"],
            &lines[2]["callId"],
            &lines[2]["dropped"]
        ),
        (&json!("d-1"), &json!(call_id), &Value::Null)
    );
    assert_eq!(lines[0]["scored"], true);
    assert_eq!(
        lines[2]["alreadyIngested"], true,
        "the repeat names the first"
    );
    assert!(run.stderr.contains("3 record(s)"), "{}", run.stderr);
    assert!(
        !run.stdout.contains("call.wav"),
        "the dialer's path is not echoed"
    );

    // The running server reads it, recording included.
    let detail = world.detail(&call_id).await.expect(200);
    assert_eq!(detail["platformAgentId"], "rep-cli");
    let served = world
        .fetch(detail["audioUrl"].as_str().expect("audioUrl"), None)
        .await;
    assert_eq!(served.bytes().await.expect("body").as_ref(), AUDIO);
}

#[tokio::test]
async fn ingest_real_of_json_lines_exits_1_on_an_invalid_record_and_processes_the_rest() {
    let world = World::new().await;
    let tenant = world.tenant.id.clone();
    let other = world.app.tenant().await;
    let theirs = world.app.agency(&other, "theirs").await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let on = world.agency.clone();
    let lines = [
        record("d-1", &on).to_string(),
        "not json at all".to_owned(),
        String::new(),
        with(record("d-neg", &on), json!({ "durationSec": -5 })).to_string(),
        record("d-foreign", &theirs).to_string(),
        with(record("d-2", &on), json!({ "transcript": null })).to_string(),
    ];
    let path = file(&world, "records.jsonl", &lines.join("\n"));
    let args = ["calls", "ingest-real", "--tenant", &tenant, "--file", &path];
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let run = svc(&world, &with_json).await.expect(1);
    let out = run.lines();
    assert_eq!(out.len(), 5, "one line per record, blank lines skipped");
    assert!(
        out[0]["callId"]
            .as_str()
            .is_some_and(|c| c.starts_with("svc_call_"))
    );
    for (line, says) in out[1..4]
        .iter()
        .zip(["not JSON", "negative", "not an agency"])
    {
        assert_eq!(
            (&line["callId"], &line["dropped"]),
            (&Value::Null, &Value::Null)
        );
        let error = line["error"].as_str().expect("error");
        assert!(error.contains(says), "{error}");
    }
    assert_eq!(out[4]["dropped"], "no_transcript");
    assert!(run.stderr.contains("3 invalid"), "{}", run.stderr);
    assert_eq!(
        world.app.db.dialer_call(&on, "d-neg").await.expect("read"),
        None
    );
    assert_eq!(
        world
            .app
            .db
            .dialer_call(&theirs, "d-foreign")
            .await
            .expect("read"),
        None
    );

    // The table says the same, and the file again changes nothing.
    let table = svc(&world, &args).await.expect(1);
    assert!(
        table.stdout.contains("already ingested as svc_call_"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("invalid: not JSON"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("dropped: no_transcript"),
        "{}",
        table.stdout
    );
    assert_eq!(world.listed_ids().await.len(), 1);
}

#[tokio::test]
async fn ingest_real_reads_stdin_with_recordings_relative_to_the_working_directory() {
    let world = World::new().await;
    let tenant = world.tenant.id.clone();
    let lines = [record("d-1", &world.agency), record("d-2", &world.agency)]
        .map(|r| r.to_string())
        .join("\n");
    let run = svc_in(
        &world.app.config.db_path,
        &[
            "calls",
            "ingest-real",
            "--tenant",
            &tenant,
            "--file",
            "-",
            "--json",
        ],
        world.dir.path(),
        Some(&lines),
    )
    .await
    .expect(0);
    let out = run.lines();
    assert_eq!(out.len(), 2);
    for line in &out {
        let call_id = line["callId"].as_str().expect("stored");
        assert!(world.detail(call_id).await.expect(200)["audioUrl"].is_string());
    }
    assert_eq!(world.listed_ids().await.len(), 2);
}

#[tokio::test]
async fn ingest_real_usage_errors_exit_2_and_store_nothing() {
    let world = World::new().await;
    let tenant = world.tenant.id.clone();
    let good = file(&world, "good.json", &array(&[record("d-1", &world.agency)]));
    let torn = file(&world, "torn.json", "[{\"dialerCallId\": \"d-1\",");
    let missing = world.dir.path().join("missing.json");
    let missing = missing.to_string_lossy();
    let cases: [(&str, Vec<&str>); 4] = [
        (
            "an unknown tenant",
            vec!["--tenant", "ten_nope", "--file", &good],
        ),
        (
            "a file that cannot be read",
            vec!["--tenant", &tenant, "--file", &missing],
        ),
        (
            "a torn JSON array",
            vec!["--tenant", &tenant, "--file", &torn],
        ),
        ("no --file", vec!["--tenant", &tenant]),
    ];
    for (what, flags) in cases {
        let mut args = vec!["calls", "ingest-real", "--json"];
        args.extend(flags);
        let run = svc(&world, &args).await;
        assert_eq!(run.code, 2, "{what}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{what}: {}", run.stdout);
        assert!(!run.stderr.is_empty(), "{what} says why");
    }
    assert!(world.listed_ids().await.is_empty());
    assert!(world.archived_files().is_empty());
}

#[tokio::test]
async fn a_call_ingested_by_the_binary_is_delivered_by_the_running_server() {
    let mut world = World::with_config(|config| config.clock = Clock::System).await;
    let tenant = world.tenant.id.clone();
    let path = file(
        &world,
        "records.json",
        &array(&[record("d-1", &world.agency)]),
    );
    let args = [
        "calls",
        "ingest-real",
        "--tenant",
        &tenant,
        "--file",
        &path,
        "--json",
    ];
    let out = svc(&world, &args).await.expect(0).lines();
    // No drain here: the server's own outbox finds what another process queued.
    let delivery = world.sink.next().await;
    let body = delivery.json();
    assert_eq!(body["callId"], out[0]["callId"]);
    assert_eq!(body["source"], "real_call");
    let header = delivery.signature();
    let t: i64 = header
        .strip_prefix("t=")
        .and_then(|rest| rest.split(',').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("signature header {header:?}"));
    assert_signed(&delivery, &world.secret, t);
    assert!(
        (chrono::Utc::now().timestamp() - t).abs() < 300,
        "signed now"
    );
}
