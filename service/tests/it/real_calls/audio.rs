//! The archived recording of a real call behind its signed link: served with an audio type
//! for 15 minutes, `Range` answered with 206, an expired, tampered or other call's link refused
//! with `403 AUDIO_LINK_INVALID`, the dialer's path never shown, and no link once the archive
//! file is gone.

use chrono::Duration;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::support::*;
use crate::helpers::reply;

/// The `audioUrl` of the call's detail, and its `exp` and `sig`.
pub(super) async fn link(world: &World, call_id: &str) -> (String, String, String) {
    let detail = world.detail(call_id).await.expect(200);
    let url = detail["audioUrl"].as_str().expect("audioUrl").to_owned();
    let parsed = reqwest::Url::parse(&url).expect("a URL");
    let param = |name: &str| {
        parsed
            .query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
            .unwrap_or_else(|| panic!("{name} in {url}"))
    };
    let (exp, sig) = (param("exp"), param("sig"));
    (url, exp, sig)
}

#[tokio::test]
async fn a_real_calls_detail_links_its_recording_for_15_minutes() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let detail = world.detail(&call_id).await.expect(200);
    let url = detail["audioUrl"].as_str().expect("audioUrl");
    let prefix = world.app.url(&format!("/v1/audio/{call_id}?"));
    assert!(url.starts_with(&prefix), "{url}");
    assert_eq!(detail["audioUrlExpiresAt"], "2026-01-15T12:15:00.000Z");

    let served = world.fetch(url, None).await;
    assert_eq!(served.status(), 200, "the signature is the credential");
    let content_type = served.headers()["content-type"].to_str().expect("ascii");
    assert!(content_type.starts_with("audio/"), "{content_type}");
    assert_eq!(served.bytes().await.expect("body").as_ref(), AUDIO);

    world.app.clock.advance(Duration::minutes(15));
    assert_eq!(
        world.fetch(url, None).await.status(),
        200,
        "valid until it expires"
    );
    world.app.clock.advance(Duration::seconds(1));
    reply(world.fetch(url, None).await)
        .await
        .expect_error(403, "AUDIO_LINK_INVALID");

    let fresh = world.detail(&call_id).await.expect(200);
    assert_eq!(fresh["audioUrlExpiresAt"], "2026-01-15T12:30:01.000Z");
    let fresh_url = fresh["audioUrl"].as_str().expect("audioUrl");
    assert_eq!(world.fetch(fresh_url, None).await.status(), 200);
}

#[tokio::test]
async fn a_range_request_gets_206_with_just_that_range() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let (url, _, _) = link(&world, &call_id).await;
    for (range, from, to) in [
        ("bytes=4-11", 4, 11),
        ("bytes=-4", AUDIO.len() - 4, AUDIO.len() - 1),
    ] {
        let served = world.fetch(&url, Some(range)).await;
        assert_eq!(served.status(), 206, "{range}");
        let content_range = served.headers()["content-range"].to_str().expect("ascii");
        assert_eq!(
            content_range,
            format!("bytes {from}-{to}/{}", AUDIO.len()),
            "{range}"
        );
        let body = served.bytes().await.expect("body");
        assert_eq!(body.as_ref(), &AUDIO[from..=to], "{range}");
    }
    // A range past the end is 416 in the envelope, with the length a client retries with.
    let served = world.fetch(&url, Some("bytes=99999999-")).await;
    assert_eq!(served.status(), 416);
    assert_eq!(
        served.headers()["content-range"].to_str().expect("ascii"),
        format!("bytes */{}", AUDIO.len())
    );
    let body: serde_json::Value = served.json().await.expect("envelope");
    assert_eq!(body["error"]["code"], "RANGE_NOT_SATISFIABLE");
}

/// GET `url` with `headers`.
async fn fetch_with(world: &World, url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = world.app.client.get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

#[tokio::test]
async fn several_ranges_another_unit_or_a_bad_range_get_the_whole_file_as_rfc_9110_says() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let (url, _, _) = link(&world, &call_id).await;
    for range in [
        "bytes=0-1,4-7",
        "bytes=0-1, 99999999-",
        "items=0-3",
        "seconds=1-2",
        "bytes=5-2",
        "bytes=a-b",
    ] {
        let served = world.fetch(&url, Some(range)).await;
        assert_eq!(served.status(), 200, "{range}");
        assert_eq!(served.headers().get("content-range"), None, "{range}");
        let content_type = served.headers()["content-type"].to_str().expect("ascii");
        assert!(
            content_type.starts_with("audio/"),
            "{range}: {content_type}"
        );
        assert_eq!(
            served.bytes().await.expect("body").as_ref(),
            AUDIO,
            "{range}"
        );
    }
    // A suffix longer than the file is the whole file, as a 206 (RFC 9110 14.1.2).
    let served = world.fetch(&url, Some("bytes=-9999")).await;
    assert_eq!(served.status(), 206);
    assert_eq!(
        served.headers()["content-range"].to_str().expect("ascii"),
        format!("bytes 0-{}/{}", AUDIO.len() - 1, AUDIO.len())
    );
    assert_eq!(served.bytes().await.expect("body").as_ref(), AUDIO);
    // One range wholly outside the file is still 416.
    for range in ["bytes=99999999-", "bytes=-0"] {
        let served = world.fetch(&url, Some(range)).await;
        assert_eq!(served.status(), 416, "{range}");
        assert_eq!(
            served.headers()["content-range"].to_str().expect("ascii"),
            format!("bytes */{}", AUDIO.len()),
            "{range}"
        );
    }
}

#[tokio::test]
async fn if_range_keeps_the_range_only_when_it_names_the_recordings_last_modified() {
    let world = World::new().await;
    let call_id = world.stored(record("d-1", &world.agency)).await;
    let (url, _, _) = link(&world, &call_id).await;
    let whole = world.fetch(&url, None).await;
    let last_modified = whole.headers()["last-modified"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let range = ("range", "bytes=4-11");

    let served = fetch_with(&world, &url, &[range, ("if-range", &last_modified)]).await;
    assert_eq!(served.status(), 206, "the recording is unchanged");
    assert_eq!(served.bytes().await.expect("body").as_ref(), &AUDIO[4..=11]);

    let earlier = chrono::DateTime::parse_from_rfc2822(&last_modified).expect("an HTTP-date")
        - Duration::seconds(1);
    let earlier = earlier.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
    for validator in [
        earlier.as_str(),
        "\"d41d8cd98f00b204\"",
        "W/\"x\"",
        "not a date",
    ] {
        let served = fetch_with(&world, &url, &[range, ("if-range", validator)]).await;
        assert_eq!(served.status(), 200, "{validator}");
        assert_eq!(served.headers().get("content-range"), None, "{validator}");
        assert_eq!(
            served.bytes().await.expect("body").as_ref(),
            AUDIO,
            "{validator}"
        );
    }
    // Without a Range, If-Range changes nothing.
    let served = fetch_with(&world, &url, &[("if-range", earlier.as_str())]).await;
    assert_eq!(served.status(), 200);
}

#[tokio::test]
async fn a_tampered_or_another_calls_link_is_403_audio_link_invalid() {
    let world = World::new().await;
    let first = world.stored(record("d-1", &world.agency)).await;
    let second = world.stored(record("d-2", &world.agency)).await;
    let (_, exp, sig) = link(&world, &first).await;
    let mut flipped = sig.clone();
    let last = if flipped.ends_with('0') { "1" } else { "0" };
    flipped.replace_range(sig.len() - 1.., last);
    let later = exp.parse::<i64>().expect("exp") + 3600;
    let base = world.app.url("/v1/audio");
    let links = [
        (
            "a changed signature",
            format!("{base}/{first}?exp={exp}&sig={flipped}"),
        ),
        (
            "a later expiry",
            format!("{base}/{first}?exp={later}&sig={sig}"),
        ),
        (
            "another call's id",
            format!("{base}/{second}?exp={exp}&sig={sig}"),
        ),
        ("no signature", format!("{base}/{first}?exp={exp}")),
        ("no expiry", format!("{base}/{first}?sig={sig}")),
    ];
    for (what, url) in links {
        let error = reply(world.fetch(&url, None).await)
            .await
            .expect_error(403, "AUDIO_LINK_INVALID");
        assert!(error["message"].is_string(), "{what}");
    }
    let (url, _, _) = link(&world, &first).await;
    assert_eq!(
        world.fetch(&url, None).await.status(),
        200,
        "the real link works"
    );
}

#[tokio::test]
async fn the_dialers_recording_path_never_appears_in_any_response() {
    let mut world = World::new().await;
    let folder = world.dir.path().join("dialer-share-7f3a");
    std::fs::create_dir(&folder).expect("dir");
    let path = folder.join("ada-recording-9q2.wav");
    std::fs::write(&path, AUDIO).expect("recording");
    let record = with(
        record("d-1", &world.agency),
        json!({ "recording": path.to_string_lossy() }),
    );
    let call_id = world.stored(record).await;

    let detail = world.detail(&call_id).await.expect(200);
    let listed = world.list(MORNING, "").await;
    let served = world
        .fetch(detail["audioUrl"].as_str().expect("audioUrl"), None)
        .await;
    let headers: Vec<String> = served
        .headers()
        .iter()
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap_or_default()))
        .collect();
    let webhook = world.received(1).await[0].json();
    let texts = [
        detail.to_string(),
        Value::Array(listed).to_string(),
        headers.join("\n"),
        webhook.to_string(),
    ];
    for text in texts {
        for secret in ["dialer-share-7f3a", "ada-recording-9q2"] {
            assert!(!text.contains(secret), "{secret} leaked in {text}");
        }
    }
    assert_eq!(detail.get("recording"), None);
}

#[tokio::test]
async fn a_call_whose_archived_file_is_gone_or_empty_reads_without_audio() {
    let world = World::new().await;
    let mut calls = Vec::new();
    for (id, bytes) in [
        ("d-gone", b"gone-recording".as_slice()),
        ("d-empty", b"emptied"),
    ] {
        let name = format!("{id}.wav");
        world.recording(&name, bytes);
        let call_id = world
            .stored(with(
                record(id, &world.agency),
                json!({ "recording": name }),
            ))
            .await;
        let (url, _, _) = link(&world, &call_id).await;
        let archived = world
            .archive()
            .path(&format!("{}.wav", hex::encode(Sha256::digest(bytes))));
        assert!(
            archived.is_file(),
            "content-addressed copy {}",
            archived.display()
        );
        calls.push((call_id, url, archived));
    }
    std::fs::remove_file(&calls[0].2).expect("delete");
    std::fs::write(&calls[1].2, b"").expect("truncate");
    for (call_id, url, _) in &calls {
        let detail = world.detail(call_id).await.expect(200);
        assert_eq!(detail["audioUrl"], Value::Null, "{call_id}");
        assert_eq!(detail["audioUrlExpiresAt"], Value::Null, "{call_id}");
        reply(world.fetch(url, None).await)
            .await
            .expect_error(404, "CALL_NOT_FOUND");
    }
}
