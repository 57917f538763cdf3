//! The store path: in a missing directory, a file that is not a store (a text file, another
//! program's SQLite database), a store from a newer `svc-cli` (all exit 2 with a clear message)
//! and an older store, migrated in place with its data kept.

use rusqlite::Connection;
use svc_fixtures::calls::ROLEPLAY;
use svc_store::{SCHEMA_VERSION, Store};

use super::{db, fake, hours_ago, number, stored_details};

#[tokio::test]
async fn a_store_in_a_missing_directory_is_a_usage_error() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, hours_ago(1));
    let store = fake.sandbox.path("missing").join("calls.db");
    let run = fake.reconcile_at(&store, &[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("does not exist"),
        "says what is wrong: {}",
        run.stderr
    );
    assert!(!fake.sandbox.path("missing").exists(), "no directory made");
    assert!(fake.calls.seen().is_empty(), "nothing asked of the service");
}

#[tokio::test]
async fn a_text_file_is_not_a_store() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, hours_ago(1));
    let text = "id,name\n1,not a store\n";
    let store = fake.sandbox.write("calls.db", text);
    let run = fake.reconcile_at(&store, &[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("is not a svc-cli store"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_to_string(&store).expect("read"), text);
    assert!(fake.calls.seen().is_empty());
}

/// A store path that is not a store is a clear error, exit 2; refusing the file must not
/// change it, and switching another program's database to WAL does.
#[tokio::test]
async fn an_sqlite_file_of_another_program_is_refused_and_left_as_it_was() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, hours_ago(1));
    let store = fake.sandbox.path("contacts.db");
    {
        let conn = Connection::open(&store).expect("create");
        conn.execute_batch(
            "CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT);
             INSERT INTO contacts (name) VALUES ('Dana');",
        )
        .expect("another program's data");
    }
    let bytes = std::fs::read(&store).expect("read");
    let run = fake.reconcile_at(&store, &[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("is not a svc-cli store") && run.stderr.contains("another program"),
        "{}",
        run.stderr
    );
    let after = std::fs::read(&store).expect("read");
    assert!(
        after == bytes,
        "the other program's database is not modified (not even its journal mode): \
         header bytes 18-19 (journal mode) were {:?}, are {:?}",
        &bytes[18..20],
        &after[18..20]
    );
    assert_eq!(number(&store, "SELECT COUNT(*) FROM contacts"), 1);
    assert!(fake.calls.seen().is_empty());
}

#[tokio::test]
async fn a_store_from_a_newer_svc_cli_is_refused() {
    let fake = fake().await;
    fake.calls.add(ROLEPLAY, hours_ago(1));
    drop(Store::open_or_create(&fake.store).expect("a store"));
    Connection::open(&fake.store)
        .expect("open")
        .execute(
            "UPDATE store_meta SET value = '99' WHERE key = 'schema_version'",
            [],
        )
        .expect("as a newer svc-cli left it");
    let run = fake.reconcile(&[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("newer") && run.stderr.contains("99"),
        "{}",
        run.stderr
    );
    let version: String = db(&fake.store)
        .query_row(
            "SELECT value FROM store_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .expect("version");
    assert_eq!(version, "99", "left alone");
    assert!(fake.calls.seen().is_empty());
}

#[tokio::test]
async fn an_older_store_is_migrated_in_place_and_keeps_its_data() {
    let fake = fake().await;
    let kept = fake.calls.add(ROLEPLAY, hours_ago(2));
    let new = fake.calls.add(ROLEPLAY, hours_ago(1));
    Store::create_at_version(&fake.store, 1).expect("a version 1 store");
    let detail = fake.calls.detail_text(&kept).expect("served");
    let scored_at = fake.calls.detail(&kept).expect("served")["scoredAt"]
        .as_str()
        .expect("scoredAt")
        .to_owned();
    Connection::open(&fake.store)
        .expect("open")
        .execute(
            "INSERT INTO calls (id, source, scored_at, score_json, detail_json, delivery,
                first_seen_at, first_seen_by, refreshed_at)
             VALUES (?1, 'roleplay', ?2, '{}', ?3, 'webhook', ?4, 'webhook', ?4)",
            rusqlite::params![kept, scored_at, detail, "2026-01-01T00:00:00.000Z"],
        )
        .expect("a call stored by the older svc-cli");

    let run = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let version: String = db(&fake.store)
        .query_row(
            "SELECT value FROM store_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .expect("version");
    assert_eq!(version, SCHEMA_VERSION.to_string());
    assert_eq!(
        number(&fake.store, "SELECT COUNT(*) FROM call_failures"),
        0,
        "the newer tables exist"
    );
    let stored = stored_details(&fake.store);
    assert_eq!(stored.get(&kept), Some(&detail), "the older data is kept");
    assert!(stored.contains_key(&new));
    assert_eq!(
        fake.calls.requests(&format!("/v1/calls/{kept}")),
        0,
        "a call already stored is not read again"
    );
    let by: String = db(&fake.store)
        .query_row(
            "SELECT first_seen_by FROM calls WHERE id = ?1",
            [&kept],
            |r| r.get(0),
        )
        .expect("kept call");
    assert_eq!(by, "webhook");
}
