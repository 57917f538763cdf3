//! `svc-cli sandbox` and `svc-cli demo`, as the real binary: the exports an integration is
//! pointed with, a key that survives a restart, faults the CLI rides through, a clean stop on
//! Ctrl-C; and the demo end to end with its self-check and its JSON counts.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::helpers::{Run, Sandbox as TestDir};
use crate::reference_keys;

pub(crate) const ROSTER: &str =
    "platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId
agency-1,First Agency,Ada,Lovelace,ada@example.com,1234567,rep-ada
agency-1,First Agency,Grace,Hopper,grace@example.com,,rep-grace
";

/// A running `svc-cli sandbox` and the `export` lines it printed.
pub(crate) struct Running {
    child: Child,
    exports: Vec<(String, String)>,
}

impl Running {
    pub(crate) async fn start(dir: &TestDir, extra: &[&str]) -> Running {
        let mut args = vec!["sandbox", "--listen", "127.0.0.1:0", "--db", "sandbox.db"];
        args.extend_from_slice(extra);
        let mut child = dir.command(&args).spawn().expect("spawn sandbox");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut exports = Vec::new();
        while exports.len() < 3 {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("the sandbox prints its exports in time")
                .expect("read stdout")
                .expect("the sandbox exited before printing its exports");
            let (name, value) = line
                .strip_prefix("export ")
                .and_then(|l| l.split_once('='))
                .unwrap_or_else(|| panic!("not an export line: {line:?}"));
            exports.push((name.to_owned(), value.to_owned()));
        }
        Running { child, exports }
    }

    pub(crate) fn export(&self, name: &str) -> &str {
        self.exports
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {name} export"))
    }

    /// Runs `svc-cli` against the sandbox, with its exports in the environment.
    pub(crate) async fn cli(&self, dir: &TestDir, args: &[&str], log: Option<&str>) -> Run {
        let mut command = dir.command(args);
        command.envs(self.exports.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if let Some(filter) = log {
            command.env("RUST_LOG", filter);
        }
        let output = command.output().await.expect("run svc-cli");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Ctrl-C, then the exit code and stderr.
    pub(crate) async fn interrupt(mut self) -> (i32, String) {
        let pid = self.child.id().expect("running").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        let mut stderr = self.child.stderr.take().expect("stderr");
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the sandbox stops on Ctrl-C")
            .expect("wait");
        let mut text = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text)
            .await
            .expect("read stderr");
        (status.code().unwrap_or(-1), text)
    }
}

#[tokio::test]
async fn the_sandbox_serves_its_tenant_and_keeps_the_key_across_restarts() {
    let dir = TestDir::new();
    dir.write("roster.csv", ROSTER);
    let hook = "http://127.0.0.1:9/hook";
    let first = Running::start(
        &dir,
        &[
            "--roster",
            "roster.csv",
            "--faults",
            "delay=5s, seed=3",
            "--webhook-url",
            hook,
        ],
    )
    .await;
    assert!(
        first
            .export("SVC_BASE_URL")
            .starts_with("http://127.0.0.1:")
    );
    assert!(first.export("SVC_BASE_URL").ends_with("/v1"));
    assert!(first.export("SVC_API_KEY").starts_with("svc_live_"));
    assert!(first.export("SVC_SIGNING_SECRET").starts_with("whsec_"));
    let listed = first.cli(&dir, &["agents", "list", "--json"], None).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let agents = listed.json();
    let handles: BTreeSet<&str> = agents["data"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["platformAgentId"].as_str())
        .collect();
    assert_eq!(handles, BTreeSet::from(["rep-ada", "rep-grace"]));
    let key = first.export("SVC_API_KEY").to_owned();
    let secret = first.export("SVC_SIGNING_SECRET").to_owned();
    let (code, stderr) = first.interrupt().await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("created"), "{stderr}");
    // Issue 44, item 5: every start says what is in force.
    assert!(
        stderr.contains("faults: delay=5s,seed=3 (--faults off clears them)")
            && stderr.contains(&format!("webhooks go to {hook} (--webhook-url")),
        "{stderr}"
    );

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path("sandbox.db.credentials.json"))
            .expect("credentials file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the credentials file is private");
    }

    let again = Running::start(&dir, &[]).await;
    assert_eq!(again.export("SVC_API_KEY"), key, "the same key");
    assert_eq!(again.export("SVC_SIGNING_SECRET"), secret);
    let listed = again.cli(&dir, &["agents", "list", "--json"], None).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    assert_eq!(
        listed.json()["data"].as_array().map(Vec::len),
        Some(2),
        "the roster is kept"
    );
    let (code, stderr) = again.interrupt().await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("reopened"), "{stderr}");
    assert!(
        stderr.contains("faults: delay=5s,seed=3 (kept from the last start; --faults off")
            && stderr.contains(&format!("webhooks go to {hook} (kept from the last start;")),
        "a restart says what carried over: {stderr}"
    );

    let cleared = Running::start(&dir, &["--faults", "off", "--webhook-url", ""]).await;
    let (code, stderr) = cleared.interrupt().await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("faults: none") && stderr.contains("webhooks: no URL"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_cli_rides_through_injected_429s_and_500s() {
    let dir = TestDir::new();
    dir.write("roster.csv", ROSTER);
    let (code, stderr) = Running::start(&dir, &["--roster", "roster.csv"])
        .await
        .interrupt()
        .await;
    assert_eq!(code, 0, "{stderr}");
    let sandbox = Running::start(&dir, &["--faults", "api-429=0.3,api-500=0.2,seed=4"]).await;
    let mut retried = String::new();
    for _ in 0..4 {
        let run = sandbox
            .cli(
                &dir,
                &["agents", "list", "--json", "--retries", "6"],
                Some("svc_cli=debug"),
            )
            .await;
        assert_eq!(run.code, 0, "a read rides through the faults: {run:?}");
        assert_eq!(run.json()["data"].as_array().map(Vec::len), Some(2));
        retried.push_str(&run.stderr);
    }
    assert!(
        retried.contains("retrying") && retried.contains("429"),
        "the faults fired and were retried: {retried}"
    );
    let (code, stderr) = sandbox.interrupt().await;
    assert_eq!(code, 0, "{stderr}");
}

#[tokio::test]
async fn a_bad_fault_spec_is_a_usage_error() {
    let dir = TestDir::new();
    // Issue 44: a spec pasted unquoted with a space reads as one spec, and the error names
    // the pair at fault.
    let cases: [(&[&str], &str); 2] = [
        (&["drop=2"], "drop must be a share from 0 to 1"),
        (
            &["api-429=0.1,", "api-500=2,seed=7"],
            r#"--faults: pair 2, "api-500=2": api-500 must be a share from 0 to 1"#,
        ),
    ];
    for (spec, error) in cases {
        let mut args = vec!["sandbox", "--listen", "127.0.0.1:0", "--faults"];
        args.extend_from_slice(spec);
        let run = dir.run(&args).await;
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains(error), "{run:?}");
    }
    assert!(
        !dir.path("svc-sandbox.db").exists(),
        "nothing is created on a usage error"
    );
}

#[tokio::test]
async fn the_demo_recovers_every_lost_delivery_and_finds_the_silent_change() {
    let dir = TestDir::new();
    let run = dir.run(&["demo", "--json", "--calls", "24"]).await;
    assert_eq!(run.code, 0, "the self-check passes: {run:?}");
    let summary = run.json();
    assert_eq!(summary["ok"], true, "{summary:#}");
    assert_eq!(summary["problems"], Value::Array(Vec::new()));
    assert_eq!(summary["practiceCalls"]["made"], 24);
    let ids = |value: &Value| -> BTreeSet<String> {
        value
            .as_array()
            .expect("ids")
            .iter()
            .map(|v| v.as_str().expect("id").to_owned())
            .collect()
    };
    let recovered = ids(&summary["recoveredCallIds"]);
    let dropped = ids(&summary["deliveries"]["droppedScoredCallIds"]);
    assert_eq!(
        recovered, dropped,
        "recovered equals the dropped deliveries of scored calls"
    );
    assert!(
        !dropped.is_empty(),
        "the fault profile lost some deliveries: {summary:#}"
    );
    assert_eq!(
        summary["reconcile"]["totals"]["recovered"].as_u64(),
        Some(recovered.len() as u64)
    );
    let scored = summary["scoredCalls"].as_u64().expect("scored calls");
    assert_eq!(
        summary["store"]["stored"].as_u64(),
        Some(scored),
        "each once"
    );
    assert_eq!(summary["store"]["missing"], Value::Array(Vec::new()));
    assert_eq!(
        summary["store"]["ledger"], summary["deliveries"]["delivered"],
        "duplicates are stored once"
    );
    let changed = summary["realCalls"]["redispositioned"]["callId"]
        .as_str()
        .expect("a real call was re-dispositioned");
    assert!(ids(&summary["changedCallIds"]).contains(changed));
    assert_eq!(summary["kept"], Value::Null);
    the_reference_names_every_key(&summary);

    let story = dir.run(&["demo", "--calls", "6", "--keep", "kept"]).await;
    assert_eq!(story.code, 0, "{story:?}");
    assert!(story.stdout.contains("Check passed"), "{}", story.stdout);
    assert!(
        story.stdout.contains("svc-cli store stats --store"),
        "{}",
        story.stdout
    );
    assert!(dir.path("kept/store.db").exists() && dir.path("kept/sandbox.db").exists());
    let stats = dir
        .run(&["store", "stats", "--store", "kept/store.db", "--json"])
        .await;
    assert_eq!(stats.code, 0, "{stats:?}");

    let again = dir.run(&["demo", "--keep", "kept"]).await;
    assert_eq!(again.code, 1, "a kept demo is not overwritten: {again:?}");
    assert!(again.stderr.contains("already holds a demo"), "{again:?}");
}

/// Svc-cli sends its key over plain HTTP to a loopback host only, so a
/// sandbox listening on every interface hands out a loopback base URL, and its own client
/// (the roster import on start, the demo) still works.
#[tokio::test]
async fn a_sandbox_on_every_interface_hands_out_a_loopback_base_url() {
    use svc_cli::sandbox::{Sandbox, SandboxOptions};
    use svc_client::AgentQuery;

    let dir = TestDir::new();
    let mut options = SandboxOptions::new(dir.path("svc.db"));
    options.listen = "0.0.0.0:0".parse().expect("address");
    let sandbox = Sandbox::start(options).await.expect("sandbox");
    assert!(
        sandbox.base_url.starts_with("http://127.0.0.1:"),
        "{}",
        sandbox.base_url
    );
    let client = sandbox.client().expect("client");
    client
        .agents_page(&AgentQuery::default(), None)
        .await
        .expect("the sandbox answers its own client");
    sandbox.stop().await.expect("stop");
}

/// A dialer record of the roster's agency and rep, recorded in `call.wav`.
pub(crate) fn dialer_record(dialer_call_id: &str, agency_id: &str) -> Value {
    let lines = [
        ("customer", "Hello?"),
        (
            "agent",
            "Hi, my name is Ada, I'm a licensed insurance agent. This call is recorded.",
        ),
        ("customer", "Okay, I'm listening."),
        (
            "agent",
            "The plan covers your doctors and the premium is forty dollars a month.",
        ),
        ("customer", "That sounds good, let's enroll."),
    ];
    let transcript: Vec<Value> = lines
        .iter()
        .enumerate()
        .map(|(i, (role, content))| {
            let start = 4.5 * i as f64;
            serde_json::json!({ "role": role, "content": content, "startTime": start, "endTime": start + 3.25 })
        })
        .collect();
    serde_json::json!({
        "dialerCallId": dialer_call_id,
        "agencyId": agency_id,
        "rep": { "agentId": "rep-ada", "name": "Ada Lovelace" },
        "startedAt": "2026-01-15T10:00:00.000Z",
        "durationSec": 312,
        "recording": "call.wav",
        "transcript": transcript,
        "disposition": "sale",
        "productLine": "health_plan_enrollment",
    })
}

#[tokio::test]
async fn sandbox_subcommands_enable_real_calls_ingest_a_record_and_re_disposition_it_on_a_running_sandbox()
 {
    let dir = TestDir::new();
    let sandbox = crate::browser::RunningSandbox::start(&dir).await;
    // The roster's agency, by its service id (POST /agencies of the same name is a no-op 200).
    let answer = reqwest::Client::new()
        .post(format!("{}/agencies", sandbox.base_url))
        .bearer_auth(&sandbox.api_key)
        .json(&serde_json::json!({ "platformAgencyId": "agency-1", "name": "First Agency" }))
        .send()
        .await
        .expect("the API answers");
    assert_eq!(answer.status().as_u16(), 200);
    let agency: Value = answer.json().await.expect("an agency");
    let agency = agency["id"]
        .as_str()
        .unwrap_or_else(|| panic!("the roster's agency: {agency:#}"))
        .to_owned();

    let enabled = dir
        .run(&[
            "--json",
            "sandbox",
            "enable-real-calls",
            "--db",
            "sandbox.db",
            "--agency-id",
            &agency,
        ])
        .await;
    assert_eq!(enabled.code, 0, "{enabled:?}");
    assert_eq!(enabled.json()["realCalls"], true, "{enabled:?}");

    dir.write("call.wav", b"RIFF\x1c\x00\x00\x00WAVEfmt fake-pcm");
    dir.write(
        "records.jsonl",
        format!("{}\n", dialer_record("d-1", &agency)),
    );
    let ingested = dir
        .run(&[
            "--json",
            "sandbox",
            "ingest-real",
            "--db",
            "sandbox.db",
            "--file",
            "records.jsonl",
        ])
        .await;
    assert_eq!(ingested.code, 0, "{ingested:?}");
    let first: Value = serde_json::from_str(ingested.stdout.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {ingested:?}"));
    let call_id = first["callId"]
        .as_str()
        .unwrap_or_else(|| panic!("a call: {ingested:?}"))
        .to_owned();
    let (status, call) = sandbox.api_get(&format!("/calls/{call_id}")).await;
    assert_eq!(status, 200, "the running sandbox serves it: {call}");
    assert_eq!(call["source"], "real_call", "{call:#}");

    let changed = dir
        .run(&[
            "--json",
            "sandbox",
            "redisposition",
            "--call-id",
            &call_id,
            "--disposition",
            "no_sale",
            "--db",
            "sandbox.db",
        ])
        .await;
    assert_eq!(changed.code, 0, "{changed:?}");
    assert_eq!(
        changed.json()["disposition"]["after"],
        "no_sale",
        "{changed:?}"
    );
    let (_, after) = sandbox.api_get(&format!("/calls/{call_id}")).await;
    assert_ne!(
        (&after["score"], &after["scoredAt"]),
        (&call["score"], &call["scoredAt"]),
        "the API serves the call scored again: {after:#}"
    );

    // An invalid record exits 1; no sandbox at --db is a usage error.
    dir.write("bad.jsonl", "{\"dialerCallId\": \"d-2\"}\n");
    let bad = dir
        .run(&[
            "sandbox",
            "ingest-real",
            "--db",
            "sandbox.db",
            "--file",
            "bad.jsonl",
        ])
        .await;
    assert_eq!(bad.code, 1, "{bad:?}");
    let missing = dir
        .run(&[
            "sandbox",
            "ingest-real",
            "--db",
            "none.db",
            "--file",
            "records.jsonl",
        ])
        .await;
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(
        missing.stderr.contains("no sandbox database at none.db"),
        "{missing:?}"
    );
    assert!(!dir.path("none.db").exists(), "nothing created");
}

/// REFERENCE.md's list of `demo --json` keys names every key the demo prints (issue "Every
/// command in the docs works as pasted": it left out `durationMs` and `kept`).
fn the_reference_names_every_key(summary: &Value) {
    let reference = include_str!("../../REFERENCE.md");
    let (_, list) = reference
        .split_once("`demo --json` prints")
        .expect("REFERENCE.md describes demo --json");
    let list = list.split("\n\n").next().unwrap_or_default();
    let keys = summary.as_object().expect("a JSON object").keys();
    for key in keys {
        assert!(
            list.contains(&format!("`{key}`")),
            "REFERENCE.md's `demo --json` list leaves out `{key}`: {list}"
        );
    }
}

/// The service id of the roster's agency `platform_id` (an upsert of the same name changes
/// nothing and answers its id).
pub(crate) async fn agency_id(
    sandbox: &Running,
    dir: &TestDir,
    platform_id: &str,
    name: &str,
) -> String {
    let upserted = sandbox
        .cli(
            dir,
            &[
                "--json",
                "agencies",
                "upsert",
                "--platform-agency-id",
                platform_id,
                "--name",
                name,
            ],
            None,
        )
        .await;
    assert_eq!(upserted.code, 0, "{upserted:?}");
    upserted.json()["id"]
        .as_str()
        .unwrap_or_else(|| panic!("an agency id: {upserted:?}"))
        .to_owned()
}

/// The agency `platform_id` (upserted as `name`), switched on for real calls; its service id.
pub(crate) async fn real_calls_agency(
    sandbox: &Running,
    dir: &TestDir,
    platform_id: &str,
    name: &str,
) -> String {
    let agency = agency_id(sandbox, dir, platform_id, name).await;
    let enabled = dir
        .run(&[
            "sandbox",
            "enable-real-calls",
            "--db",
            "sandbox.db",
            "--agency-id",
            &agency,
        ])
        .await;
    assert_eq!(enabled.code, 0, "{enabled:?}");
    agency
}

/// `sandbox deliveries --json --wait-idle --max-wait MAX_WAIT` on the sandbox's database.
pub(crate) async fn deliveries_when_idle(dir: &TestDir, max_wait: &str) -> Run {
    dir.run(&[
        "--json",
        "sandbox",
        "deliveries",
        "--db",
        "sandbox.db",
        "--wait-idle",
        "--max-wait",
        max_wait,
    ])
    .await
}

/// The attempts of `sandbox deliveries --json` for `call_id`: (attempt, status, faults).
fn attempts_of(listing: &Value, call_id: &str) -> Vec<(u64, Option<u64>, Vec<String>)> {
    listing["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("attempts: {listing:#}"))
        .iter()
        .filter(|a| a["callId"] == call_id)
        .map(|a| {
            let faults = a["faults"]
                .as_array()
                .map(|f| {
                    f.iter()
                        .filter_map(|f| f.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            (
                a["attempt"].as_u64().unwrap_or(0),
                a["status"].as_u64(),
                faults,
            )
        })
        .collect()
}

/// Ingests one dialer record `dialer_call_id` into the sandbox at `sandbox.db`; its call id.
pub(crate) async fn ingest_one(dir: &TestDir, dialer_call_id: &str, agency: &str) -> String {
    let file = format!("{dialer_call_id}.jsonl");
    dir.write(
        &file,
        format!("{}\n", dialer_record(dialer_call_id, agency)),
    );
    let ingested = dir
        .run(&[
            "--json",
            "sandbox",
            "ingest-real",
            "--db",
            "sandbox.db",
            "--file",
            &file,
        ])
        .await;
    assert_eq!(ingested.code, 0, "{ingested:?}");
    let line: Value = serde_json::from_str(ingested.stdout.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {ingested:?}"));
    line["callId"]
        .as_str()
        .unwrap_or_else(|| panic!("a call: {ingested:?}"))
        .to_owned()
}

/// Issue item 3: `sandbox deliveries` lists what the sandbox sent (each attempt with the faults
/// injected into it), `--wait-idle` returns once nothing is left to send (a delayed first
/// attempt, a dropped delivery's retry), and times out with exit 75 when the sandbox is
/// stopped; the sandbox logs each injected fault without RUST_LOG.
#[tokio::test]
async fn sandbox_deliveries_lists_each_attempt_with_its_faults_once_nothing_is_left_to_send() {
    use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&receiver)
        .await;
    let webhook_url = format!("{}/webhooks", receiver.uri());
    let dir = TestDir::new();
    dir.write("roster.csv", ROSTER);
    dir.write("call.wav", b"RIFF\x1c\x00\x00\x00WAVEfmt fake-pcm");
    let deliveries = [
        "--json",
        "sandbox",
        "deliveries",
        "--db",
        "sandbox.db",
        "--wait-idle",
        "--max-wait",
        "30s",
    ];

    // Delayed, badly signed and sent twice: one attempt, two requests.
    let sandbox = Running::start(
        &dir,
        &[
            "--roster",
            "roster.csv",
            "--webhook-url",
            &webhook_url,
            "--retry-delay",
            "1",
            "--faults",
            "delay=1s,duplicate=1,bad-signature=1",
        ],
    )
    .await;
    let agency = real_calls_agency(&sandbox, &dir, "agency-1", "First Agency").await;
    let sent_twice = ingest_one(&dir, "d-1", &agency).await;
    let waited = dir.run(&deliveries).await;
    assert_eq!(waited.code, 0, "{waited:?}");
    let listing = waited.json();
    assert_eq!(listing["idle"], true, "{listing:#}");
    assert_eq!(
        attempts_of(&listing, &sent_twice),
        vec![(
            1,
            Some(200),
            vec![
                "delayed".into(),
                "bad_signature".into(),
                "sent_twice".into()
            ]
        )],
        "{listing:#}"
    );
    let webhook_ids: Vec<String> = receiver
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|r| {
            r.headers
                .get("x-service-webhook-id")?
                .to_str()
                .ok()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(webhook_ids.len(), 2, "sent twice: {webhook_ids:?}");
    assert_eq!(webhook_ids[0], webhook_ids[1]);
    assert_eq!(
        Some(&listing["attempts"][0]["webhookId"]),
        Some(&Value::from(webhook_ids[0].clone()))
    );
    let table = dir
        .run(&["sandbox", "deliveries", "--db", "sandbox.db"])
        .await;
    assert_eq!(table.code, 0, "{table:?}");
    assert!(
        table.stdout.contains(&sent_twice) && table.stdout.contains("HTTP 200"),
        "{table:?}"
    );
    assert!(table.stderr.contains("nothing left to send"), "{table:?}");
    let (code, log) = sandbox.interrupt().await;
    assert_eq!(code, 0, "{log}");
    for fault in ["delayed", "bad_signature", "sent_twice"] {
        assert!(
            log.contains(&format!("fault injection: {fault}")),
            "the sandbox logs the {fault} fault by default: {log}"
        );
    }

    // Dropped: both attempts fail, the retry a second later; nothing reaches the receiver.
    let sandbox = Running::start(&dir, &["--retry-delay", "1", "--faults", "drop=1"]).await;
    let dropped = ingest_one(&dir, "d-2", &agency).await;
    let waited = dir.run(&deliveries).await;
    assert_eq!(waited.code, 0, "{waited:?}");
    let listing = waited.json();
    let dropped_twice = vec![
        (1, None, vec!["dropped".to_owned()]),
        (2, None, vec!["dropped".to_owned()]),
    ];
    assert_eq!(
        attempts_of(&listing, &dropped),
        dropped_twice,
        "{listing:#}"
    );
    assert_eq!(
        attempts_of(&listing, &sent_twice).len(),
        1,
        "kept: {listing:#}"
    );
    assert_eq!(receiver.received_requests().await.map(|r| r.len()), Some(2));
    let (code, log) = sandbox.interrupt().await;
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("fault injection: dropped"), "{log}");

    // Refused once, then accepted: the retry delivers it.
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&receiver)
        .await;
    let sandbox = Running::start(&dir, &["--retry-delay", "1", "--faults", "off"]).await;
    let retried = ingest_one(&dir, "d-4", &agency).await;
    let waited = dir.run(&deliveries).await;
    assert_eq!(waited.code, 0, "{waited:?}");
    let statuses: Vec<Option<u64>> = attempts_of(&waited.json(), &retried)
        .into_iter()
        .map(|(_, status, _)| status)
        .collect();
    assert_eq!(statuses, vec![Some(503), Some(200)], "{waited:?}");
    let (code, log) = sandbox.interrupt().await;
    assert_eq!(code, 0, "{log}");

    // A stopped sandbox sends nothing: the wait runs out, says so and exits 75.
    let stuck = ingest_one(&dir, "d-3", &agency).await;
    let waited = deliveries_when_idle(&dir, "1s").await;
    assert_eq!(waited.code, 75, "{waited:?}");
    assert!(
        waited
            .stderr
            .contains("still had something to send after 1s"),
        "{waited:?}"
    );
    let listing = waited.json();
    assert_eq!(listing["idle"], false, "{listing:#}");
    assert_eq!(listing["left"]["firstAttempts"], 1, "{listing:#}");
    assert_eq!(attempts_of(&listing, &stuck), Vec::new());
    reference_keys::assert_documented(HEADING, "attempt", &listing);

    // Issue 44, item 1: what became of each webhook, and the counts in both views.
    let by_webhook = dir
        .run(&[
            "--json",
            "sandbox",
            "deliveries",
            "--db",
            "sandbox.db",
            "--by-webhook",
        ])
        .await;
    assert_eq!(by_webhook.code, 0, "{by_webhook:?}");
    let listing = by_webhook.json();
    reference_keys::assert_documented(HEADING, "by-webhook", &listing);
    let fates: Vec<(String, String, Option<u64>, u64)> = listing["webhooks"]
        .as_array()
        .unwrap_or_else(|| panic!("webhooks: {listing:#}"))
        .iter()
        .map(|w| {
            (
                w["callId"].as_str().unwrap_or_default().to_owned(),
                w["fate"].as_str().unwrap_or_default().to_owned(),
                w["deliveredBy"].as_u64(),
                w["attempts"].as_u64().unwrap_or(99),
            )
        })
        .collect();
    assert_eq!(
        fates,
        vec![
            (sent_twice.clone(), "delivered".into(), Some(1), 1),
            (dropped.clone(), "lost".into(), None, 2),
            (retried.clone(), "delivered".into(), Some(2), 2),
            (stuck.clone(), "pending".into(), None, 0),
        ],
        "{listing:#}"
    );
    let counts = serde_json::json!(
        {"attempts": 5, "webhooks": 4, "delivered": 2, "lost": 1, "pending": 1}
    );
    assert_eq!(listing["summary"], counts, "{listing:#}");
    let summary = "5 attempts of 4 webhooks: 2 delivered, 1 lost, 1 pending; 1 first attempt \
                   and 0 retries pending, 0 calls being scored";
    for extra in [&[][..], &["--by-webhook"][..]] {
        let mut args = vec!["sandbox", "deliveries", "--db", "sandbox.db"];
        args.extend_from_slice(extra);
        let table = dir.run(&args).await;
        assert_eq!(table.code, 0, "{table:?}");
        assert!(table.stderr.contains(summary), "{table:?}");
        if !extra.is_empty() {
            assert!(table.stdout.contains("delivered (attempt 2)"), "{table:?}");
            assert!(table.stdout.contains("lost"), "{table:?}");
        }
        // Issue 44: a narrow terminal behind a pipe (COLUMNS) gets a table that fits, its
        // call ids whole.
        let narrow = TestDir::new().env("COLUMNS", "80");
        let db = dir.path("sandbox.db");
        let mut args = vec!["sandbox", "deliveries", "--db", db.to_str().expect("utf-8")];
        args.extend_from_slice(extra);
        let table = narrow.run(&args).await;
        assert_eq!(table.code, 0, "{table:?}");
        let widest = table.stdout.lines().map(|l| l.chars().count()).max();
        assert!(
            widest.is_some_and(|w| w <= 80),
            "{widest:?}\n{}",
            table.stdout
        );
        for call in [&sent_twice, &dropped, &retried] {
            assert!(table.stdout.contains(call.as_str()), "{}", table.stdout);
        }
    }
}

/// Where REFERENCE.md lists the keys of `sandbox deliveries --json`.
const HEADING: &str = "### `sandbox deliveries`";

/// Issue item 4: the shipped dialer records, dated November 2026, ingest as calls of the last
/// hours with `--relative-to-now` (as the demo does), in file order; the help says where a
/// recording must sit.
#[tokio::test]
async fn the_shipped_dialer_records_ingest_relative_to_now() {
    let dir = TestDir::new();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sandbox");
    let roster = fixtures.join("roster.csv");
    let records = fixtures.join("dialer-records.jsonl");
    let sandbox = Running::start(&dir, &["--roster", roster.to_str().expect("a UTF-8 path")]).await;
    for (platform_id, name) in [
        ("agency-north", "North Star Insurance"),
        ("agency-south", "Southern Cross Benefits"),
    ] {
        real_calls_agency(&sandbox, &dir, platform_id, name).await;
    }
    let before = chrono::Utc::now();
    let ingested = dir
        .run(&[
            "--json",
            "sandbox",
            "ingest-real",
            "--db",
            "sandbox.db",
            "--relative-to-now",
            "--file",
            records.to_str().expect("a UTF-8 path"),
        ])
        .await;
    assert_eq!(ingested.code, 0, "{ingested:?}");
    let call_ids: Vec<String> = ingested
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["scored"] == true)
        .filter_map(|line| line["callId"].as_str().map(str::to_owned))
        .collect();
    assert!(call_ids.len() >= 3, "{ingested:?}");
    let mut starts = Vec::new();
    for call_id in &call_ids {
        let got = sandbox
            .cli(&dir, &["--json", "calls", "show", call_id], None)
            .await;
        assert_eq!(got.code, 0, "{got:?}");
        let started = got.json()["startedAt"]
            .as_str()
            .and_then(svc_reconcile::time::parse_ts)
            .unwrap_or_else(|| panic!("a startedAt: {got:?}"));
        assert!(
            started < before && before - started < chrono::Duration::hours(24),
            "{call_id} started {started}, within the last day"
        );
        starts.push(started);
    }
    assert!(starts.is_sorted(), "file order: {starts:?}");

    // Issue 44: the README's example, its first call (a sale) re-dispositioned as a no sale,
    // shows the score change (it printed "overallScore 100 -> 100").
    let changed = dir
        .run(&[
            "sandbox",
            "redisposition",
            "--db",
            "sandbox.db",
            "--call-id",
            &call_ids[0],
            "--disposition",
            "no_sale",
        ])
        .await;
    assert_eq!(changed.code, 0, "{changed:?}");
    let overall: Vec<&str> = changed
        .stdout
        .split_once("overallScore ")
        .and_then(|(_, rest)| rest.split_once(','))
        .map(|(change, _)| change.split(" -> ").collect())
        .unwrap_or_default();
    assert!(
        overall.len() == 2 && overall[0] != overall[1],
        "the headline moves: {changed:?}"
    );
    assert!(
        changed.stdout.contains("complianceScorecard dropped"),
        "{changed:?}"
    );
    let (code, stderr) = sandbox.interrupt().await;
    assert_eq!(code, 0, "{stderr}");

    let help = dir.run(&["sandbox", "ingest-real", "--help"]).await;
    assert!(
        help.stdout.contains("recording_outside_dir") && help.stdout.contains("--relative-to-now"),
        "{help:?}"
    );
}
