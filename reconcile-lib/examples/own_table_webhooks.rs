//! The webhook half over the same tables as `own_table.rs`: `svc-receiver` verifies each
//! delivery and commits it to its SQLite inbox (a file of its own) before the `200`; its
//! workers hand each event to `svc_reconcile::SinkHandler` over the same `TenantTables`, which
//! reads the call and stores it with the same `store_call` reconcile uses. Whichever path
//! brings a call first, it lands once and its rep is credited once.
//!
//! ```sh
//! svc-cli sandbox --webhook-url http://127.0.0.1:8080/webhooks &   # prints the lines to export
//! cargo run -p svc-reconcile --example own_table_webhooks -- tenant.db &
//! cargo run -p svc-reconcile --example own_table -- tenant.db       # on cron
//! ```

use std::sync::Arc;

use svc_client::Client;
use svc_contract::SigningSecret;
use svc_contract::{Keyring, Verifier};
use svc_receiver::axum::{InboxReceiver, inbox_route};
use svc_receiver::inbox::InboxPolicy;
use svc_receiver::inbox::run_inbox_workers_until_drained;
use svc_receiver::sqlite::SqliteInbox;
use svc_reconcile::SinkHandler;
use svc_server::Server;

#[allow(dead_code, unreachable_pub)]
#[path = "own_table.rs"]
pub mod own_table;

/// Receives the service's webhooks on `listener` (at `/webhooks`) until `shutdown`: each
/// verified delivery is committed to the inbox at `inbox_path` before its `200`, then a
/// worker reads the call and stores it in `tables` through [`SinkHandler`].
pub async fn serve_webhooks(
    tables: own_table::TenantTables,
    client: Client,
    secret: SigningSecret,
    inbox_path: std::path::PathBuf,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let inbox = SqliteInbox::open(inbox_path, InboxPolicy::default())?;
    let receiver = InboxReceiver::new(Verifier::new(Keyring::single(secret)), inbox.clone());
    let app = axum::Router::new().route("/webhooks", inbox_route(receiver));
    let handler = SinkHandler::new(client, Arc::new(tables));
    Server::new(app)
        .with_background(move |draining| {
            run_inbox_workers_until_drained(inbox, handler, svc_contract::SystemClock, 4, draining)
        })
        .run(listener, shutdown)
        .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tenant.db".to_owned());
    let tables = own_table::TenantTables::open(std::path::Path::new(&path))?;
    let secret = SigningSecret::new(&std::env::var("SVC_SIGNING_SECRET")?)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let inbox = std::path::PathBuf::from(format!("{path}.inbox"));
    let client = own_table::client_from_env()?;
    serve_webhooks(tables, client, secret, inbox, listener, shutdown).await
}
