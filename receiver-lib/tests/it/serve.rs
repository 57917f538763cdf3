//! Inbox workers beside `svc_server::Server`: one shutdown answers the requests in flight and
//! then drains every acknowledged delivery into user code, within the drain timeout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use svc_contract::{ManualClock, sign};
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, inbox_route};
use svc_receiver::inbox::{InboxAdmin, InboxPolicy, run_inbox_workers_until_drained};
use svc_receiver::sqlite::SqliteInbox;
use svc_server::Server;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::helpers::{SECRET, T, client, event_body, post as deliver, verifier};

/// A server running in the background until `stop` is sent.
struct Running {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    done: JoinHandle<std::io::Result<()>>,
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(10), self.done)
            .await
            .expect("the server stops within 10 s")
            .expect("the server task")
            .expect("the server");
    }
}

async fn start(server: Server) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.run(listener, async move {
        let _ = stopped.await;
    }));
    Running { addr, stop, done }
}

/// An inbox server whose handler reports each call id and takes `handling` to do it.
async fn inbox_server(
    handling: Duration,
    drain_timeout: Duration,
) -> (
    tempfile::TempDir,
    SqliteInbox,
    Running,
    mpsc::UnboundedReceiver<String>,
) {
    let dir = tempfile::tempdir().expect("dir");
    let inbox =
        SqliteInbox::open(dir.path().join("inbox.db"), InboxPolicy::default()).expect("open");
    let receiver =
        InboxReceiver::new(verifier(), inbox.clone()).with_clock(Arc::new(ManualClock::new(T)));
    let app = Router::new().route("/webhooks", inbox_route(receiver));
    let (tx, rx) = mpsc::unbounded_channel();
    let handler = move |received: Received| {
        let tx = tx.clone();
        async move {
            tokio::time::sleep(handling).await;
            let _ = tx.send(received.event.call_id);
            Ok::<(), String>(())
        }
    };
    let server = Server::new(app)
        .with_background({
            let inbox = inbox.clone();
            move |draining| {
                run_inbox_workers_until_drained(
                    inbox,
                    handler,
                    svc_contract::SystemClock,
                    2,
                    draining,
                )
            }
        })
        .drain_timeout(drain_timeout);
    (dir, inbox, start(server).await, rx)
}

#[tokio::test]
async fn shutdown_drains_every_acknowledged_delivery_into_user_code() {
    let (_dir, inbox, running, mut handled) =
        inbox_server(Duration::from_millis(30), Duration::from_secs(10)).await;
    let client = client();
    for n in 0..12 {
        let body = event_body(&format!("svc_call_{n}"));
        let header = sign(SECRET, T, &body);
        let id = format!("wh_{n}");
        let answer = deliver(&client, running.addr, Some(&id), Some(&header), body).await;
        assert_eq!(answer.0, 200);
    }
    // Stopped at once: most entries are still pending.
    running.stop().await;
    assert_eq!(inbox.counts().await.expect("counts"), (0, 12, 0));
    let mut seen = Vec::new();
    while let Ok(call_id) = handled.try_recv() {
        seen.push(call_id);
    }
    assert_eq!(seen.len(), 12, "{seen:?}");
}

#[tokio::test]
async fn a_handler_that_never_finishes_holds_shutdown_no_longer_than_the_drain_timeout() {
    let (_dir, inbox, running, _handled) =
        inbox_server(Duration::from_secs(3600), Duration::from_millis(300)).await;
    let body = event_body("svc_call_stuck");
    let header = sign(SECRET, T, &body);
    let answer = deliver(
        &client(),
        running.addr,
        Some("wh_stuck"),
        Some(&header),
        body,
    )
    .await;
    assert_eq!(answer.0, 200);
    // Let a worker take it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    running.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // Still pending: handed out again after its lease, as after a crash.
    assert_eq!(inbox.counts().await.expect("counts"), (1, 0, 0));
}
