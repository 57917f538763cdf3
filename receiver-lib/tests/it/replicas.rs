//! Several replicas on one PostgreSQL database (three servers on three ports, each with its
//! own pool, as three processes would have): the same signed delivery posted to all three at
//! once is processed exactly once, in direct mode and in inbox mode, where the three servers'
//! workers drain one queue. Skipped loudly without `SVC_TEST_POSTGRES_URL`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use futures_util::StreamExt;
use svc_contract::{SystemClock, sign};
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, WebhookReceiver, inbox_route, webhook_route};
use svc_receiver::dedup::DedupPolicy;
use svc_receiver::inbox::{InboxAdmin, InboxPolicy, run_inbox_workers};
use svc_receiver::postgres::{PgDatabase, PgDedupStore, PgInbox};

use crate::helpers::{SECRET, client, event_body, spawn, verifier};

const REPLICAS: usize = 3;
const DELIVERIES: usize = 1_000;

/// How many times user code ran, per webhook id, across every replica.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<HashMap<String, u32>>>);

impl Runs {
    fn handler(
        &self,
    ) -> impl Fn(Received) -> futures_util::future::Ready<Result<(), String>> + Clone + use<> {
        let runs = self.clone();
        move |received: Received| {
            let mut map = runs.0.lock().expect("runs");
            *map.entry(received.webhook_id.as_str().to_owned())
                .or_default() += 1;
            futures_util::future::ready(Ok(()))
        }
    }

    fn snapshot(&self) -> HashMap<String, u32> {
        self.0.lock().expect("runs").clone()
    }
}

/// Posts every delivery to every replica at once (64 requests in flight), signed now; a
/// request answered 409 (another replica holds the claim right now) is retried, as the
/// sender would, until each replica has answered it 200.
async fn post_everywhere(addrs: &[SocketAddr]) {
    let client = client();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default()
    };
    let requests = (0..DELIVERIES).flat_map(|n| addrs.iter().map(move |addr| (n, *addr)));
    futures_util::stream::iter(requests)
        .for_each_concurrent(64, |(n, addr)| {
            let client = client.clone();
            async move {
                let body = event_body(&format!("svc_call_r{n}"));
                let header = sign(SECRET, now(), &body);
                for _ in 0..100 {
                    let status = client
                        .post(format!("http://{addr}/webhooks"))
                        .header("x-service-webhook-id", format!("wh_r{n}"))
                        .header("x-service-signature", &header)
                        .body(body.clone())
                        .send()
                        .await
                        .expect("send")
                        .status()
                        .as_u16();
                    match status {
                        200 => return,
                        409 => tokio::time::sleep(Duration::from_millis(20)).await,
                        other => panic!("wh_r{n} answered {other}"),
                    }
                }
                panic!("wh_r{n} still in flight after 100 tries");
            }
        })
        .await;
}

fn assert_each_ran_once(runs: &HashMap<String, u32>) {
    assert_eq!(runs.len(), DELIVERIES, "every delivery was processed");
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "processed more than once: {twice:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_direct_replicas_process_each_delivery_posted_to_all_of_them_once() {
    let test = "three_direct_replicas";
    let Some(url) = svc_test_support::postgres::fresh_schema_url(test).await else {
        return;
    };
    let runs = Runs::default();
    let mut addrs = Vec::new();
    for _ in 0..REPLICAS {
        let database = PgDatabase::connect_with(&url, 8).await.expect("connect");
        let store = PgDedupStore::new(database, DedupPolicy::default());
        let receiver = WebhookReceiver::new(verifier(), store, runs.handler());
        addrs.push(spawn(Router::new().route("/webhooks", webhook_route(receiver))).await);
    }
    post_everywhere(&addrs).await;
    assert_each_ran_once(&runs.snapshot());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_inbox_replicas_store_each_delivery_once_and_their_workers_drain_it_once() {
    let test = "three_inbox_replicas";
    let Some(url) = svc_test_support::postgres::fresh_schema_url(test).await else {
        return;
    };
    let runs = Runs::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut addrs = Vec::new();
    let mut workers = Vec::new();
    let mut inboxes = Vec::new();
    for _ in 0..REPLICAS {
        let database = PgDatabase::connect_with(&url, 8).await.expect("connect");
        let inbox = PgInbox::new(database, InboxPolicy::default());
        let receiver = InboxReceiver::new(verifier(), inbox.clone());
        addrs.push(spawn(Router::new().route("/webhooks", inbox_route(receiver))).await);
        let mut stopped = stopped.clone();
        workers.push(tokio::spawn(run_inbox_workers(
            inbox.clone(),
            runs.handler(),
            SystemClock,
            4,
            async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            },
        )));
        inboxes.push(inbox);
    }
    post_everywhere(&addrs).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while inboxes[0].counts().await.expect("counts") != (0, DELIVERIES as u64, 0) {
        assert!(tokio::time::Instant::now() < deadline, "the queue drains");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.send(true).expect("stop");
    for worker in workers {
        worker.await.expect("worker");
    }
    let runs = runs.snapshot();
    assert_each_ran_once(&runs);
}
