//! The real service (`svc_service::run`) on `127.0.0.1:0`, under a shutdown signal this handle
//! holds: dropping it stops the server.

use std::net::SocketAddr;

use svc_service::config::Config;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running service.
#[derive(Debug)]
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Running {
    /// Binds `127.0.0.1:0` and runs the service with `config` on it.
    ///
    /// # Panics
    /// When the port cannot be bound.
    pub async fn start(config: Config) -> Running {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(svc_service::run(config, listener, async move {
            let _ = stopped.await;
        }));
        Running {
            addr,
            stop: Some(stop),
            server: Some(server),
        }
    }

    /// The base URL, ending in `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Stops the server and waits for it.
    ///
    /// # Panics
    /// When the server task panicked or the server returned an error.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("server task").expect("server ran");
        }
    }
}
