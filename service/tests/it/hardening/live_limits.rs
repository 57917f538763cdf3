//! A live call cannot grow without bound: past its turn, size or frame-rate
//! limit it ends, is stored and scored, and the client is told why; and ending a call always
//! completes, even when its transcript cannot be stored.

use serde_json::json;
use svc_service::live::limits::LiveLimits;

use crate::practice_helpers::{practice_app, start_call, tenant_with_rep, token, wait_outcome};

fn limits(adjust: impl FnOnce(&mut LiveLimits)) -> LiveLimits {
    let mut limits = LiveLimits::default();
    adjust(&mut limits);
    limits
}

#[tokio::test]
async fn past_its_turn_limit_a_call_ends_is_stored_and_the_client_is_told_why() {
    let app = practice_app(|config| {
        config.live_limits = limits(|l| l.max_rep_turns = 3);
    })
    .await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let (call_id, mut client) = start_call(&app, &token).await;
    for line in [
        "Hi, my name is Sam.",
        "This call is recorded.",
        "Shall we enroll?",
    ] {
        client.say(line).await;
    }
    client
        .send(json!({ "type": "say", "text": "one more" }))
        .await;
    let (frames, close) = client.until_closed().await;
    assert_eq!(frames[0]["type"], "error", "{frames:?}");
    assert!(
        frames[0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("turn limit reached")),
        "{frames:?}"
    );
    assert_eq!(frames[1]["type"], "ended", "{frames:?}");
    assert_eq!(close, Some((1008, "turn limit reached".to_owned())));
    assert_eq!(wait_outcome(&app, &call_id).await, "scored");
    let detail = app
        .get(&tenant, &format!("/v1/calls/{call_id}"))
        .await
        .expect(200);
    assert_eq!(
        detail["transcript"].as_array().map(Vec::len),
        Some(7),
        "the greeting and three exchanges"
    );
}

#[tokio::test]
async fn past_its_size_limit_a_call_ends() {
    let app = practice_app(|config| {
        config.live_limits = limits(|l| l.max_transcript_bytes = 2_000);
    })
    .await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let (call_id, mut client) = start_call(&app, &token).await;
    let long = "word ".repeat(600);
    client.send(json!({ "type": "say", "text": long })).await;
    let (frames, close) = client.until_closed().await;
    assert_eq!(
        frames.first().map(|f| f["type"].clone()),
        Some(json!("error"))
    );
    assert_eq!(
        close,
        Some((1008, "transcript size limit reached".to_owned()))
    );
    // Nothing the rep said fitted: the call ends and is not scored.
    assert_eq!(wait_outcome(&app, &call_id).await, "not_scored");
}

#[tokio::test]
async fn a_flood_of_frames_is_refused_then_ends_the_call() {
    let app = practice_app(|config| {
        config.live_limits = limits(|l| {
            l.frames_per_second = 2;
            l.frame_burst = 3;
            l.max_refused_frames = 5;
        });
    })
    .await;
    let (tenant, _) = tenant_with_rep(&app).await;
    let token = token(&app, &tenant).await;
    let (_, mut client) = start_call(&app, &token).await;
    for _ in 0..50 {
        client.send(json!({ "type": "say", "text": "spam" })).await;
    }
    let (frames, close) = client.until_closed().await;
    let refused = frames
        .iter()
        .filter(|f| {
            f["type"] == "error"
                && f["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("too many frames"))
        })
        .count();
    assert_eq!(refused, 4, "{frames:?}");
    assert_eq!(close, Some((1008, "frame rate limit exceeded".to_owned())));
}

#[tokio::test]
async fn a_call_whose_transcript_cannot_be_stored_still_ends_unscored() {
    use std::net::SocketAddr;

    use svc_service::credentials::ApiKey;
    use svc_service::db::NewTenant;
    use svc_service::{AppState, Config};

    use crate::practice_helpers::LiveClient;

    // The server's own state, to reach its database writer.
    let dir = tempfile::tempdir().expect("dir");
    let mut config = Config::new(dir.path().join("service.db"));
    config.live_limits = limits(|l| {
        l.frames_per_second = 1_000;
        l.frame_burst = 1_000;
    });
    let state = AppState::open(config).await.expect("state");
    let key = ApiKey::generate();
    let tenant = NewTenant::new("Full disk", key.hash());
    state.db.create_tenant(tenant).await.expect("tenant");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app =
        svc_service::router(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = reqwest::Client::new();
    let post = |path: &str, body: serde_json::Value| {
        http.post(format!("http://{addr}/v1{path}"))
            .bearer_auth(key.expose())
            .json(&body)
            .send()
    };
    post(
        "/agencies",
        json!({ "platformAgencyId": "ag", "name": "Ag" }),
    )
    .await
    .expect("agency");
    post(
        "/agents",
        json!({ "firstName": "S", "lastName": "R", "platformAgentId": "rep", "platformAgencyId": "ag" }),
    )
    .await
    .expect("agent");
    let minted: serde_json::Value = post("/session", json!({ "platformAgentId": "rep" }))
        .await
        .expect("mint")
        .json()
        .await
        .expect("json");
    let started: serde_json::Value = http
        .post(format!("http://{addr}/v1/roleplay/session"))
        .bearer_auth(minted["token"].as_str().expect("token"))
        .json(&json!({ "drillKey": "ma-full-sale" }))
        .send()
        .await
        .expect("redeem")
        .json()
        .await
        .expect("json");
    let call_id = started["callId"].as_str().expect("call").to_owned();
    let mut client = LiveClient::connect(
        started["connectionUrl"].as_str().expect("url"),
        started["connectionTicket"].as_str().expect("ticket"),
    )
    .await;
    let (opening, _) = (client.recv().await, client.recv().await);
    assert!(opening.is_some());
    for n in 0..30 {
        client
            .say(&format!(
                "Hi, my name is Sam, line {n}: {}",
                "detail ".repeat(500)
            ))
            .await;
    }
    // The disk is full: the transcript (about 100 KB) cannot be written.
    state.db.cap_file_for_tests(0).await.expect("cap");
    client.send(json!({ "type": "end" })).await;
    let (frames, _) = client.until_closed().await;
    assert!(
        frames.iter().any(|f| f["type"] == "ended"),
        "the call ended: {frames:?}"
    );
    assert_eq!(
        state
            .db
            .call_state(&call_id)
            .await
            .expect("state")
            .as_deref(),
        Some("ended"),
        "never left live"
    );
    state.db.cap_file_for_tests(1_000_000).await.expect("room");
    state.practice.scorer.score_pending().await.expect("score");
    assert_eq!(
        state
            .db
            .call_state(&call_id)
            .await
            .expect("state")
            .as_deref(),
        Some("not_scored")
    );
}
