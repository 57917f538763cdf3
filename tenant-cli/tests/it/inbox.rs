//! `svc-cli inbox dead-letters|requeue|discard` on the inbox `webhook serve` keeps in the store
//! file.

use std::path::Path;

use svc_contract::WebhookId;
use svc_contract::{CallScored, CallSource};
use svc_receiver::Received;
use svc_receiver::inbox::{Inbox, InboxAdmin, InboxPolicy, process_next};
use svc_receiver::sqlite::SqliteInbox;
use svc_store::Store;

use crate::helpers::Sandbox;

const T: i64 = 1_767_225_600;

/// A store whose inbox holds one dead letter per call id (webhook id `wh_<call id>`), each
/// failed once with "ledger unavailable".
async fn store_with_dead_letters(path: &Path, call_ids: &[&str]) -> SqliteInbox {
    drop(Store::open_or_create(path).expect("store"));
    let policy = InboxPolicy {
        max_attempts: 1,
        ..InboxPolicy::default()
    };
    let inbox = SqliteInbox::open(path, policy).expect("inbox");
    for (n, call_id) in call_ids.iter().enumerate() {
        let event = CallScored::scored(
            *call_id,
            CallSource::Roleplay,
            "svc_agent_1",
            "svc_agency_1",
            "2026-01-01T00:00:00Z",
            "req_1",
        );
        let body = serde_json::to_vec(&event).expect("body");
        let id = WebhookId::parse(format!("wh_{call_id}").as_bytes()).expect("id");
        let signature = [u8::try_from(n).expect("few"); 32];
        inbox
            .accept(&id, &signature, &body, T)
            .await
            .expect("accept");
    }
    let failing = |_: Received| async { Err::<(), _>("ledger unavailable") };
    for _ in call_ids {
        process_next(&inbox, &failing, &svc_contract::ManualClock::new(T))
            .await
            .expect("step");
    }
    inbox
}

#[tokio::test]
async fn dead_letters_are_listed_with_their_call_and_last_error() {
    let sandbox = Sandbox::new();
    let store = sandbox.path("calls.db");
    store_with_dead_letters(&store, &["svc_call_a", "svc_call_b"]).await;
    let store = store.to_str().expect("utf-8 path");

    let listed = sandbox
        .run(&["--json", "inbox", "dead-letters", "--store", store])
        .await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let letters = listed.json();
    let letters = letters.as_array().expect("an array");
    assert_eq!(letters.len(), 2);
    assert_eq!(letters[0]["webhookId"], "wh_svc_call_a");
    assert_eq!(letters[0]["callId"], "svc_call_a");
    assert_eq!(letters[0]["attempts"], 1);
    assert_eq!(letters[0]["lastError"], "ledger unavailable");
    assert_eq!(letters[0]["receivedAt"], "2026-01-01T00:00:00.000Z");

    let table = sandbox
        .run(&["inbox", "dead-letters", "--store", store])
        .await;
    assert_eq!(table.code, 0);
    assert!(
        table.stdout.contains("wh_svc_call_b") && table.stdout.contains("ledger unavailable"),
        "{table:?}"
    );
    assert!(table.stderr.contains("2 dead letter(s)"), "{table:?}");
}

#[tokio::test]
async fn a_requeued_dead_letter_is_handed_out_again_and_a_discarded_one_is_done() {
    let sandbox = Sandbox::new();
    let path = sandbox.path("calls.db");
    let inbox = store_with_dead_letters(&path, &["svc_call_a", "svc_call_b", "svc_call_c"]).await;
    let store = path.to_str().expect("utf-8 path");

    let requeued = sandbox
        .run(&[
            "--json",
            "inbox",
            "requeue",
            "wh_svc_call_a",
            "--store",
            store,
        ])
        .await;
    assert_eq!(requeued.code, 0, "{requeued:?}");
    assert_eq!(requeued.json()["requeued"], 1);
    let discarded = sandbox
        .run(&[
            "--json",
            "inbox",
            "discard",
            "wh_svc_call_b",
            "--store",
            store,
        ])
        .await;
    assert_eq!(discarded.code, 0, "{discarded:?}");
    assert_eq!(discarded.json()["discarded"], "wh_svc_call_b");
    // pending, done, dead
    assert_eq!(inbox.counts().await.expect("counts"), (1, 1, 1));

    let all = sandbox
        .run(&["--json", "inbox", "requeue", "--all", "--store", store])
        .await;
    assert_eq!(all.json()["requeued"], 1);
    assert_eq!(inbox.counts().await.expect("counts"), (2, 1, 0));
}

#[tokio::test]
async fn an_id_that_is_not_a_dead_letter_exits_1_and_a_missing_store_exits_2() {
    let sandbox = Sandbox::new();
    let path = sandbox.path("calls.db");
    store_with_dead_letters(&path, &["svc_call_a"]).await;
    let store = path.to_str().expect("utf-8 path");
    for command in ["requeue", "discard"] {
        let run = sandbox
            .run(&["inbox", command, "wh_unknown", "--store", store])
            .await;
        assert_eq!(run.code, 1, "{run:?}");
        assert!(
            run.stderr
                .contains("no dead letter has webhook id wh_unknown"),
            "{run:?}"
        );
    }
    let bad_id = sandbox
        .run(&["inbox", "requeue", "wh with space", "--store", store])
        .await;
    assert_eq!(bad_id.code, 2, "{bad_id:?}");
    let neither = sandbox.run(&["inbox", "requeue", "--store", store]).await;
    assert_eq!(neither.code, 2, "an id or --all: {neither:?}");
    let missing = sandbox
        .run(&["inbox", "dead-letters", "--store", "missing.db"])
        .await;
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(!sandbox.path("missing.db").exists(), "nothing is created");
}
