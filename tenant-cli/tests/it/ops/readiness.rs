//! `/readyz` answers whether the store takes a write within its deadline (2 s): another
//! connection holding the store's write lock past it makes the receiver not ready, and
//! releasing the lock makes it ready again.

use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::{get, serve};

#[tokio::test]
async fn readiness_fails_while_another_writer_holds_the_store_past_the_deadline() {
    let mut serving = serve(&[], &[]).await;
    let readyz = format!("{}/readyz", serving.base);
    assert_eq!(get(&readyz).await, (200, "ready\n".into()));

    let other = Connection::open(&serving.store).expect("open the store");
    other
        .busy_timeout(Duration::from_secs(5))
        .expect("busy timeout");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("take the write lock");
    let asked = Instant::now();
    let (status, body) = get(&readyz).await;
    let waited = asked.elapsed();
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("not ready: "), "{body}");
    assert!(
        waited >= Duration::from_millis(1900),
        "it waited for the deadline: {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "and no longer: {waited:?}");
    // Healthy all the same: the process answers.
    assert_eq!(get(&format!("{}/healthz", serving.base)).await.0, 200);

    other.execute_batch("ROLLBACK").expect("release the lock");
    let (status, body) = get(&readyz).await;
    assert_eq!((status, body.as_str()), (200, "ready\n"));
    assert_eq!(serving.terminate().await, 0);
}
