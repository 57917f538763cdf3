//! A run killed with SIGKILL between two pages, then run again, leaves the store as one clean
//! run leaves a fresh one: the same calls with the same details, nothing duplicated.

use std::path::Path;
use std::time::{Duration, Instant};

use svc_fixtures::calls::ROLEPLAY;

use super::{db, fake, number, reconcile_args, secs_ago, watermark};

/// Every stored call with what was stored of it, in id order.
type Rows = Vec<(String, String, Option<String>, Option<String>, String)>;

fn calls_table(store: &Path) -> Rows {
    let conn = db(store);
    let mut stmt = conn
        .prepare("SELECT id, source, scored_at, row_json, detail_json FROM calls ORDER BY id")
        .expect("calls table");
    stmt.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}

/// How many calls the store holds, or `None` while it cannot be read yet.
fn stored_count(store: &Path) -> Option<i64> {
    let conn =
        rusqlite::Connection::open_with_flags(store, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0))
        .ok()
}

#[tokio::test]
async fn a_run_killed_between_two_pages_then_rerun_stores_what_one_clean_run_stores() {
    let fake = fake().await;
    fake.calls
        .add_many(ROLEPLAY, (1..=150).map(|n| secs_ago(30 * n)));
    // The first page is answered at once, the second only after a minute: time to kill.
    fake.calls
        .delay_list_after(1, Some(Duration::from_secs(60)));
    let args = reconcile_args(&fake.store, &["--source", "roleplay"]);
    let mut child = fake.sandbox.command(&args).spawn().expect("spawn svc-cli");
    let deadline = Instant::now() + Duration::from_secs(30);
    while stored_count(&fake.store) != Some(100) {
        assert!(
            Instant::now() < deadline,
            "the first page was never stored: {:?}",
            stored_count(&fake.store)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().await.expect("SIGKILL");
    assert_eq!(
        number(&fake.store, "SELECT COUNT(*) FROM calls"),
        100,
        "the first page is stored whole"
    );
    assert_eq!(
        watermark(&fake.store, ROLEPLAY),
        None,
        "the window never completed"
    );
    assert_eq!(
        number(
            &fake.store,
            "SELECT COUNT(*) FROM runs WHERE outcome = 'running'"
        ),
        1
    );

    fake.calls.delay_list_after(0, None);
    let rerun = fake.reconcile(&["--source", "roleplay"]).await;
    assert_eq!(rerun.code, 0, "{rerun:?}");
    assert_eq!(
        number(
            &fake.store,
            "SELECT COUNT(*) FROM runs WHERE outcome = 'interrupted'"
        ),
        1,
        "the killed run is marked interrupted"
    );
    assert!(watermark(&fake.store, ROLEPLAY).is_some());

    let clean = fake.sandbox.path("clean.db");
    let run = fake.reconcile_at(&clean, &["--source", "roleplay"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let (killed, clean) = (calls_table(&fake.store), calls_table(&clean));
    assert_eq!(killed.len(), 150, "every call once");
    assert_eq!(killed, clean, "the same store as one clean run");
}
