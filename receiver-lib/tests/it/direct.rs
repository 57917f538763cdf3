//! Direct mode when user code or the store misbehaves: a panic, a claim that eats into the
//! deadline, an error with a chain of context. The sender's single retry must still be
//! processed, and the answer must come within its 10 seconds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use svc_contract::WebhookId;
use svc_contract::{ManualClock, sign};
use svc_receiver::StoreError;
use svc_receiver::axum::{WebhookReceiver, webhook_route};
use svc_receiver::dedup::{Claim, DedupStore, MemoryDedupStore};
use svc_receiver::{EventHandler, Received};

use crate::helpers::{Logs, SECRET, T, client, event_body, post, spawn};

/// A memory store whose claims take `claim_ms` milliseconds, like a busy database.
#[derive(Default)]
struct SlowClaims {
    inner: MemoryDedupStore,
    claim_ms: AtomicU64,
}

impl DedupStore for SlowClaims {
    async fn claim(
        &self,
        id: &WebhookId,
        signature: &[u8; 32],
        now: i64,
    ) -> Result<Claim, StoreError> {
        let delay = Duration::from_millis(self.claim_ms.load(Ordering::SeqCst));
        tokio::time::sleep(delay).await;
        self.inner.claim(id, signature, now).await
    }

    async fn complete(&self, id: &WebhookId, now: i64) -> Result<(), StoreError> {
        self.inner.complete(id, now).await
    }

    async fn release(&self, id: &WebhookId) -> Result<(), StoreError> {
        self.inner.release(id).await
    }
}

/// Serves direct mode over `store` and `handler` at the fixed clock `T`.
async fn serve<S: DedupStore, H: EventHandler>(
    store: S,
    handler: H,
    deadline: Duration,
) -> std::net::SocketAddr {
    let receiver = WebhookReceiver::new(crate::helpers::verifier(), store, handler)
        .with_clock(Arc::new(ManualClock::new(T)))
        .with_deadline(deadline);
    spawn(Router::new().route("/webhooks", webhook_route(receiver))).await
}

/// Delivers `call_id` under `id`, signed at `t` (the retry is signed afresh, later).
async fn deliver(addr: std::net::SocketAddr, id: &str, call_id: &str, t: i64) -> (u16, String) {
    let body = event_body(call_id);
    post(
        &client(),
        addr,
        Some(id),
        Some(&sign(SECRET, t, &body)),
        body,
    )
    .await
}

#[tokio::test]
async fn a_panicking_handler_answers_500_and_the_retry_is_processed() {
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let runs = Arc::clone(&runs);
        move |_: Received| {
            let first = runs.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                assert!(!first, "the first run panics");
                Ok::<(), String>(())
            }
        }
    };
    let addr = serve(MemoryDedupStore::default(), handler, Duration::from_secs(8)).await;
    assert_eq!(
        deliver(addr, "wh_panic", "svc_call_p", T).await,
        (500, r#"{"error":"processing failed"}"#.to_owned())
    );
    // The claim was released, so the sender's retry runs user code again (not 409).
    assert_eq!(deliver(addr, "wh_panic", "svc_call_p", T + 1).await.0, 200);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(deliver(addr, "wh_panic", "svc_call_p", T + 2).await.0, 200);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "later copies are duplicates"
    );
}

#[tokio::test]
async fn a_slow_claim_counts_against_the_deadline_and_user_code_gets_what_is_left() {
    // 150 ms claiming plus 250 ms of user code: past a 300 ms deadline from arrival, though
    // user code alone would fit in it.
    let store = SlowClaims::default();
    store.claim_ms.store(150, Ordering::SeqCst);
    let handler = |_: Received| async {
        tokio::time::sleep(Duration::from_millis(250)).await;
        Ok::<(), String>(())
    };
    let addr = serve(store, handler, Duration::from_millis(300)).await;
    assert_eq!(
        deliver(addr, "wh_slow", "svc_call_s", T).await,
        (503, r#"{"error":"processing timed out"}"#.to_owned())
    );
}

#[tokio::test]
async fn a_claim_that_uses_the_whole_deadline_is_released_unprocessed_and_the_retry_runs() {
    let store = Arc::new(SlowClaims::default());
    store.claim_ms.store(300, Ordering::SeqCst);
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let runs = Arc::clone(&runs);
        move |_: Received| {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), String>(()) }
        }
    };
    let addr = serve(Arc::clone(&store), handler, Duration::from_millis(200)).await;
    assert_eq!(deliver(addr, "wh_late", "svc_call_l", T).await.0, 503);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "no time was left to run it");
    // The store is quick again by the retry, which finds the claim released.
    store.claim_ms.store(0, Ordering::SeqCst);
    assert_eq!(deliver(addr, "wh_late", "svc_call_l", T + 1).await.0, 200);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failed_delivery_is_logged_with_the_whole_error_chain() {
    // The test's runtime is single-threaded: the route runs on this thread, under this log.
    let (logs, _logging) = Logs::capture();
    let handler = |_: Received| async {
        Err::<(), _>(anyhow::anyhow!("connection refused").context("saving the score"))
    };
    let addr = serve(MemoryDedupStore::default(), handler, Duration::from_secs(8)).await;
    assert_eq!(deliver(addr, "wh_chain", "svc_call_c", T).await.0, 500);
    let text = logs.text();
    assert!(
        text.contains("webhook handler failed: saving the score: connection refused"),
        "{text}"
    );
}
