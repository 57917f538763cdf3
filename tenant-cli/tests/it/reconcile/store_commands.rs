//! `store stats` and `store export` over a store a reconcile run filled.

use std::collections::BTreeSet;

use serde_json::json;
use svc_contract::CallSource;
use svc_fixtures::calls::{REAL_CALL, ROLEPLAY};

use super::{Fake, days_ago, fake, hours_ago, record_webhook, report, source_report, ts};

/// Three practice calls (one delivered by webhook) and two real calls, reconciled with no
/// grace: four recovered. Returns the practice and the real call ids, oldest first.
async fn filled() -> (Fake, Vec<String>, Vec<String>) {
    let fake = fake().await;
    let roleplay = fake
        .calls
        .add_many(ROLEPLAY, [hours_ago(3), hours_ago(2), hours_ago(1)]);
    let real = fake.calls.add_many(REAL_CALL, [days_ago(5), days_ago(2)]);
    record_webhook(
        &fake.store,
        &roleplay[0],
        CallSource::Roleplay,
        days_ago(10),
    );
    let run = fake.reconcile(&["--delivery-grace", "0s"]).await;
    assert_eq!(run.code, 3, "{run:?}");
    (fake, roleplay, real)
}

impl Fake {
    async fn store_command(&self, args: &[&str]) -> crate::helpers::Run {
        let store = self.store.to_str().expect("utf-8 path");
        let mut all = vec!["store"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--store", store]);
        self.sandbox.run(&all).await
    }
}

#[tokio::test]
async fn store_stats_json_counts_calls_deliveries_recoveries_and_watermarks() {
    let (fake, _, _) = filled().await;
    let last = fake.reconcile(&[]).await;
    assert_eq!(last.code, 0, "{last:?}");
    let last = report(&last);
    let run = fake.store_command(&["stats", "--json"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let stats = run.json();
    assert_eq!(stats["schemaVersion"], json!(svc_store::SCHEMA_VERSION));
    let of = |source: &str| {
        stats["calls"]
            .as_array()
            .expect("calls")
            .iter()
            .find(|c| c["source"] == json!(source))
            .cloned()
            .unwrap_or_else(|| panic!("{source} in {stats}"))
    };
    assert_eq!(of(ROLEPLAY)["calls"], json!(3));
    assert_eq!(of(ROLEPLAY)["delivered"], json!(1));
    assert_eq!(of(ROLEPLAY)["recovered"], json!(2));
    assert_eq!(of(REAL_CALL)["calls"], json!(2));
    assert_eq!(of(REAL_CALL)["recovered"], json!(2));
    assert_eq!(stats["deliveries"]["total"], json!(1));
    assert_eq!(stats["deliveries"]["scored"], json!(1));
    assert_eq!(stats["recovered"]["total"], json!(4));
    assert_eq!(stats["recovered"]["last24h"], json!(4));
    assert_eq!(stats["changed"]["total"], json!(0));
    for source in [ROLEPLAY, REAL_CALL] {
        assert_eq!(
            stats["sync"][source]["watermark"],
            source_report(&last, source)["watermark"],
            "{source}"
        );
    }
    assert_eq!(stats["lastRun"]["id"], last["runId"]);
    assert_eq!(stats["lastRun"]["outcome"], json!("ok"));
    assert_eq!(stats["lastRun"]["exitCode"], json!(0));
}

#[tokio::test]
async fn store_export_jsonl_writes_each_detail_exactly_as_served() {
    let (fake, roleplay, real) = filled().await;
    let run = fake.store_command(&["export"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "one line per call: {}", run.stdout);
    let served: BTreeSet<String> = roleplay
        .iter()
        .chain(&real)
        .map(|id| fake.calls.detail_text(id).expect("served"))
        .collect();
    let exported: BTreeSet<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    assert_eq!(exported, served);
}

#[tokio::test]
async fn store_export_csv_has_the_header_and_the_row_values() {
    let (fake, roleplay, _) = filled().await;
    let run = fake.store_command(&["export", "--format", "csv"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let mut reader = csv::Reader::from_reader(run.stdout.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .expect("a header")
        .iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        header.join(","),
        "id,source,agentId,agencyId,platformAgentId,platformAgencyId,externalUserId,\
         externalAgencyId,drillKey,startedAt,endedAt,durationSec,scoredAt,updatedAt,\
         overallScore,compliancePercent"
    );
    let rows: Vec<csv::StringRecord> = reader.records().collect::<Result<_, _>>().expect("records");
    assert_eq!(rows.len(), 5);
    let detail = fake.calls.detail(&roleplay[1]).expect("served");
    let row = rows
        .iter()
        .find(|r| r.get(0) == Some(roleplay[1].as_str()))
        .expect("the call's line");
    let text = |key: &str| detail[key].as_str().unwrap_or_default().to_owned();
    let expected = [
        roleplay[1].clone(),
        "roleplay".into(),
        "svc_agent_fx0001".into(),
        "svc_agency_fx0001".into(),
        "rep-1001".into(),
        "acme-1".into(),
        "rep-1001".into(),
        "acme-1".into(),
        "ma-full-sale".into(),
        text("startedAt"),
        text("endedAt"),
        "750".into(),
        text("scoredAt"),
        text("updatedAt"),
        "82".into(),
        "90".into(),
    ];
    assert_eq!(
        row.iter().collect::<Vec<_>>(),
        expected.iter().map(String::as_str).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn store_export_filters_by_source_and_since() {
    let (fake, roleplay, real) = filled().await;
    let ids = |stdout: &str| -> BTreeSet<String> {
        stdout
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                v["id"].as_str().expect("id").to_owned()
            })
            .collect()
    };
    let run = fake
        .store_command(&["export", "--source", "real_call"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(ids(&run.stdout), real.iter().cloned().collect());

    let since = ts(hours_ago(2) - chrono::Duration::minutes(1));
    let run = fake.store_command(&["export", "--since", &since]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        ids(&run.stdout),
        roleplay[1..].iter().cloned().collect(),
        "practice calls that ended since then; real calls started days ago"
    );
}

#[tokio::test]
async fn store_stats_on_a_missing_store_exits_2() {
    let fake = fake().await;
    let run = fake.store_command(&["stats"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("no store at"), "{}", run.stderr);
    assert!(!fake.store.exists(), "none created");
}
