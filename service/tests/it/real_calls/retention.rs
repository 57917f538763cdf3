//! Retention of archived recordings: the sweep forgets a recording 30 days after it was
//! ingested (the call still reads, with `audioUrl: null`), deletes a file once no call refers
//! to it, and clears old files an interrupted ingestion left behind.

use std::time::{Duration as StdDuration, SystemTime};

use chrono::Duration;
use serde_json::Value;
use svc_service::realcall::sweep::{Swept, sweep};

use super::audio::link;
use super::support::*;

#[tokio::test]
async fn after_30_days_the_sweep_deletes_the_recording_and_the_call_reads_without_audio() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let before = world.detail(&call_id).await.expect(200);
    let files = world.archived_files();
    assert_eq!(files.len(), 1);

    let almost = now() + Duration::days(30) - Duration::seconds(1);
    let swept = sweep(&world.app.db, &world.archive(), almost)
        .await
        .expect("sweep");
    assert_eq!(swept, Swept::default());
    assert!(files[0].is_file(), "kept for 30 days");

    world.app.clock.advance(Duration::days(30));
    let swept = sweep(&world.app.db, &world.archive(), world.app.clock.now())
        .await
        .expect("sweep");
    assert_eq!(
        swept,
        Swept {
            expired: 1,
            deleted: 1
        }
    );
    assert!(!files[0].exists(), "the file is deleted");
    let after = world.detail(&call_id).await.expect(200);
    assert_eq!(after["audioUrl"], Value::Null);
    assert_eq!(after["audioUrlExpiresAt"], Value::Null);
    assert_eq!(
        after["score"], before["score"],
        "the call still reads normally"
    );
    assert_eq!(after["transcript"], before["transcript"]);
    assert_eq!(world.listed_ids().await, [call_id]);
}

#[tokio::test]
async fn a_recording_two_calls_share_is_kept_until_the_younger_call_expires() {
    let world = World::new().await;
    let older = world.stored(record("d-1", &world.agency)).await;
    world.app.clock.advance(Duration::days(10));
    let younger = world.stored(record("d-2", &world.agency)).await;
    let files = world.archived_files();
    assert_eq!(files.len(), 1, "one content-addressed copy");

    world.app.clock.advance(Duration::days(20));
    let swept = sweep(&world.app.db, &world.archive(), world.app.clock.now())
        .await
        .expect("sweep");
    assert_eq!(
        swept,
        Swept {
            expired: 1,
            deleted: 0
        }
    );
    assert_eq!(
        world.detail(&older).await.expect(200)["audioUrl"],
        Value::Null
    );
    let (url, _, _) = link(&world, &younger).await;
    let served = world.fetch(&url, None).await;
    assert_eq!(served.status(), 200);
    assert_eq!(served.bytes().await.expect("body").as_ref(), AUDIO);

    world.app.clock.advance(Duration::days(10));
    let swept = sweep(&world.app.db, &world.archive(), world.app.clock.now())
        .await
        .expect("sweep");
    assert_eq!(
        swept,
        Swept {
            expired: 1,
            deleted: 1
        }
    );
    assert!(!files[0].exists());
    assert_eq!(
        world.detail(&younger).await.expect(200)["audioUrl"],
        Value::Null
    );
}

#[tokio::test]
async fn the_sweep_deletes_old_files_no_call_refers_to_and_keeps_the_rest() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let in_use = world.archived_files().remove(0);
    let archive = world.archive();
    let orphan = archive.path(&format!("{}.wav", "ab".repeat(32)));
    let young_orphan = archive.path(&format!("{}.wav", "cd".repeat(32)));
    let leftover = archive.path(".incoming-0123456789abcdef");
    let stranger = archive.path("notes.txt");
    for path in [&orphan, &young_orphan, &leftover, &stranger] {
        std::fs::write(path, b"bytes").expect("write");
    }
    // The archive dates its files by the service's clock.
    let two_hours_ago = SystemTime::from(now()) - StdDuration::from_secs(2 * 3600);
    let young = SystemTime::from(now()) - StdDuration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&young_orphan)
        .and_then(|file| file.set_modified(young))
        .expect("date the file");
    for path in [&in_use, &orphan, &leftover, &stranger] {
        std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|file| file.set_modified(two_hours_ago))
            .expect("age the file");
    }

    let swept = sweep(&world.app.db, &archive, now()).await.expect("sweep");
    assert_eq!(
        swept,
        Swept {
            expired: 0,
            deleted: 2
        }
    );
    assert!(
        !orphan.exists() && !leftover.exists(),
        "old leftovers deleted"
    );
    assert!(
        young_orphan.is_file(),
        "an ingestion may be about to commit it"
    );
    assert!(stranger.is_file(), "not a file the archive writes");
    assert!(in_use.is_file(), "a call still refers to it");
    let (url, _, _) = link(&world, &call_id).await;
    assert_eq!(world.fetch(&url, None).await.status(), 200);
}

#[tokio::test]
async fn a_recording_an_ingestion_reuses_past_retention_is_kept_for_the_call_it_is_committing() {
    let world = World::new().await;
    world.stored(record("d-old", &world.agency)).await;
    world.app.clock.advance(Duration::days(31));
    let archive = world.archive();
    // An ingestion archives the same recording again (the file is reused and dated now)...
    let name = archive
        .store(
            &world.dir.path().join("call.wav"),
            world.app.clock.now().into(),
        )
        .expect("store");
    // ...and the sweep runs before its batch commits: the old call's recording is forgotten,
    // but the file stays for the new call.
    let swept = sweep(&world.app.db, &archive, world.app.clock.now())
        .await
        .expect("sweep");
    assert_eq!(
        swept,
        Swept {
            expired: 1,
            deleted: 0
        }
    );
    assert!(archive.holds(&name), "the file an ingestion just reused");
    // The batch commits: the new call serves its recording.
    let call_id = world.stored(record("d-new", &world.agency)).await;
    let detail = world.detail(&call_id).await.expect(200);
    assert_ne!(detail["audioUrl"], Value::Null);
}
