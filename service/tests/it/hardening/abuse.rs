//! One client exhausting the service for others: bad live tickets do not
//! take the writer, and the operator's optional per-tenant rate limit.

use std::time::Duration;

use reqwest::Method;
use svc_service::db::TenantChange;

use crate::helpers::spawn_app;

#[tokio::test]
async fn a_bad_ticket_is_refused_without_waiting_for_the_writer() {
    let app = spawn_app().await;
    // Another process holds the database's write lock.
    let blocker = rusqlite::Connection::open(&app.config.db_path).expect("open");
    blocker
        .execute_batch("BEGIN IMMEDIATE")
        .expect("take the write lock");
    let refused = tokio::time::timeout(
        Duration::from_secs(2),
        app.db
            .claim_ticket("ext_nosuchsession", "bad-ticket-hash", 0),
    )
    .await
    .expect("answered at once, from a read")
    .expect("no storage error");
    assert_eq!(refused, None);
    blocker.execute_batch("ROLLBACK").expect("release");
}

#[tokio::test]
async fn over_its_rate_limit_a_tenant_gets_429_with_retry_after_and_others_do_not() {
    let app = spawn_app().await;
    let limited = app.tenant().await;
    let other = app.tenant().await;
    app.change(&limited, TenantChange::RequestsPerSecond(Some(3)))
        .await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..6 {
        let reply = app
            .send(Method::GET, "/v1/agents", Some(&limited.key), None)
            .await;
        if reply.status == 429 {
            assert_eq!(
                reply.body["error"]["code"], "RATE_LIMITED",
                "{}",
                reply.body
            );
            retry_after = reply
                .headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
        }
        statuses.push(reply.status.as_u16());
    }
    assert_eq!(&statuses[..3], [200, 200, 200], "{statuses:?}");
    assert!(statuses[3..].contains(&429), "{statuses:?}");
    assert_eq!(retry_after.as_deref(), Some("1"));
    app.get(&other, "/v1/agents").await.expect(200);
    app.change(&limited, TenantChange::RequestsPerSecond(None))
        .await;
    app.get(&limited, "/v1/agents").await.expect(200);
}
