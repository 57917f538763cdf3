//! Opening a store: a new one, migrating an older one, refusing a newer one or a file that is
//! not a store, and the new file's mode.

use super::*;

#[test]
fn a_new_store_has_the_latest_schema_and_reopens() {
    let (dir, store) = store();
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    drop(store);
    let again = Store::open(dir.path().join("store.db")).expect("reopens");
    assert_eq!(again.schema_version().expect("version"), SCHEMA_VERSION);
}

#[test]
fn an_older_store_is_migrated_in_place_and_keeps_its_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.db");
    Store::create_at_version(&path, 1).expect("a version-1 store");
    {
        let conn = rusqlite::Connection::open(&path).expect("open");
        conn.execute(
            "INSERT INTO sync_state (source, watermark) VALUES ('roleplay', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .expect("a row of version 1");
    }
    let store = Store::open(&path).expect("migrates");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let state = store.sync_state("roleplay").expect("state");
    assert_eq!(state.watermark.as_deref(), Some("2026-01-01T00:00:00.000Z"));
    let failures = store
        .read(|db| {
            db.query_one("SELECT COUNT(*) FROM call_failures", &[])?
                .count(0)
        })
        .expect("the table of version 2 exists");
    assert_eq!(failures, 0);
}

#[test]
fn a_store_of_a_newer_svc_cli_is_refused() {
    let (dir, store) = store();
    store
        .write(|db| {
            db.execute(
                "UPDATE store_meta SET value = '99' WHERE key = 'schema_version'",
                &[],
            )
        })
        .expect("bump");
    drop(store);
    match Store::open(dir.path().join("store.db")) {
        Err(StoreError::TooNew { found: 99, .. }) => {}
        other => panic!("expected TooNew, got {other:?}"),
    }
}

#[test]
fn files_that_are_not_stores_are_refused_without_being_changed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello, not a database\n").expect("write");
    assert!(matches!(
        Store::open(&text),
        Err(StoreError::NotAStore { .. })
    ));
    assert_eq!(
        std::fs::read_to_string(&text).expect("read"),
        "hello, not a database\n"
    );

    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .and_then(|c| c.execute("CREATE TABLE accounts (id INTEGER)", []))
        .expect("another program's database");
    let refused = Store::open_or_create(&other);
    assert!(
        matches!(&refused, Err(StoreError::NotAStore { reason, .. }) if reason.contains("accounts")),
        "{refused:?}"
    );
    assert!(matches!(
        Store::open_or_create(dir.path().join("missing/store.db")),
        Err(StoreError::MissingDirectory { .. })
    ));
    assert!(matches!(
        Store::open(dir.path().join("absent.db")),
        Err(StoreError::NotFound(_))
    ));
}

#[cfg(unix)]
#[test]
fn a_new_store_file_is_readable_and_writable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, store) = store();
    store
        .store_calls(
            &[(
                None,
                detail(&detail_json(
                    "svc_call_m",
                    "roleplay",
                    "2026-03-01T10:05:00.000Z",
                    1.0,
                )),
            )],
            &writer(0, None),
        )
        .expect("store");
    for name in ["store.db", "store.db-wal", "store.db-shm"] {
        let mode = std::fs::metadata(dir.path().join(name))
            .expect(name)
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name} has mode {mode:o}");
    }
}
