//! Fault injection: what a tenant rehearsing a bad day sees. Deliveries are driven with
//! `drain` and a manual clock (as in `practice_outbox`), the API through a real server, the
//! operator flags through the real binary.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use reqwest::Method;
use serde_json::Value;
use svc_contract::{Keyring, SigningSecret, Verifier};
use svc_service::Clock;
use svc_service::credentials::{ApiKey, SigningSecret as TenantSecret};
use svc_service::db::{Db, NewTenant, TenantChange};
use svc_service::faults::{AppliedFault, Faults};
use svc_service::webhook::client::WebhookClient;
use svc_service::webhook::outbox::{Outbox, Outcome};

use crate::helpers::{assert_envelope, spawn_app};
use crate::practice_helpers::WebhookSink;

/// A tenant with `faults`, its sink and an outbox on a manual clock.
struct Rig {
    db: Db,
    sink: WebhookSink,
    clock: Clock,
    outbox: Outbox,
    verifier: Verifier,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start(faults: Faults) -> Rig {
        let dir = tempfile::tempdir().expect("dir");
        let db = Db::open(dir.path().join("faults.db")).await.expect("open");
        let sink = WebhookSink::start().await;
        let secret = TenantSecret::generate();
        db.create_tenant(NewTenant {
            id: "ten_faults".into(),
            webhook_url: Some(sink.url.clone()),
            signing_secret: secret.clone(),
            faults,
            ..NewTenant::new("faults", ApiKey::generate().hash())
        })
        .await
        .expect("tenant");
        let clock = Clock::manual(
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
                .single()
                .expect("date"),
        );
        let client = WebhookClient::new(true).expect("client");
        let outbox = Outbox::new(db.clone(), client, clock.clone(), Duration::from_secs(300));
        let verifier = Verifier::new(Keyring::single(
            SigningSecret::new(secret.expose()).expect("secret"),
        ));
        Rig {
            db,
            sink,
            clock,
            outbox,
            verifier,
            _dir: dir,
        }
    }

    async fn enqueue(&self, webhook_id: &str, call_id: &str) {
        let body = format!(r#"{{"event":"call.scored","callId":"{call_id}"}}"#);
        self.db
            .enqueue_delivery(
                webhook_id,
                "ten_faults",
                call_id,
                body,
                self.clock.now().timestamp_millis(),
            )
            .await
            .expect("enqueue");
    }

    fn verifies(&self, received: &crate::practice_helpers::Received) -> bool {
        self.verifier
            .verify(
                received.signature().as_bytes(),
                &received.body,
                self.clock.now().timestamp(),
            )
            .is_ok()
    }
}

/// The first call id (`svc_call_0`, `svc_call_1`, …) for which `pick` holds.
fn call_where(pick: impl Fn(&str) -> bool) -> String {
    (0..10_000)
        .map(|n| format!("svc_call_{n}"))
        .find(|id| pick(id))
        .expect("a call id with the wanted fate")
}

#[tokio::test]
async fn a_dropped_delivery_fails_both_attempts_without_sending_anything() {
    let faults = Faults {
        drop_deliveries: 0.5,
        seed: 11,
        ..Faults::default()
    };
    let dropped = call_where(|id| faults.drops(id));
    let kept = call_where(|id| !faults.drops(id));
    let mut rig = Rig::start(faults).await;
    rig.enqueue("wh_dropped", &dropped).await;
    rig.enqueue("wh_kept", &kept).await;

    let mut first = rig.outbox.drain().await.expect("drain");
    first.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(first, [Outcome::Delivered, Outcome::Retried]);
    assert_eq!(rig.sink.next().await.webhook_id(), "wh_kept");
    rig.clock.advance(chrono::Duration::seconds(300));
    assert_eq!(rig.outbox.drain().await.expect("drain"), [Outcome::Failed]);
    rig.sink.assert_silent(Duration::from_millis(200)).await;

    let deliveries = rig.db.list_deliveries(None, 10).await.expect("list");
    let dropped_row = deliveries
        .iter()
        .find(|d| d.id == "wh_dropped")
        .expect("dropped delivery listed");
    assert_eq!(dropped_row.state, "failed");
    assert_eq!(dropped_row.attempts.len(), 2, "both attempts logged");
    for attempt in &dropped_row.attempts {
        assert_eq!(attempt.status, None);
        assert_eq!(attempt.faults, [AppliedFault::Dropped], "logged as such");
        assert!(
            attempt
                .error
                .as_deref()
                .is_some_and(|e| e.contains("fault injection")),
            "the operator sees why: {attempt:?}"
        );
    }
}

#[tokio::test]
async fn a_duplicated_delivery_arrives_twice_with_one_id_and_valid_signatures() {
    let faults = Faults {
        duplicate_deliveries: 0.5,
        seed: 3,
        ..Faults::default()
    };
    let twice = call_where(|id| faults.duplicates(id));
    let mut rig = Rig::start(faults).await;
    rig.enqueue("wh_twice", &twice).await;

    assert_eq!(
        rig.outbox.drain().await.expect("drain"),
        [Outcome::Delivered]
    );
    let (one, two) = (rig.sink.next().await, rig.sink.next().await);
    assert_eq!(one.webhook_id(), "wh_twice");
    assert_eq!(two.webhook_id(), "wh_twice");
    assert_eq!(one.body, two.body, "the same event");
    assert_ne!(one.signature(), two.signature(), "signed afresh");
    assert!(rig.verifies(&one) && rig.verifies(&two));
    rig.sink.assert_silent(Duration::from_millis(200)).await;
    let deliveries = rig.db.list_deliveries(None, 10).await.expect("list");
    assert_eq!(deliveries[0].attempts[0].faults, [AppliedFault::SentTwice]);
}

#[tokio::test]
async fn a_badly_signed_delivery_fails_verification_with_the_tenant_secret() {
    let faults = Faults {
        bad_signature: 0.5,
        seed: 5,
        ..Faults::default()
    };
    let bad = call_where(|id| faults.signs_badly(id));
    let good = call_where(|id| !faults.signs_badly(id));
    let mut rig = Rig::start(faults).await;
    rig.enqueue("wh_bad", &bad).await;
    rig.outbox.drain().await.expect("drain");
    let received = rig.sink.next().await;
    assert_eq!(received.webhook_id(), "wh_bad");
    assert!(!rig.verifies(&received), "signed with another key");

    rig.enqueue("wh_good", &good).await;
    rig.outbox.drain().await.expect("drain");
    let received = rig.sink.next().await;
    assert_eq!(received.webhook_id(), "wh_good");
    assert!(rig.verifies(&received), "the others are signed as usual");
    let deliveries = rig.db.list_deliveries(None, 10).await.expect("list");
    let faults_of = |id: &str| {
        deliveries
            .iter()
            .find(|d| d.id == id)
            .map(|d| d.attempts[0].faults.clone())
    };
    assert_eq!(faults_of("wh_bad"), Some(vec![AppliedFault::BadSignature]));
    assert_eq!(faults_of("wh_good"), Some(vec![]));
}

#[tokio::test]
async fn a_delay_puts_the_first_attempt_off_and_then_delivers() {
    let mut rig = Rig::start(Faults {
        delay_deliveries_ms: 30_000,
        ..Faults::default()
    })
    .await;
    rig.enqueue("wh_late", "svc_call_late").await;
    assert_eq!(
        rig.outbox.drain().await.expect("drain"),
        [Outcome::Deferred]
    );
    rig.clock.advance(chrono::Duration::seconds(29));
    assert_eq!(rig.outbox.drain().await.expect("drain"), []);
    rig.sink.assert_silent(Duration::from_millis(200)).await;
    rig.clock.advance(chrono::Duration::seconds(1));
    assert_eq!(
        rig.outbox.drain().await.expect("drain"),
        [Outcome::Delivered]
    );
    let received = rig.sink.next().await;
    assert_eq!(received.webhook_id(), "wh_late");
    assert!(rig.verifies(&received), "signed when sent, not when queued");
    let deliveries = rig.db.list_deliveries(None, 10).await.expect("list");
    assert_eq!(
        deliveries[0].attempts.len(),
        1,
        "the delay is not an attempt"
    );
    assert_eq!(deliveries[0].attempts[0].faults, [AppliedFault::Delayed]);
}

#[tokio::test]
async fn api_faults_answer_the_contract_envelope_and_follow_the_seed() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    app.change(
        &tenant,
        TenantChange::Faults(Faults {
            api_500: 1.0,
            ..Faults::default()
        }),
    )
    .await;
    let reply = app.get(&tenant, "/v1/agents").await;
    assert_envelope(&reply, "INTERNAL_ERROR");
    assert_eq!(reply.status.as_u16(), 500);

    app.change(
        &tenant,
        TenantChange::Faults(Faults {
            api_429: 1.0,
            ..Faults::default()
        }),
    )
    .await;
    let reply = app.get(&tenant, "/v1/agents").await;
    assert_eq!(reply.status.as_u16(), 429);
    assert_eq!(
        reply
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    assert_envelope(&reply, "RATE_LIMITED");

    // A share: some requests fail, the same ones on every run with this seed.
    let faults = Faults {
        api_429: 0.4,
        seed: 9,
        ..Faults::default()
    };
    app.change(&tenant, TenantChange::Faults(faults)).await;
    let mut statuses = Vec::new();
    for _ in 0..30 {
        statuses.push(app.get(&tenant, "/v1/agents").await.status.as_u16());
    }
    assert!(
        statuses.contains(&200) && statuses.contains(&429),
        "{statuses:?}"
    );
    let other = spawn_app().await;
    let twin = other.tenant().await;
    other.change(&twin, TenantChange::Faults(faults)).await;
    let mut again = Vec::new();
    for _ in 0..30 {
        again.push(other.get(&twin, "/v1/agents").await.status.as_u16());
    }
    assert_eq!(statuses, again, "the same seed fails the same requests");

    app.change(&tenant, TenantChange::Faults(Faults::default()))
        .await;
    for _ in 0..10 {
        assert_eq!(app.get(&tenant, "/v1/agents").await.status.as_u16(), 200);
    }
    // The fault fires after authentication: a bad key is still a 401.
    app.change(
        &tenant,
        TenantChange::Faults(Faults {
            api_500: 1.0,
            ..Faults::default()
        }),
    )
    .await;
    let reply = app
        .send(Method::GET, "/v1/agents", Some("svc_live_nope"), None)
        .await;
    assert_eq!(reply.status.as_u16(), 401);
}

#[tokio::test]
async fn the_operator_sets_shows_and_clears_faults() {
    let app = spawn_app().await;
    let tenant = app.tenant().await;
    let db = app.config.db_path.clone();
    let run = |args: Vec<&str>| {
        let db = db.clone();
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        async move {
            let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc-service"))
                .args(&args)
                .arg("--db")
                .arg(&db)
                .env_remove("SVC_DB")
                .env("RUST_LOG", "warn")
                .output()
                .await
                .expect("run svc-service");
            (
                output.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        }
    };
    let (code, stdout, stderr) = run(vec![
        "tenant",
        "set-faults",
        "--tenant",
        &tenant.id,
        "--drop-deliveries",
        "0.25",
        "--delay-deliveries",
        "2m",
        "--seed",
        "7",
        "--json",
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    let shown: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(shown["faults"]["dropDeliveries"], 0.25);
    assert_eq!(shown["faults"]["delayDeliveriesMs"], 120_000);
    assert_eq!(shown["faults"]["seed"], 7);

    let (code, _, stderr) = run(vec![
        "tenant",
        "set-faults",
        "--tenant",
        &tenant.id,
        "--drop-deliveries",
        "1.5",
    ])
    .await;
    assert_eq!(code, 2, "a share above 1 is refused");
    assert!(
        stderr.contains("0 to 1") || stderr.contains("0 and 1"),
        "{stderr}"
    );

    let (code, stdout, stderr) = run(vec!["tenant", "list"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("faults=on"), "{stdout}");

    let (code, stdout, stderr) = run(vec![
        "tenant",
        "set-faults",
        "--tenant",
        &tenant.id,
        "--clear",
        "--json",
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    let shown: Value = serde_json::from_str(&stdout).expect("JSON");
    assert!(shown["faults"].is_null(), "{shown}");
}
