//! A dialer record's recording stays inside the ingest file's directory and is audio: a path that
//! leaves the directory (`..`, an absolute path elsewhere, a symlink pointing out) or a file that
//! is not audio is dropped with its reason and never archived, and what the audio link serves is an
//! audio type that cannot run on the API's origin.

use serde_json::json;
use svc_service::realcall::ingest::Dropped;

use super::audio::link;
use super::support::*;

/// A file outside the recordings directory, with an audio extension so that only the
/// confinement can refuse it.
fn outside_file() -> (tempfile::TempDir, std::path::PathBuf) {
    let outside = tempfile::tempdir().expect("outside dir");
    let path = outside.path().join("secret.wav");
    std::fs::write(&path, b"not yours").expect("outside file");
    (outside, path)
}

#[tokio::test]
async fn a_recording_path_leaving_the_ingest_directory_is_dropped_and_never_archived() {
    let world = World::new().await;
    let (_outside, secret) = outside_file();
    let db_file = world.app.db.path().to_string_lossy().into_owned();
    let dotdot = format!(
        "../{}/secret.wav",
        secret
            .parent()
            .and_then(|p| p.file_name())
            .expect("dir name")
            .to_string_lossy()
    );
    let records = vec![
        with(
            record("d-abs", &world.agency),
            json!({ "recording": secret.to_string_lossy() }),
        ),
        with(
            record("d-dotdot", &world.agency),
            json!({ "recording": dotdot }),
        ),
        with(
            record("d-db", &world.agency),
            json!({ "recording": db_file }),
        ),
        with(
            record("d-passwd", &world.agency),
            json!({ "recording": "/etc/passwd" }),
        ),
        with(
            record("d-inside-dotdot", &world.agency),
            json!({ "recording": "./sub/../../x/../call.wav" }),
        ),
    ];
    let outcomes = world.ingest(records).await;
    for outcome in &outcomes {
        assert_eq!(
            dropped(outcome),
            Dropped::RecordingOutsideDir,
            "{:?}",
            outcome.dialer_call_id
        );
    }
    assert_eq!(
        Dropped::RecordingOutsideDir.as_str(),
        "recording_outside_dir"
    );
    assert!(world.archived_files().is_empty(), "nothing archived");
    assert!(world.listed_ids().await.is_empty(), "nothing listed");
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlink_is_followed_only_while_it_stays_inside_the_directory() {
    let world = World::new().await;
    let (_outside, secret) = outside_file();
    std::os::unix::fs::symlink(&secret, world.dir.path().join("out.wav")).expect("link out");
    std::fs::create_dir(world.dir.path().join("sub")).expect("sub");
    std::os::unix::fs::symlink(world.dir.path(), world.dir.path().join("sub/up"))
        .expect("dir link");
    std::os::unix::fs::symlink("../call.wav", world.dir.path().join("sub/in.wav"))
        .expect("link in");
    let outcomes = world
        .ingest(vec![
            with(
                record("d-out", &world.agency),
                json!({ "recording": "out.wav" }),
            ),
            with(
                record("d-in", &world.agency),
                json!({ "recording": "sub/in.wav" }),
            ),
            with(
                record("d-up", &world.agency),
                json!({ "recording": "sub/up/call.wav" }),
            ),
        ])
        .await;
    assert_eq!(dropped(&outcomes[0]), Dropped::RecordingOutsideDir);
    let inside = stored_id(&outcomes[1]);
    let (url, _, _) = link(&world, &inside).await;
    let served = world.fetch(&url, None).await;
    assert_eq!(served.bytes().await.expect("body").as_ref(), AUDIO);
    // A link that goes up and comes back in is still inside: the same call, already stored.
    stored_id(&outcomes[2]);
    assert_eq!(world.archived_files().len(), 1, "only the inside recording");
}

#[tokio::test]
async fn a_recording_that_is_not_audio_is_dropped_as_recording_not_audio() {
    let world = World::new().await;
    let mut records = Vec::new();
    for (i, name) in ["page.html", "image.svg", "app.js", "noext", "page.HTM"]
        .iter()
        .enumerate()
    {
        world.recording(name, b"<script>alert(document.domain)</script>");
        records.push(with(
            record(&format!("d-{i}"), &world.agency),
            json!({ "recording": name }),
        ));
    }
    world.recording("upper.WAV", AUDIO);
    records.push(with(
        record("d-upper", &world.agency),
        json!({ "recording": "upper.WAV" }),
    ));
    let outcomes = world.ingest(records).await;
    for outcome in &outcomes[..5] {
        assert_eq!(dropped(outcome), Dropped::RecordingNotAudio);
    }
    assert_eq!(Dropped::RecordingNotAudio.as_str(), "recording_not_audio");
    stored_id(&outcomes[5]);
    let files = world.archived_files();
    assert_eq!(files.len(), 1);
    assert!(files[0].to_string_lossy().ends_with(".wav"), "{files:?}");
}

#[tokio::test]
async fn the_audio_link_serves_an_audio_type_that_cannot_run_or_be_sniffed() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let (url, _, _) = link(&world, &call_id).await;
    for range in [None, Some("bytes=0-3")] {
        let served = world.fetch(&url, range).await;
        assert!(served.status().is_success(), "{range:?}");
        let header = |name: &str| {
            served.headers()[name]
                .to_str()
                .expect("ascii header")
                .to_owned()
        };
        assert_eq!(header("content-type"), "audio/wav");
        assert_eq!(header("x-content-type-options"), "nosniff");
        let csp = header("content-security-policy");
        assert!(
            csp.contains("default-src 'none'") && csp.contains("sandbox"),
            "{csp}"
        );
        assert_eq!(
            header("content-disposition"),
            format!("attachment; filename=\"{call_id}.wav\"")
        );
    }
}

#[tokio::test]
async fn a_non_audio_file_archived_before_types_were_checked_is_not_served() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let (url, _, _) = link(&world, &call_id).await;
    // What an older service archived: the call points at an `.html` copy.
    let html = format!("{}.html", "a".repeat(64));
    std::fs::create_dir_all(world.archive().dir()).expect("archive dir");
    std::fs::write(world.archive().path(&html), b"<script>1</script>").expect("write");
    let db = rusqlite::Connection::open(world.app.db.path()).expect("open the database");
    db.execute(
        "UPDATE calls SET audio_file = ?1 WHERE id = ?2",
        (&html, &call_id),
    )
    .expect("point the call at it");
    let served = world.fetch(&url, None).await;
    assert_eq!(served.status(), 404);
}
