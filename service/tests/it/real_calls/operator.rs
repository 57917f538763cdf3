//! The operator's real-call commands, run as the real `svc-service` binary against the
//! database of a running service: `agency enable-real-calls` / `disable-real-calls`,
//! `calls redisposition --json` and `calls sweep-audio --now` here, `calls ingest-real` in
//! [`super::operator_ingest`]; the helpers that run the binary are shared.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::support::*;

pub(super) struct Run {
    pub(super) code: i32,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

impl Run {
    /// Each stdout line as JSON.
    pub(super) fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("JSON: {line}")))
            .collect()
    }

    #[track_caller]
    pub(super) fn expect(self, code: i32) -> Run {
        assert_eq!(
            self.code, code,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Runs `svc-service <args> --db <db>` in `cwd`, with `stdin` piped in.
pub(super) async fn svc_in(db: &Path, args: &[&str], cwd: &Path, stdin: Option<&str>) -> Run {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-service"))
        .args(args)
        .arg("--db")
        .arg(db)
        .current_dir(cwd)
        .env_remove("SVC_DB")
        .env_remove("SVC_AUDIO_DIR")
        .env("RUST_LOG", "warn")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run svc-service");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(text.as_bytes()).await.expect("write stdin");
        drop(pipe);
    }
    let output = child.wait_with_output().await.expect("svc-service ran");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `svc-service <args>` against the world's database, in its recordings dir.
pub(super) async fn svc(world: &World, args: &[&str]) -> Run {
    svc_in(&world.app.config.db_path, args, world.dir.path(), None).await
}

/// Writes `text` as `name` in the recordings dir; returns its path.
pub(super) fn file(world: &World, name: &str, text: &str) -> String {
    let path = world.dir.path().join(name);
    std::fs::write(&path, text).expect("write");
    path.to_string_lossy().into_owned()
}

/// Writes `records` as a JSON array and ingests it with `--json`, which must exit 0; returns
/// the result lines.
pub(super) async fn ingest_file(world: &World, name: &str, records: &[Value]) -> Vec<Value> {
    let path = file(world, name, &array(records));
    let tenant = world.tenant.id.clone();
    let args = [
        "calls",
        "ingest-real",
        "--tenant",
        &tenant,
        "--file",
        &path,
        "--json",
    ];
    svc(world, &args).await.expect(0).lines()
}

/// `calls sweep-audio --now <at> --json`, which must exit 0; returns what it printed.
pub(super) async fn sweep_at(world: &World, at: &str) -> Value {
    let args = ["calls", "sweep-audio", "--now", at, "--json"];
    let run = svc(world, &args).await.expect(0);
    serde_json::from_str(&run.stdout).expect("JSON")
}

/// A JSON array of `records`.
pub(super) fn array(records: &[Value]) -> String {
    Value::Array(records.to_vec()).to_string()
}

#[tokio::test]
async fn agency_settings_apply_to_later_ingests_until_real_calls_are_disabled() {
    let world = World::new().await;
    let tenant = world.tenant.id.clone();
    let agency = world.agency("ag-3p", None).await;
    world
        .agent(
            "ag-3p",
            json!({ "platformAgentId": "rep-3p", "npn": "3141592" }),
        )
        .await;
    let flags = [
        "--tenant",
        tenant.as_str(),
        "--agency-id",
        agency.as_str(),
        "--json",
    ];
    let mut enable = vec![
        "agency",
        "enable-real-calls",
        "--third-party-dialer",
        "--rubric",
        "own",
    ];
    enable.extend(flags);
    let enabled: Value =
        serde_json::from_str(&svc(&world, &enable).await.expect(0).stdout).expect("JSON");
    assert_eq!(
        (
            &enabled["realCalls"],
            &enabled["thirdPartyDialer"],
            &enabled["rubric"]
        ),
        (&json!(true), &json!(true), &json!("own"))
    );
    let out = ingest_file(
        &world,
        "first.json",
        &[
            with(
                record("d-1", &agency),
                json!({ "rep": { "agentId": "rep-3p" } }),
            ),
            with(
                record("d-2", &agency),
                json!({ "rep": { "npn": "314-1592" } }),
            ),
        ],
    )
    .await;
    assert_eq!(out[0]["dropped"], "unregistered_rep", "agent ids not tried");
    let call_id = out[1]["callId"].as_str().expect("stored by NPN");
    let score = &world.detail(call_id).await.expect(200)["score"];
    assert_eq!(score["compliancePercent"], 60, "{score}");
    assert_eq!(
        score.get("complianceScorecard"),
        None,
        "own rubric: {score}"
    );

    let mut disable = vec!["agency", "disable-real-calls"];
    disable.extend(flags);
    let disabled: Value =
        serde_json::from_str(&svc(&world, &disable).await.expect(0).stdout).expect("JSON");
    assert_eq!(disabled["realCalls"], false);
    let out = ingest_file(
        &world,
        "later.json",
        &[with(
            record("d-3", &agency),
            json!({ "rep": { "npn": "3141592" } }),
        )],
    )
    .await;
    assert_eq!(out[0]["dropped"], "agency_not_enabled");

    let unknown = svc(
        &world,
        &[
            "agency",
            "enable-real-calls",
            "--tenant",
            &tenant,
            "--agency-id",
            "svc_agency_nope",
        ],
    )
    .await
    .expect(1);
    assert!(unknown.stderr.contains("no agency"), "{}", unknown.stderr);
}

#[tokio::test]
async fn calls_redisposition_json_prints_the_old_and_new_score_and_sends_nothing() {
    let mut world = World::new().await;
    let tenant = world.tenant.id.clone();
    let call_id = world.stored(record("d-1", &world.agency)).await;
    world.received(1).await;
    let before = world.detail(&call_id).await.expect(200);
    let args = [
        "calls",
        "redisposition",
        "--tenant",
        &tenant,
        "--call-id",
        &call_id,
        "--disposition",
        "no_sale",
        "--json",
    ];
    let run = svc(&world, &args).await.expect(0);
    let printed: Value = serde_json::from_str(&run.stdout).expect("JSON");
    let after = world.detail(&call_id).await.expect(200);
    assert_eq!(printed["callId"], call_id.as_str());
    assert_eq!(
        printed["disposition"],
        json!({ "before": "sale", "after": "no_sale" })
    );
    assert_eq!(printed["score"]["before"], before["score"]);
    assert_eq!(printed["score"]["after"], after["score"]);
    assert_eq!(printed["scoredAt"], after["scoredAt"]);
    assert_eq!(after["updatedAt"], after["scoredAt"]);
    assert_ne!(after["scoredAt"], before["scoredAt"]);
    assert_eq!(after["score"].get("complianceScorecard"), None);
    assert_eq!(world.deliveries().await.len(), 1);
    assert_eq!(world.deliver_due().await, 0);
    world.sink.assert_silent(Duration::from_millis(300)).await;

    let unknown = [
        "calls",
        "redisposition",
        "--tenant",
        &tenant,
        "--call-id",
        "svc_call_nope",
        "--disposition",
        "sale",
    ];
    svc(&world, &unknown).await.expect(1);
    let mut bad = args;
    bad[7] = "maybe";
    svc(&world, &bad).await.expect(2);
}

#[tokio::test]
async fn calls_sweep_audio_now_forgets_recordings_archived_30_days_before() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let files = world.archived_files();
    assert_eq!(
        sweep_at(&world, "2026-02-14T11:59:59Z").await,
        json!({ "expired": 0, "deletedFiles": 0 })
    );
    assert!(files[0].is_file());
    assert_eq!(
        sweep_at(&world, "2026-02-14T12:00:00Z").await,
        json!({ "expired": 1, "deletedFiles": 1 })
    );
    assert!(!files[0].exists());
    let detail = world.detail(&call_id).await.expect(200);
    assert_eq!(detail["audioUrl"], Value::Null);
    assert_eq!(detail["audioUrlExpiresAt"], Value::Null);

    let bad = svc(&world, &["calls", "sweep-audio", "--now", "next tuesday"]).await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

/// `svc_service::sandbox::operate` takes the steps as typed arguments (no command-line types),
/// as `svc-cli sandbox` calls it: the same steps as the binary's, with its typed errors.
#[tokio::test]
async fn the_sandbox_runs_the_operator_steps_from_typed_arguments() {
    use svc_service::sandbox::{
        Disposition, Dropped, OperatorStep, OperatorTarget, Rubric, Usage, operate,
    };

    let world = World::new().await;
    let tenant = world.tenant.id.clone();
    let agency = world.agency("ag-typed", None).await;
    world
        .agent(
            "ag-typed",
            json!({ "platformAgentId": "rep-typed", "npn": "2718281" }),
        )
        .await;
    let target = OperatorTarget {
        json: true,
        ..OperatorTarget::new(&world.app.config.db_path)
    };
    let on = OperatorStep::EnableRealCalls {
        tenant: tenant.clone(),
        agency_id: agency.clone(),
        third_party_dialer: false,
        rubric: Rubric::Own,
    };
    operate(&target, on).await.expect("switched on");
    let typed_rep = json!({ "rep": { "agentId": "rep-typed" } });
    let call_id = world
        .stored(with(record("t-1", &agency), typed_rep.clone()))
        .await;
    let before = world.detail(&call_id).await.expect(200);
    assert_eq!(
        before["score"].get("complianceScorecard"),
        None,
        "own rubric"
    );

    let redisposition = OperatorStep::Redisposition {
        tenant: tenant.clone(),
        call_id: call_id.clone(),
        disposition: Disposition::NoSale,
    };
    operate(&target, redisposition)
        .await
        .expect("re-dispositioned");
    let after = world.detail(&call_id).await.expect(200);
    assert_ne!(after["scoredAt"], before["scoredAt"], "scored again");

    let off = OperatorStep::DisableRealCalls {
        tenant: tenant.clone(),
        agency_id: agency.clone(),
    };
    operate(&target, off).await.expect("switched off");
    let out = world
        .ingest(vec![with(record("t-2", &agency), typed_rep)])
        .await;
    assert_eq!(dropped(&out[0]), Dropped::AgencyNotEnabled);

    let missing = OperatorStep::IngestReal {
        tenant,
        file: world.dir.path().join("missing.json"),
        relative_to_now: false,
    };
    let error = operate(&target, missing).await.expect_err("no such file");
    assert!(error.downcast_ref::<Usage>().is_some(), "{error:#}");
}
