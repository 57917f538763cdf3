//! Ingesting dialer records through the library: every drop reason leaves no trace (nothing
//! stored, listed, delivered or billed), invalid records are reported and store nothing, the
//! same call ingested twice changes nothing, and stored real calls, scored or not, spend the
//! monthly allowance.

use std::time::Duration;

use serde_json::json;
use svc_service::db::{Rubric, TenantChange};
use svc_service::realcall::audio::Archive;
use svc_service::realcall::ingest::{Disposal, Ingest, read_records};

use super::support::*;

#[tokio::test]
async fn every_drop_reason_stores_lists_delivers_and_bills_nothing() {
    let mut world = World::new().await;
    world
        .app
        .change(
            &world.tenant,
            TenantChange::MonthlyAllowanceMinutes(Some(1)),
        )
        .await;
    let off = world.agency("ag-off", None).await;
    world
        .agent("ag-off", json!({ "platformAgentId": "rep-off" }))
        .await;
    world.recording("empty.wav", b"");
    let on = world.agency.clone();
    // An hour each: any of them billed would spend the one-minute allowance.
    let hour = |id: &str, changes| {
        with(
            with(record(id, &on), json!({ "durationSec": 3600 })),
            changes,
        )
    };
    let records = vec![
        with(
            record("d-off", &off),
            json!({ "rep": { "agentId": "rep-off" }, "durationSec": 3600 }),
        ),
        with(record("d-29s", &on), json!({ "durationSec": 29 })),
        hour("d-no-recording", json!({ "recording": null })),
        hour("d-empty-file", json!({ "recording": "empty.wav" })),
        hour("d-missing-file", json!({ "recording": "missing.wav" })),
        hour("d-no-transcript", json!({ "transcript": null })),
        hour("d-no-turns", json!({ "transcript": [] })),
        hour(
            "d-stranger",
            json!({ "rep": { "agentId": "rep-404", "name": "Nobody Known" } }),
        ),
        with(record("d-30s", &on), json!({ "durationSec": 30 })),
    ];
    let outcomes = world.ingest(records).await;

    let reasons: Vec<&str> = outcomes[..8].iter().map(|o| dropped(o).as_str()).collect();
    assert_eq!(
        reasons,
        [
            "agency_not_enabled",
            "too_short",
            "no_audio",
            "no_audio",
            "no_audio",
            "no_transcript",
            "no_transcript",
            "unregistered_rep",
        ]
    );
    let kept = stored_id(&outcomes[8]);
    for outcome in &outcomes[..8] {
        let id = outcome.dialer_call_id.as_deref().expect("dialer call id");
        let agency = if id == "d-off" { &off } else { &on };
        let stored = world.app.db.dialer_call(agency, id).await.expect("read");
        assert_eq!(stored, None, "{id} was stored");
    }
    assert_eq!(
        world.listed_ids().await,
        std::slice::from_ref(&kept),
        "only the 30 s call"
    );
    assert_eq!(world.archived_files().len(), 1, "only its recording");
    let deliveries = world.deliveries().await;
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].call_id, kept);
    let received = world.received(1).await;
    assert_eq!(received[0].json()["callId"], kept.as_str());
    world.sink.assert_silent(Duration::from_millis(300)).await;
    // 30 of the 60 seconds spent: the hours of the dropped calls were never billed.
    world.mint_status().await.expect(200);
}

#[tokio::test]
async fn invalid_records_are_reported_and_store_nothing() {
    let world = World::new().await;
    let other = world.app.tenant().await;
    let theirs = world.app.agency(&other, "their-agency").await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    world
        .app
        .db
        .set_real_calls(&other.id, &theirs, Some((false, Rubric::Default)))
        .await
        .expect("switch on")
        .expect("agency");
    let on = world.agency.clone();
    let mut no_agency = record("d-no-agency", &on);
    no_agency
        .as_object_mut()
        .expect("object")
        .remove("agencyId");
    let lines = [
        record("d-good", &on).to_string(),
        "{\"dialerCallId\": \"d-broken\", ".to_owned(),
        record("d-foreign", &theirs).to_string(),
        with(record("d-negative", &on), json!({ "durationSec": -1 })).to_string(),
        no_agency.to_string(),
        with(record("d-maybe", &on), json!({ "disposition": "maybe" })).to_string(),
    ];
    let records = read_records(&lines.join("\n")).expect("JSON lines read");
    let outcomes = world.ingest_results(records).await;

    stored_id(&outcomes[0]);
    let errors: Vec<String> = outcomes[1..]
        .iter()
        .map(|o| match &o.disposal {
            Disposal::Invalid(error) => error.clone(),
            other => panic!("record {} is not invalid: {other:?}", o.index),
        })
        .collect();
    assert!(errors[0].contains("not JSON"), "{}", errors[0]);
    assert_eq!(outcomes[1].dialer_call_id, None);
    assert!(
        errors[1].contains("not an agency of this tenant"),
        "{}",
        errors[1]
    );
    assert!(errors[2].contains("negative"), "{}", errors[2]);
    assert!(errors[3].contains("agencyId"), "{}", errors[3]);
    assert!(errors[4].contains("disposition"), "{}", errors[4]);

    let read = |agency: String, id: &'static str| {
        let db = world.app.db.clone();
        async move { db.dialer_call(&agency, id).await.expect("read") }
    };
    assert_eq!(read(theirs.clone(), "d-foreign").await, None);
    assert_eq!(read(on.clone(), "d-negative").await, None);
    assert_eq!(read(on.clone(), "d-maybe").await, None);
    assert_eq!(world.listed_ids().await.len(), 1);
    assert_eq!(world.deliveries().await.len(), 1);
    let theirs_listed = world
        .app
        .get(
            &other,
            &format!("/v1/calls?source=real_call&from={MORNING}"),
        )
        .await
        .expect(200);
    assert_eq!(
        theirs_listed["data"],
        json!([]),
        "nothing reached the other tenant"
    );
}

#[tokio::test]
async fn ingesting_the_same_file_twice_changes_nothing() {
    let mut world = World::new().await;
    let on = world.agency.clone();
    let file = vec![
        record("d-1", &on),
        with(
            record("d-2", &on),
            json!({ "transcript": turns(NO_REP_TURN) }),
        ),
    ];
    let first = world.ingest(file.clone()).await;
    let ids = [stored_id(&first[0]), stored_id(&first[1])];
    let mut delivered: Vec<String> = world
        .received(2)
        .await
        .iter()
        .map(|r| r.json()["callId"].as_str().expect("callId").to_owned())
        .collect();
    delivered.sort_unstable();
    let mut expected = ids.to_vec();
    expected.sort_unstable();
    assert_eq!(delivered, expected, "one webhook each");
    let before = world.detail(&ids[0]).await.expect(200);

    world.app.clock.advance(chrono::Duration::hours(1));
    let again = world.ingest(file).await;
    // The dialer sending the call again with another disposition changes nothing either.
    let changed = world
        .ingest(vec![with(
            record("d-1", &on),
            json!({ "disposition": "no_sale" }),
        )])
        .await;
    for (outcome, id) in again
        .iter()
        .chain(&changed)
        .zip(ids.iter().chain(&ids[..1]))
    {
        assert_eq!(
            outcome.disposal,
            Disposal::AlreadyIngested {
                call_id: id.clone()
            }
        );
    }
    let after = world.detail(&ids[0]).await.expect(200);
    for key in ["score", "scoredAt", "updatedAt", "createdAt", "durationSec"] {
        assert_eq!(after[key], before[key], "{key}");
    }
    assert_eq!(world.listed_ids().await, ids[..1]);
    assert_eq!(world.deliveries().await.len(), 2);
    assert_eq!(world.deliver_due().await, 0, "nothing new queued");
    world.sink.assert_silent(Duration::from_millis(300)).await;
    assert_eq!(world.archived_files().len(), 1);
}

#[tokio::test]
async fn a_dialer_call_id_repeated_within_one_file_is_stored_once() {
    let mut world = World::new().await;
    let on = world.agency.clone();
    let outcomes = world
        .ingest(vec![
            record("d-1", &on),
            with(
                record("d-1", &on),
                json!({ "startedAt": "2026-01-15T11:00:00.000Z" }),
            ),
            with(
                record("d-2", &on),
                json!({ "startedAt": "2026-01-15T09:00:00.000Z" }),
            ),
        ])
        .await;
    let first = stored_id(&outcomes[0]);
    assert_eq!(
        outcomes[1].disposal,
        Disposal::AlreadyIngested {
            call_id: first.clone()
        }
    );
    let second = stored_id(&outcomes[2]);
    assert_eq!(world.listed_ids().await, [first.clone(), second]);
    let detail = world.detail(&first).await.expect(200);
    assert_eq!(
        detail["startedAt"], "2026-01-15T10:00:00.000Z",
        "the first kept"
    );
    assert_eq!(world.deliveries().await.len(), 2);
    world.received(2).await;
    world.sink.assert_silent(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn real_call_minutes_spend_the_monthly_allowance_whether_scored_or_not() {
    let world = World::new().await;
    world
        .app
        .change(
            &world.tenant,
            TenantChange::MonthlyAllowanceMinutes(Some(2)),
        )
        .await;
    let on = world.agency.clone();
    // A minted token holds a minute while it is outstanding: let each one expire, so that
    // only the real calls' minutes count.
    let expire = || world.app.clock.advance(chrono::Duration::minutes(6));
    world.mint_status().await.expect(200);
    expire();
    world
        .stored(with(record("d-scored", &on), json!({ "durationSec": 60 })))
        .await;
    world.mint_status().await.expect(200);
    expire();
    let outcomes = world
        .ingest(vec![with(
            record("d-silent", &on),
            json!({ "durationSec": 60, "transcript": turns(NO_REP_TURN) }),
        )])
        .await;
    assert!(
        matches!(outcomes[0].disposal, Disposal::Stored { scored: false, .. }),
        "{:?}",
        outcomes[0]
    );
    world
        .mint_status()
        .await
        .expect_error(403, "TENANT_QUOTA_EXCEEDED");
}

#[tokio::test]
async fn a_dialer_call_id_is_unique_per_agency_not_per_tenant() {
    let world = World::new().await;
    let other = world.agency("ag-2", Some((false, Rubric::Default))).await;
    world
        .agent("ag-2", json!({ "platformAgentId": "rep-2" }))
        .await;
    let outcomes = world
        .ingest(vec![
            record("d-1", &world.agency),
            with(
                record("d-1", &other),
                json!({ "rep": { "agentId": "rep-2" } }),
            ),
        ])
        .await;
    let (first, second) = (stored_id(&outcomes[0]), stored_id(&outcomes[1]));
    assert_ne!(first, second);
    assert_eq!(world.listed_ids().await.len(), 2);
}

#[tokio::test]
async fn a_file_of_several_batches_keeps_every_outcome_in_its_record_s_place() {
    // 1 200 records: three batches of the ingester (500), each archived and scored on every
    // core. Every seventh record repeats the one seven before it (sometimes across a batch
    // boundary), every eleventh is too short, and each kept call has its own recording.
    let world = World::new().await;
    let on = world.agency.clone();
    let records: Vec<serde_json::Value> = (0..1_200)
        .map(|n| {
            let id = if n % 7 == 6 { n - 6 } else { n };
            let recording =
                world.recording(&format!("r{id}.wav"), format!("audio {id}").as_bytes());
            let seconds = if id % 11 == 10 { 12 } else { 60 + id };
            with(
                record(&format!("d-{id:04}"), &on),
                json!({ "recording": recording, "durationSec": seconds }),
            )
        })
        .collect();
    let outcomes = world.ingest(records).await;

    assert_eq!(outcomes.len(), 1_200);
    let mut first_call: std::collections::HashMap<usize, String> = Default::default();
    let mut kept = 0;
    for (n, outcome) in outcomes.iter().enumerate() {
        let id = if n % 7 == 6 { n - 6 } else { n };
        assert_eq!(outcome.index, n + 1);
        assert_eq!(
            outcome.dialer_call_id.as_deref(),
            Some(format!("d-{id:04}").as_str())
        );
        match (&outcome.disposal, id % 11 == 10, n == id) {
            (Disposal::Dropped(reason), true, _) => assert_eq!(reason.as_str(), "too_short"),
            (
                Disposal::Stored {
                    call_id,
                    scored: true,
                },
                false,
                true,
            ) => {
                kept += 1;
                first_call.insert(id, call_id.clone());
            }
            (Disposal::AlreadyIngested { call_id }, false, false) => {
                assert_eq!(
                    Some(call_id),
                    first_call.get(&id),
                    "record {} names the first copy's call",
                    n + 1
                );
            }
            (other, ..) => panic!("record {}: {other:?}", n + 1),
        }
    }
    let distinct_kept = (0..1_200).filter(|n| n % 7 != 6 && n % 11 != 10).count();
    assert_eq!(kept, distinct_kept);
    assert_eq!(
        world.archived_files().len(),
        distinct_kept,
        "one archived file per kept call"
    );
    let queued = world
        .app
        .db
        .list_deliveries(Some(world.tenant.id.clone()), 10_000)
        .await
        .expect("deliveries");
    assert_eq!(queued.len(), distinct_kept, "one webhook per kept call");
}

#[tokio::test]
async fn a_duration_over_a_day_is_invalid_and_the_rest_of_the_file_is_stored() {
    let world = World::new().await;
    world
        .app
        .change(
            &world.tenant,
            TenantChange::MonthlyAllowanceMinutes(Some(10_000)),
        )
        .await;
    let on = world.agency.clone();
    let outcomes = world
        .ingest(vec![
            record("d-ok", &on),
            with(record("d-huge", &on), json!({ "durationSec": i64::MAX })),
            // Started in year 1 and ended this morning: would bill about 10^9 minutes.
            with(
                record("d-ages", &on),
                json!({ "startedAt": "0001-01-01T00:00:00Z", "durationSec": 63_900_000_000_i64 }),
            ),
            with(record("d-day", &on), json!({ "durationSec": 86_400 })),
        ])
        .await;
    stored_id(&outcomes[0]);
    for outcome in &outcomes[1..3] {
        match &outcome.disposal {
            Disposal::Invalid(error) => assert!(error.contains("at most 86400"), "{error}"),
            other => panic!("{:?}: {other:?}", outcome.dialer_call_id),
        }
    }
    stored_id(&outcomes[3]);
    // A day of calls is within the allowance; the invalid records billed nothing.
    world.mint_status().await.expect(200);
}

#[tokio::test]
async fn an_archive_that_cannot_be_written_fails_the_ingest_instead_of_dropping_the_call() {
    let world = World::new().await;
    let blocker = world.dir.path().join("not-a-directory");
    std::fs::write(&blocker, b"x").expect("a file in the archive's way");
    let result = Ingest::new(
        world.app.db.clone(),
        Archive::new(blocker.join("archive")),
        world.app.clock.clone(),
        world.dir.path(),
    )
    .ingest(&world.tenant.id, vec![Ok(record("d-1", &world.agency))])
    .await;
    let error = result
        .expect_err("a readable recording is not `no_audio`")
        .to_string();
    assert!(
        error.contains("cannot write the recording archive"),
        "{error}"
    );
    assert!(world.listed_ids().await.is_empty(), "nothing stored");
    assert!(world.deliveries().await.is_empty(), "nothing queued");
    // Once the archive can be written, the same file stores the call.
    let outcomes = world.ingest(vec![record("d-1", &world.agency)]).await;
    stored_id(&outcomes[0]);
}
