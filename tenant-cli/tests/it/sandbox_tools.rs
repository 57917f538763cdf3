//! `svc-cli sandbox trigger` and `svc-cli sandbox resend`, as the real binary against a running
//! sandbox: triggered calls are real calls of the service (GET /calls lists them with the
//! fields asked for, their webhooks arrive); a resend reaches a receiver of the test's own with
//! the same webhook id and body, signed afresh, and the delivery log marks it; `--failed`
//! resends only what failed; a resend not made yet is left to send (`sandbox deliveries` waits
//! for it); each refusal is clear and exits non-zero.

use std::time::Duration;

use serde_json::Value;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{Run, Sandbox as TestDir, received};
use crate::sandbox::{ROSTER, Running, deliveries_when_idle};

const DB: &str = "sandbox.db";

/// A receiver that answers 200 to every webhook.
async fn receiver() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

/// A running sandbox with the test roster, sending to `url`, with `extra` flags.
async fn sandbox(dir: &TestDir, url: &str, extra: &[&str]) -> Running {
    let mut args = vec!["--roster", "roster.csv", "--webhook-url", url];
    args.extend_from_slice(extra);
    Running::start(dir, &args).await
}

/// A receiver answering 200, its webhook URL, and a test directory holding the test roster.
async fn setup() -> (MockServer, String, TestDir) {
    let receiver = receiver().await;
    let url = format!("{}/webhooks", receiver.uri());
    let dir = TestDir::new();
    dir.write("roster.csv", ROSTER);
    (receiver, url, dir)
}

/// Ctrl-C, and a clean stop.
async fn stop(running: Running) {
    let (code, log) = running.interrupt().await;
    assert_eq!(code, 0, "{log}");
}

/// `svc-cli sandbox <args> --db sandbox.db`.
async fn step(dir: &TestDir, args: &[&str]) -> Run {
    let mut all = vec!["sandbox"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--db", DB]);
    dir.run(&all).await
}

/// `sandbox trigger` with `args`: the call ids printed.
async fn trigger(dir: &TestDir, args: &[&str]) -> Vec<String> {
    let mut all = vec!["trigger"];
    all.extend_from_slice(args);
    let run = step(dir, &all).await;
    assert_eq!(run.code, 0, "{run:?}");
    run.stdout.lines().map(str::to_owned).collect()
}

/// `sandbox deliveries --json` once nothing is left to send.
async fn settled(dir: &TestDir) -> Value {
    let run = deliveries_when_idle(dir, "30s").await;
    assert_eq!(run.code, 0, "{run:?}");
    run.json()
}

/// The attempts of the listing for webhook `id`: (attempt, status, resend, faults).
fn attempts(listing: &Value, id: &str) -> Vec<(u64, Option<u64>, bool, Vec<String>)> {
    listing["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter(|a| a["webhookId"] == id)
        .map(|a| {
            (
                a["attempt"].as_u64().expect("attempt"),
                a["status"].as_u64(),
                a["resend"]
                    .as_bool()
                    .expect("every attempt says whether it is a resend"),
                a["faults"]
                    .as_array()
                    .expect("faults")
                    .iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect(),
            )
        })
        .collect()
}

/// The webhook id of the delivery announcing `call_id`.
fn webhook_of(listing: &Value, call_id: &str) -> String {
    listing["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .find(|a| a["callId"] == call_id)
        .and_then(|a| a["webhookId"].as_str())
        .unwrap_or_else(|| panic!("no delivery of {call_id}: {listing:#}"))
        .to_owned()
}

/// What the receiver got for webhook `id`: (signature header, body), in order.
async fn arrivals(server: &MockServer, id: &str) -> Vec<(String, Vec<u8>)> {
    received(server)
        .await
        .into_iter()
        .filter(|r| {
            r.headers
                .get("x-service-webhook-id")
                .is_some_and(|v| v.as_bytes() == id.as_bytes())
        })
        .map(|r| {
            let signature = r
                .headers
                .get("x-service-signature")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            (signature, r.body)
        })
        .collect()
}

/// Whether `header` is the contract's signature of `body` with `secret`.
fn signed_by(secret: &str, header: &str, body: &[u8]) -> bool {
    let Some(t) = header
        .strip_prefix("t=")
        .and_then(|rest| rest.split(',').next())
        .and_then(|t| t.parse::<i64>().ok())
    else {
        return false;
    };
    svc_contract::sign(secret, t, body) == header
}

#[tokio::test]
async fn a_resend_arrives_with_the_same_id_and_body_signed_afresh_and_the_log_marks_it() {
    let (receiver, url, dir) = setup().await;
    let running = sandbox(&dir, &url, &[]).await;
    let secret = running.export("SVC_SIGNING_SECRET").to_owned();
    let calls = trigger(&dir, &[]).await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    let listing = settled(&dir).await;
    let id = webhook_of(&listing, &calls[0]);

    let resent = dir
        .run(&["--json", "sandbox", "resend", &id, "--db", DB])
        .await;
    assert_eq!(resent.code, 0, "{resent:?}");
    let made = resent.json();
    assert_eq!(made["notMade"], serde_json::json!([]), "{made:#}");
    assert_eq!(made["attempts"][0]["webhookId"], id.as_str());
    assert_eq!(made["attempts"][0]["attempt"], 2);
    assert_eq!(made["attempts"][0]["status"], 200);
    assert_eq!(made["attempts"][0]["resend"], true);

    let got = arrivals(&receiver, &id).await;
    assert_eq!(got.len(), 2, "the first attempt and the resend");
    assert_eq!(got[0].1, got[1].1, "the same body, byte for byte");
    for (signature, body) in &got {
        assert!(signed_by(&secret, signature, body), "{signature}");
    }
    let listing = settled(&dir).await;
    assert_eq!(
        attempts(&listing, &id),
        vec![(1, Some(200), false, vec![]), (2, Some(200), true, vec![])]
    );
    let table = step(&dir, &["deliveries"]).await;
    assert!(table.stdout.contains("2 (resend)"), "{table:?}");

    // The table form, and a second resend: attempt 3.
    let again = step(&dir, &["resend", &id]).await;
    assert_eq!(again.code, 0, "{again:?}");
    assert!(
        again.stdout.contains(&id) && again.stdout.contains("3 (resend)"),
        "{again:?}"
    );
    assert!(again.stderr.contains("1 answered 2xx, 0 not"), "{again:?}");
    assert_eq!(arrivals(&receiver, &id).await.len(), 3);
    stop(running).await;
}

#[tokio::test]
async fn resend_failed_sends_again_only_what_failed_and_faults_apply_only_when_asked() {
    let (receiver, url, dir) = setup().await;
    let running = sandbox(&dir, &url, &[]).await;
    let delivered = trigger(&dir, &[]).await;
    let listing = settled(&dir).await;
    let delivered = webhook_of(&listing, &delivered[0]);
    stop(running).await;

    // Every delivery dropped, twice (the retry a second later).
    let running = sandbox(&dir, &url, &["--faults", "drop=1", "--retry-delay", "1"]).await;
    let lost = trigger(&dir, &["--count", "2"]).await;
    let listing = settled(&dir).await;
    let lost: Vec<String> = lost.iter().map(|c| webhook_of(&listing, c)).collect();
    for id in &lost {
        assert_eq!(
            attempts(&listing, id),
            vec![
                (1, None, false, vec!["dropped".to_owned()]),
                (2, None, false, vec!["dropped".to_owned()])
            ]
        );
        assert!(arrivals(&receiver, id).await.is_empty());
    }

    // --with-faults: the drop applies to the resend too; exit 1.
    let faulted = dir
        .run(&[
            "--json",
            "sandbox",
            "resend",
            &lost[0],
            "--with-faults",
            "--db",
            DB,
        ])
        .await;
    assert_eq!(faulted.code, 1, "{faulted:?}");
    assert_eq!(
        faulted.json()["attempts"][0]["faults"],
        serde_json::json!(["dropped"])
    );
    assert!(arrivals(&receiver, &lost[0]).await.is_empty());

    // --failed: the two lost ones, without faults; not the delivered one.
    let resent = dir
        .run(&["--json", "sandbox", "resend", "--failed", "--db", DB])
        .await;
    assert_eq!(resent.code, 0, "{resent:?}");
    let made = resent.json();
    let ids: Vec<&str> = made["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter_map(|a| a["webhookId"].as_str())
        .collect();
    assert_eq!(ids, [lost[0].as_str(), lost[1].as_str()], "{made:#}");
    for id in &lost {
        assert_eq!(arrivals(&receiver, id).await.len(), 1, "{id} arrived once");
    }
    assert_eq!(arrivals(&receiver, &delivered).await.len(), 1, "not resent");
    let listing = settled(&dir).await;
    assert_eq!(attempts(&listing, &lost[1]).len(), 3);
    assert_eq!(
        attempts(&listing, &lost[1])[2],
        (3, Some(200), true, vec![])
    );

    // Nothing failed any more: nothing to resend, exit 0.
    let none = step(&dir, &["resend", "--failed"]).await;
    assert_eq!(none.code, 0, "{none:?}");
    assert!(none.stderr.contains("nothing to resend"), "{none:?}");
    stop(running).await;
}

#[tokio::test]
async fn resend_refuses_an_unknown_id_a_stopped_sandbox_and_a_sandbox_without_a_webhook_url() {
    let (receiver, url, dir) = setup().await;

    let missing = step(&dir, &["resend", "wh_nope"]).await;
    assert_eq!(missing.code, 2, "no database yet: {missing:?}");

    let running = sandbox(&dir, &url, &[]).await;
    let call = trigger(&dir, &[]).await;
    let id = webhook_of(&settled(&dir).await, &call[0]);
    let unknown = step(&dir, &["resend", "wh_nope"]).await;
    assert_eq!(unknown.code, 1, "{unknown:?}");
    assert!(unknown.stderr.contains("no webhook wh_nope"), "{unknown:?}");
    let neither = step(&dir, &["resend"]).await;
    assert_eq!(neither.code, 2, "{neither:?}");
    let both = step(&dir, &["resend", &id, "--failed"]).await;
    assert_eq!(both.code, 2, "{both:?}");
    stop(running).await;

    let stopped = step(&dir, &["resend", &id]).await;
    assert_eq!(stopped.code, 1, "{stopped:?}");
    assert!(
        stopped.stderr.contains("no sandbox is running"),
        "{stopped:?}"
    );

    let running = Running::start(&dir, &["--webhook-url", ""]).await;
    let no_url = step(&dir, &["resend", &id]).await;
    assert_eq!(no_url.code, 1, "{no_url:?}");
    assert!(no_url.stderr.contains("no webhook URL"), "{no_url:?}");
    assert_eq!(arrivals(&receiver, &id).await.len(), 1, "nothing resent");
    let listing = settled(&dir).await;
    assert_eq!(attempts(&listing, &id).len(), 1, "nothing logged");
    stop(running).await;
}

/// A resend the sandbox does not make within --max-wait exits 75 naming it, and stays queued:
/// `deliveries` counts it as left to send, `--wait-idle` waits for it, and the next start
/// makes it.
#[tokio::test]
async fn a_resend_not_made_in_time_exits_75_and_the_next_start_makes_it() {
    let (receiver, url, dir) = setup().await;
    let running = sandbox(&dir, &url, &[]).await;
    let call = trigger(&dir, &[]).await;
    let id = webhook_of(&settled(&dir).await, &call[0]);
    stop(running).await;

    // Something holds the lock a running sandbox holds, but makes no resend.
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path("sandbox.db.running"))
        .expect("the sandbox left its lock file");
    lock.lock().expect("lock");
    let late = dir
        .run(&[
            "--json",
            "sandbox",
            "resend",
            &id,
            "--max-wait",
            "1s",
            "--db",
            DB,
        ])
        .await;
    assert_eq!(late.code, 75, "{late:?}");
    assert_eq!(late.json()["notMade"], serde_json::json!([id.as_str()]));
    assert!(
        late.stderr.contains("1 resend(s) not made after 1s"),
        "{late:?}"
    );
    drop(lock);

    // Left to send while no sandbox makes it: listed, said, and waited for.
    let left = "1 resend asked for and not made";
    let listed = dir
        .run(&["--json", "sandbox", "deliveries", "--db", DB])
        .await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let listing = listed.json();
    assert_eq!(listing["idle"], false, "{listing:#}");
    assert_eq!(listing["left"]["resends"], 1, "{listing:#}");
    assert!(listed.stderr.contains(left), "{listed:?}");
    let waited = deliveries_when_idle(&dir, "1s").await;
    assert_eq!(waited.code, 75, "{waited:?}");
    assert!(
        waited
            .stderr
            .contains("still had something to send after 1s")
            && waited.stderr.contains(left),
        "{waited:?}"
    );

    let running = Running::start(&dir, &[]).await;
    let listing = settled(&dir).await;
    assert_eq!(listing["left"]["resends"], 0, "{listing:#}");
    assert_eq!(
        attempts(&listing, &id),
        vec![(1, Some(200), false, vec![]), (2, Some(200), true, vec![])]
    );
    assert_eq!(arrivals(&receiver, &id).await.len(), 2);
    stop(running).await;
}

/// The calls of `GET /calls` (through `svc-cli calls list`) of the last hour with `args`.
async fn listed(running: &Running, dir: &TestDir, args: &[&str]) -> Vec<Value> {
    let from = (chrono::Utc::now() - chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut all = vec!["--json", "calls", "list", "--from", &from];
    all.extend_from_slice(args);
    let run = running.cli(dir, &all, None).await;
    assert_eq!(run.code, 0, "{run:?}");
    run.json()["data"].as_array().cloned().unwrap_or_default()
}

/// The body of the webhook that announced `call_id`.
async fn webhook_body(server: &MockServer, call_id: &str) -> Value {
    for _ in 0..100 {
        let found = received(server).await.into_iter().find_map(|r| {
            let body: Value = serde_json::from_slice(&r.body).ok()?;
            (body["callId"] == call_id).then_some(body)
        });
        if let Some(body) = found {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no webhook announced {call_id}");
}

#[tokio::test]
async fn trigger_makes_real_scored_calls_with_each_flag_and_sends_their_webhooks() {
    let (receiver, url, dir) = setup().await;
    let running = sandbox(&dir, &url, &[]).await;

    // The defaults: one scored practice call of the first rep.
    let first = trigger(&dir, &[]).await;
    let calls = listed(&running, &dir, &["--source", "roleplay"]).await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["id"], first[0].as_str());
    // The first rep registered: the roster's import registers its reps concurrently, so either
    // may be first here (the order itself is tested in service/src/db/triggers.rs).
    let default_rep = calls[0]["platformAgentId"].clone();
    assert!(
        default_rep == "rep-ada" || default_rep == "rep-grace",
        "{default_rep}"
    );
    assert_eq!(calls[0]["drillKey"], "ma-full-sale");
    assert_eq!(calls[0]["durationSec"], 240);
    let body = webhook_body(&receiver, &first[0]).await;
    assert_eq!(
        (body["success"].as_bool(), body["source"].as_str()),
        (Some(true), Some("roleplay"))
    );

    // Real calls, for a rep named by platformAgentId, two of them, as JSON.
    let run = step(
        &dir,
        &[
            "trigger",
            "--source",
            "real_call",
            "--agent",
            "rep-grace",
            "--count",
            "2",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let real: Vec<String> = run.stdout.lines().map(str::to_owned).collect();
    assert_eq!(real.len(), 2, "{run:?}");
    assert!(
        run.stderr
            .contains("triggered 2 real_call call(s): 2 scored"),
        "{run:?}"
    );
    let calls = listed(&running, &dir, &["--source", "real_call"]).await;
    let ids: Vec<&str> = calls.iter().filter_map(|c| c["id"].as_str()).collect();
    for id in &real {
        assert!(ids.contains(&id.as_str()), "{id} listed: {calls:?}");
    }
    assert!(
        calls
            .iter()
            .all(|c| c["platformAgentId"] == "rep-grace" && c["drillKey"].is_null())
    );
    let detail = running
        .cli(&dir, &["--json", "calls", "show", &real[0]], None)
        .await;
    assert_eq!(detail.code, 0, "{detail:?}");
    let detail = detail.json();
    let overall = detail["score"]["overallScore"].as_f64().unwrap_or(-1.0);
    assert!((60.0..=100.0).contains(&overall), "{detail:#}");
    let body = webhook_body(&receiver, &real[1]).await;
    assert_eq!(body["source"], "real_call");

    // A rep named by email, then by NPN; --json.
    let by_email = dir
        .run(&[
            "--json",
            "sandbox",
            "trigger",
            "--agent",
            "GRACE@example.com",
            "--db",
            DB,
        ])
        .await;
    assert_eq!(by_email.code, 0, "{by_email:?}");
    let made = by_email.json();
    assert_eq!(made["calls"][0]["source"], "roleplay");
    assert_eq!(made["calls"][0]["scored"], true);
    assert_eq!(made["calls"][0]["webhookQueued"], true);
    let by_email = made["calls"][0]["callId"]
        .as_str()
        .expect("callId")
        .to_owned();
    let by_npn = trigger(&dir, &["--agent", "123-4567"]).await;
    let calls = listed(&running, &dir, &["--source", "roleplay"]).await;
    let agent_of = |id: &str| {
        calls
            .iter()
            .find(|c| c["id"] == id)
            .map(|c| c["platformAgentId"].clone())
    };
    assert_eq!(agent_of(&by_email), Some(Value::from("rep-grace")));
    assert_eq!(agent_of(&by_npn[0]), Some(Value::from("rep-ada")));

    // Not scored: the webhook says why, and the call is not listed.
    let silent = trigger(&dir, &["--success", "false"]).await;
    let cut = trigger(
        &dir,
        &["--success", "false", "--failure-reason", "never-completed"],
    )
    .await;
    let silent_real = trigger(&dir, &["--source", "real_call", "--success", "false"]).await;
    for (call, message) in [
        (&silent[0], "never spoke"),
        (&cut[0], "never completed"),
        (&silent_real[0], "no turn by the rep"),
    ] {
        let body = webhook_body(&receiver, call).await;
        assert_eq!(body["success"], false, "{body}");
        assert_eq!(body["reason"], "SCORING_INCOMPLETE", "{body}");
        assert!(
            body["reasonMessage"]
                .as_str()
                .is_some_and(|m| m.contains(message)),
            "{body}"
        );
        let get = running.cli(&dir, &["calls", "show", call], None).await;
        assert_eq!(get.code, 1, "not retrievable: {get:?}");
    }
    stop(running).await;
}

#[tokio::test]
async fn trigger_refuses_bad_input_and_makes_nothing() {
    let dir = TestDir::new();
    // No roster yet: nothing to make a call for.
    let running = Running::start(&dir, &[]).await;
    let empty = step(&dir, &["trigger"]).await;
    assert_eq!(empty.code, 1, "{empty:?}");
    assert!(empty.stderr.contains("the roster has no rep"), "{empty:?}");
    stop(running).await;
    dir.write("roster.csv", ROSTER);
    let running = Running::start(&dir, &["--roster", "roster.csv"]).await;
    for (args, says) in [
        (
            vec!["--agent", "nobody"],
            "no rep of the roster answers to \"nobody\"",
        ),
        (vec!["--agent", " "], "--agent is empty"),
        (vec!["--count", "0"], "0 is not in 1..=100"),
        (vec!["--count", "101"], "101 is not in 1..=100"),
        (vec!["--success", "maybe"], "invalid value 'maybe'"),
        (vec!["--source", "dialer"], "invalid value 'dialer'"),
        (vec!["--failure-reason", "tired"], "invalid value 'tired'"),
        (
            vec!["--failure-reason", "rep-never-spoke"],
            "add --success false",
        ),
        (
            vec![
                "--source",
                "real_call",
                "--success",
                "false",
                "--failure-reason",
                "never-completed",
            ],
            "never completed is never stored",
        ),
    ] {
        let mut all = vec!["trigger"];
        all.extend_from_slice(&args);
        let run = step(&dir, &all).await;
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(says), "{args:?}: {run:?}");
        assert!(run.stdout.is_empty(), "{args:?}: {run:?}");
    }
    for source in ["roleplay", "real_call"] {
        let calls = listed(&running, &dir, &["--source", source]).await;
        assert!(calls.is_empty(), "nothing made: {calls:?}");
    }
    stop(running).await;
}
