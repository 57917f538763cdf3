//! A secret rotation on a running receiver: the service switches to the new secret at once, so
//! the receiver takes it through a SharedKeyring, without a restart.

use std::sync::Arc;

use axum::Router;
use svc_contract::{Keyring, ManualClock, SharedKeyring, SigningSecret, Verifier, sign};
use svc_receiver::axum::{InboxReceiver, inbox_route};
use svc_receiver::inbox::{InboxAdmin, InboxPolicy};
use svc_receiver::sqlite::SqliteInbox;

use crate::helpers::{SECRET, T, client, event_body, post, spawn};

const NEW_SECRET: &str = "whsec_rotated_9f8e7d";

#[tokio::test]
async fn a_replaced_keyring_takes_effect_on_the_running_route() {
    let dir = tempfile::tempdir().expect("dir");
    let inbox =
        SqliteInbox::open(dir.path().join("inbox.db"), InboxPolicy::default()).expect("open");
    let keys = SharedKeyring::new(Keyring::single(SigningSecret::new(SECRET).expect("secret")));
    let clock = Arc::new(ManualClock::new(T));
    let receiver = InboxReceiver::new(Verifier::with_shared_keyring(keys.clone()), inbox.clone())
        .with_clock(Arc::clone(&clock));
    let addr = spawn(Router::new().route("/webhooks", inbox_route(receiver))).await;
    let client = client();
    let signed = |secret: &str, call: &str| {
        let body = event_body(call);
        (sign(secret, T, &body), body)
    };

    // The operator rotated: deliveries now carry the new secret, which the receiver lacks.
    let (header, body) = signed(NEW_SECRET, "svc_call_after");
    let refused = post(&client, addr, Some("wh_after"), Some(&header), body.clone()).await;
    assert_eq!(refused.0, 401);

    // The receiver takes the new secret and keeps the old one for ten minutes.
    keys.replace(
        Keyring::new()
            .with_key("current", SigningSecret::new(NEW_SECRET).expect("secret"))
            .with_expiring_key(
                "previous",
                SigningSecret::new(SECRET).expect("secret"),
                T + 600,
            ),
    );
    // The sender's retry of the refused delivery now goes through.
    let retried = post(&client, addr, Some("wh_after"), Some(&header), body).await;
    assert_eq!(retried.0, 200);
    // A delivery signed with the old secret before the rotation is still accepted...
    let (old_header, old_body) = signed(SECRET, "svc_call_before");
    let in_flight = post(
        &client,
        addr,
        Some("wh_before"),
        Some(&old_header),
        old_body,
    )
    .await;
    assert_eq!(in_flight.0, 200);
    // ...until the old key expires.
    clock.set(T + 601);
    let (late_header, late_body) = {
        let body = event_body("svc_call_late");
        (sign(SECRET, T + 601, &body), body)
    };
    let late = post(
        &client,
        addr,
        Some("wh_late"),
        Some(&late_header),
        late_body,
    )
    .await;
    assert_eq!(late.0, 401);
    assert_eq!(inbox.counts().await.expect("counts"), (2, 0, 0));
}
