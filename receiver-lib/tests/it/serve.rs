//! The serve helper (issue 13, item 2, with the connection limits of issue 12): idle and
//! half-open connections are closed, a real client is served while hundreds are held open,
//! and one shutdown answers the requests in flight and drains the inbox.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use svc_contract::{ManualClock, sign};
use svc_receiver::Received;
use svc_receiver::axum::{InboxReceiver, Server, ServerLimits, inbox_route};
use svc_receiver::inbox::InboxPolicy;
use svc_receiver::sqlite::SqliteInbox;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
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

/// `/ok` answers at once, `/slow` after 300 ms.
fn plain_routes() -> Router {
    Router::new().route("/ok", get(|| async { "ok" })).route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            "slow"
        }),
    )
}

fn limits(header_ms: u64, idle_ms: u64, request_ms: u64, max_connections: usize) -> ServerLimits {
    ServerLimits {
        header_read_timeout: Duration::from_millis(header_ms),
        keep_alive_idle_timeout: Duration::from_millis(idle_ms),
        request_timeout: Duration::from_millis(request_ms),
        max_connections,
    }
}

/// Reads until the server closes the connection; returns what it sent and when it closed.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (String, Duration) {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(within, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => break,
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the connection is still open after {within:?}"),
        }
    }
    (
        String::from_utf8_lossy(&received).into_owned(),
        started.elapsed(),
    )
}

/// True when nothing arrives, and the connection stays open, for `wait`.
async fn stays_open(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 64];
    tokio::time::timeout(wait, stream.read(&mut buf))
        .await
        .is_err()
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_headers_is_closed_after_the_header_timeout() {
    let running = start(Server::new(plain_routes()).limits(limits(300, 5_000, 5_000, 16))).await;
    let opened = Instant::now();
    let mut silent = TcpStream::connect(running.addr).await.expect("connect");
    let mut half = TcpStream::connect(running.addr).await.expect("connect");
    half.write_all(b"POST /ok HTTP/1.1\r\nHost: receiver\r\nContent-Le")
        .await
        .expect("write");
    for stream in [&mut silent, &mut half] {
        let (answer, _) = read_until_closed(stream, Duration::from_secs(3)).await;
        assert_eq!(answer, "", "closed without an answer");
        let after = opened.elapsed();
        assert!(
            after >= Duration::from_millis(250),
            "not before the timeout: {after:?}"
        );
    }
    running.stop().await;
}

#[tokio::test]
async fn a_kept_alive_connection_is_closed_after_the_idle_timeout_not_the_header_timeout() {
    let running = start(Server::new(plain_routes()).limits(limits(200, 900, 5_000, 16))).await;
    let mut stream = TcpStream::connect(running.addr).await.expect("connect");
    stream
        .write_all(b"GET /ok HTTP/1.1\r\nHost: receiver\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 1024];
    let n = stream.read(&mut buf).await.expect("answer");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    // Past the header timeout, idle: still open.
    assert!(stays_open(&mut stream, Duration::from_millis(500)).await);
    // The next request on it is still served.
    stream
        .write_all(b"GET /ok HTTP/1.1\r\nHost: receiver\r\n\r\n")
        .await
        .expect("write");
    let n = stream.read(&mut buf).await.expect("answer");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    let (rest, after) = read_until_closed(&mut stream, Duration::from_secs(3)).await;
    assert_eq!(rest, "");
    assert!(after >= Duration::from_millis(700), "idle for {after:?}");
    running.stop().await;
}

#[tokio::test]
async fn a_body_that_never_finishes_is_answered_408() {
    let dir = tempfile::tempdir().expect("dir");
    let inbox =
        SqliteInbox::open(dir.path().join("inbox.db"), InboxPolicy::default()).expect("open");
    let app = Router::new().route(
        "/webhooks",
        inbox_route(InboxReceiver::new(verifier(), inbox)),
    );
    let running = start(Server::new(app).limits(limits(5_000, 5_000, 300, 16))).await;
    let mut stream = TcpStream::connect(running.addr).await.expect("connect");
    stream
        .write_all(b"POST /webhooks HTTP/1.1\r\nHost: receiver\r\nContent-Length: 400\r\n\r\n{")
        .await
        .expect("write");
    let (answer, after) = read_until_closed(&mut stream, Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(after >= Duration::from_millis(250), "{after:?}");
    running.stop().await;
}

#[tokio::test]
async fn a_real_client_is_served_while_hundreds_of_idle_connections_are_held_open() {
    let running = start(Server::new(plain_routes()).limits(limits(500, 5_000, 5_000, 64))).await;
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(TcpStream::connect(running.addr).await.expect("connect"));
    }
    let started = Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(15),
        client().get(format!("http://{}/ok", running.addr)).send(),
    )
    .await
    .expect("served while the idle connections are held")
    .expect("request");
    assert_eq!(answer.status().as_u16(), 200);
    eprintln!(
        "served after {:?} behind 300 idle connections",
        started.elapsed()
    );
    // Every idle connection is closed by the server in turn, while the client still holds it.
    let closed = futures_util::future::join_all(
        idle.iter_mut()
            .map(|stream| read_until_closed(stream, Duration::from_secs(15))),
    )
    .await;
    assert!(closed.iter().all(|(answer, _)| answer.is_empty()));
    running.stop().await;
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let running = start(Server::new(plain_routes()).limits(limits(1_000, 5_000, 5_000, 2))).await;
    let _held = [
        TcpStream::connect(running.addr).await.expect("connect"),
        TcpStream::connect(running.addr).await.expect("connect"),
    ];
    // Let the server accept both before the client connects.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let url = format!("http://{}/ok", running.addr);
    let request = tokio::spawn(async move { client().get(url).send().await });
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!request.is_finished(), "the cap keeps it waiting");
    let answer = tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .expect("served once the held connections time out")
        .expect("task")
        .expect("request");
    assert_eq!(answer.status().as_u16(), 200);
    running.stop().await;
}

#[tokio::test]
async fn shutdown_answers_the_request_in_flight_and_refuses_new_connections() {
    let running = start(Server::new(plain_routes())).await;
    let addr = running.addr;
    let slow = tokio::spawn(async move {
        client()
            .get(format!("http://{addr}/slow"))
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    running.stop().await;
    assert_eq!(slow.await.expect("task").expect("answered"), 200);
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no longer listening"
    );
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
        .with_inbox_workers(inbox.clone(), handler, 2)
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
