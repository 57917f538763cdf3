//! The server's connection limits and shutdown: idle and half-open connections are closed, a
//! real client is served while hundreds are held open, the cap holds, and one shutdown answers
//! the requests in flight before the background work is told to finish.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::{get, post};
use svc_server::{Server, ServerLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

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

/// GETs `path` on its own task; resolves to the status.
fn get_in_background(addr: SocketAddr, path: &str) -> JoinHandle<reqwest::Result<u16>> {
    let url = format!("http://{addr}{path}");
    tokio::spawn(async move { client().get(url).send().await.map(|r| r.status().as_u16()) })
}

/// Stops `running` while a GET of `/slow` is in flight, and checks that the request was still
/// answered 200; returns the address the server listened on.
async fn stop_with_a_slow_request_in_flight(running: Running) -> SocketAddr {
    let addr = running.addr;
    let slow = get_in_background(addr, "/slow");
    tokio::time::sleep(Duration::from_millis(100)).await;
    running.stop().await;
    assert_eq!(slow.await.expect("task").expect("answered"), 200);
    addr
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
    let app = Router::new().route("/webhooks", post(|body: String| async move { body }));
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
    let addr = stop_with_a_slow_request_in_flight(start(Server::new(plain_routes())).await).await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no longer listening"
    );
}

#[tokio::test]
async fn background_work_is_told_to_finish_only_after_the_request_in_flight_is_answered() {
    let handled = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&handled);
    let app = Router::new().route(
        "/slow",
        get(move || async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            flag.store(true, Ordering::SeqCst);
            "slow"
        }),
    );
    let (finished, finished_seen) = oneshot::channel::<bool>();
    let seen = Arc::clone(&handled);
    let server = Server::new(app).with_background(move |draining| async move {
        draining.await;
        let _ = finished.send(seen.load(Ordering::SeqCst));
    });
    stop_with_a_slow_request_in_flight(start(server).await).await;
    assert!(
        finished_seen
            .await
            .expect("the background work ran to its end"),
        "told to drain before the request in flight was handled"
    );
}

#[tokio::test]
async fn background_work_that_never_finishes_is_cancelled_at_the_drain_timeout() {
    let (held, cancelled) = oneshot::channel::<()>();
    let server = Server::new(plain_routes())
        .drain_timeout(Duration::from_millis(300))
        .with_background(move |_draining| async move {
            let _held = held;
            std::future::pending::<()>().await;
        });
    let running = start(server).await;
    let started = Instant::now();
    running.stop().await;
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(250), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // The task was dropped (its sender with it), not left running.
    assert!(
        tokio::time::timeout(Duration::from_secs(2), cancelled)
            .await
            .expect("cancelled within 2 s")
            .is_err()
    );
}

#[tokio::test]
async fn dropping_the_server_cancels_its_background_work() {
    let (held, cancelled) = oneshot::channel::<()>();
    let (started, started_seen) = oneshot::channel::<()>();
    let server = Server::new(plain_routes()).with_background(move |_draining| async move {
        let _held = held;
        let _ = started.send(());
        std::future::pending::<()>().await;
    });
    let running = start(server).await;
    started_seen.await.expect("the background work started");
    running.done.abort();
    assert!(
        tokio::time::timeout(Duration::from_secs(2), cancelled)
            .await
            .expect("cancelled within 2 s")
            .is_err()
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_sigterm_right_after_shutdown_signal_is_called_resolves_it() {
    let stopped = svc_server::shutdown_signal().expect("handlers");
    // Sent before the future is polled: the handlers are already there.
    std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("kill");
    tokio::time::timeout(std::time::Duration::from_secs(5), stopped)
        .await
        .expect("the signal resolves");
}
