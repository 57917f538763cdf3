//! GET /calls `source=real_call` orders and windows real calls by `startedAt`; the detail has
//! the list row's fields, `endedAt = startedAt + durationSec`, timed transcript turns and the
//! practice call's shape.

use serde_json::{Value, json};

use super::support::*;

/// Stores a 312 s call (or `secs`) that started at `started_at`; returns its id.
async fn call_at(world: &World, id: &str, started_at: &str, secs: i64) -> String {
    let changes = json!({ "startedAt": started_at, "durationSec": secs });
    world.stored(with(record(id, &world.agency), changes)).await
}

#[tokio::test]
async fn real_calls_are_listed_by_start_newest_first() {
    let world = World::new().await;
    let middle = call_at(&world, "d-mid", "2026-01-15T10:30:00.000Z", 300).await;
    // Started first but ended last: ordering by the end would put it first.
    let first = call_at(&world, "d-first", "2026-01-15T09:00:00.000Z", 7200).await;
    let last = call_at(&world, "d-last", "2026-01-15T11:00:00.000Z", 60).await;
    assert_eq!(
        world.listed_ids().await,
        [last.clone(), middle.clone(), first.clone()]
    );

    let mut paged = Vec::new();
    let mut cursor = String::new();
    loop {
        let path = format!("/v1/calls?source=real_call&from={MORNING}&limit=1{cursor}");
        let page = world.app.get(&world.tenant, &path).await.expect(200);
        paged.extend(
            page["data"]
                .as_array()
                .expect("rows")
                .iter()
                .map(|r| r["id"].clone()),
        );
        match page["nextCursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(
        paged,
        [json!(last), json!(middle), json!(first)],
        "pages keep the order"
    );

    let practice = world
        .app
        .get(
            &world.tenant,
            &format!("/v1/calls?source=roleplay&from={MORNING}"),
        )
        .await
        .expect(200);
    assert_eq!(
        practice["data"],
        json!([]),
        "real calls are not practice calls"
    );
}

#[tokio::test]
async fn the_window_is_by_start_time_with_inclusive_bounds() {
    let world = World::new().await;
    // Started a minute before `from` and ended after it: not in the window.
    call_at(&world, "d-before", "2026-01-15T09:59:00.000Z", 120).await;
    let at_from = call_at(&world, "d-from", "2026-01-15T10:00:00.000Z", 60).await;
    let at_to = call_at(&world, "d-to", "2026-01-15T10:30:00.000Z", 60).await;
    call_at(&world, "d-after", "2026-01-15T10:30:01.000Z", 60).await;
    let rows = world
        .list("2026-01-15T10:00:00.000Z", "&to=2026-01-15T10:30:00.000Z")
        .await;
    let ids: Vec<&Value> = rows.iter().map(|row| &row["id"]).collect();
    assert_eq!(ids, [&json!(at_to), &json!(at_from)]);
}

#[tokio::test]
async fn a_real_calls_detail_derives_its_end_keeps_timed_turns_and_has_no_practice_labels() {
    let world = World::new().await;
    let started = json!({ "startedAt": "2026-01-15T10:00:00.250+00:00" });
    let call_id = world
        .stored(with(record("d-1", &world.agency), started))
        .await;
    let detail = world.detail(&call_id).await.expect(200);

    assert_eq!(detail["id"], call_id.as_str());
    assert_eq!(detail["source"], "real_call");
    assert_eq!(detail["status"], "scored");
    assert_eq!(detail["startedAt"], "2026-01-15T10:00:00.250Z");
    assert_eq!(detail["durationSec"], 312);
    assert_eq!(detail["endedAt"], "2026-01-15T10:05:12.250Z");
    assert_eq!(detail["scoredAt"], NOW);
    assert_eq!(detail["createdAt"], NOW);
    assert_eq!(detail["updatedAt"], NOW);
    for label in ["drillKey", "externalUserId", "externalAgencyId", "waveform"] {
        assert_eq!(detail[label], Value::Null, "{label}");
    }
    assert_eq!(detail["agentId"], world.agent["id"]);
    assert_eq!(detail["platformAgentId"], "rep-1");
    assert_eq!(detail["agencyId"], world.agency.as_str());
    assert_eq!(detail["platformAgencyId"], "ag-1");
    assert_eq!(
        detail["transcript"],
        turns(SALE),
        "turns keep startTime and endTime"
    );

    let rows = world.list(MORNING, "").await;
    let row = &rows[0];
    let row_keys = [
        "agencyId",
        "agentId",
        "drillKey",
        "durationSec",
        "endedAt",
        "externalAgencyId",
        "externalUserId",
        "id",
        "platformAgencyId",
        "platformAgentId",
        "scoredAt",
        "source",
        "startedAt",
    ];
    assert_eq!(
        keys(row),
        row_keys,
        "the list row has no score or transcript"
    );
    for key in row_keys {
        assert_eq!(row[key], detail[key], "{key}: the row is the detail's");
    }
    let mut detail_keys: Vec<&str> = row_keys.to_vec();
    detail_keys.extend([
        "audioUrl",
        "audioUrlExpiresAt",
        "createdAt",
        "score",
        "status",
        "transcript",
        "updatedAt",
        "waveform",
    ]);
    detail_keys.sort_unstable();
    assert_eq!(keys(&detail), detail_keys, "the practice call's shape");
}
