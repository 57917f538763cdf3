//! End-to-end tests across the members: `svc-cli` (its client, live transport, commands, and
//! its reconcile, `webhook serve` receiver and store) against the real `svc-service` on
//! `127.0.0.1:0` with a fresh database, and the `svc-fixtures`
//! bodies and the service's own responses against its OpenAPI document.

mod differential;
mod openapi_check;
mod openapi_fixtures;
mod openapi_responses;
mod practice;
mod reconcile;
mod roster_import;

use std::net::SocketAddr;

use svc_client::{ApiKey, Client};
use svc_service::config::Config;
use svc_service::credentials::ApiKey as ServiceKey;
use svc_service::db::{Db, NewTenant, TenantChange};
use svc_test_support::service::Running;

/// A running service with one tenant.
pub(crate) struct Service {
    pub(crate) addr: SocketAddr,
    pub(crate) key: String,
    /// The tenant's id.
    pub(crate) tenant_id: String,
    /// The service's database, to seed what no endpoint creates (real calls).
    pub(crate) db: Db,
    _dir: tempfile::TempDir,
    _server: Running,
}

impl Service {
    /// Starts the service on port 0 with a temp database and creates a tenant without a
    /// webhook endpoint.
    pub(crate) async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// [`Service::start`] with `adjust` applied to the service's settings first (plain-HTTP
    /// webhooks, a short retry delay, …).
    pub(crate) async fn start_with(adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = Config::new(dir.path().join("service.db"));
        adjust(&mut config);
        let db = Db::open(&config.db_path).await.expect("open db");
        let key = ServiceKey::generate();
        let tenant = NewTenant::new("End-to-end tenant", key.hash());
        let tenant_id = tenant.id.clone();
        db.create_tenant(tenant).await.expect("create tenant");
        let server = Running::start(config).await;
        Self {
            addr: server.addr,
            key: key.expose().to_owned(),
            tenant_id,
            db,
            _dir: dir,
            _server: server,
        }
    }

    /// The base URL, ending in `/v1`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Registers `url` as the tenant's webhook endpoint (the service must allow plain HTTP for
    /// a loopback URL).
    pub(crate) async fn set_webhook_url(&self, url: &str) {
        self.db
            .update_tenant(
                &self.tenant_id,
                TenantChange::WebhookUrl(Some(url.to_owned())),
            )
            .await
            .expect("update the tenant")
            .expect("the tenant exists");
    }

    /// The tenant's webhook signing secret (`whsec_…`).
    pub(crate) async fn signing_secret(&self) -> String {
        let tenant = self
            .db
            .tenant(&self.tenant_id)
            .await
            .expect("read the tenant")
            .expect("the tenant exists");
        tenant.signing_secret.expose().to_owned()
    }

    /// A `svc-cli` client with the tenant's key.
    pub(crate) fn client(&self) -> Client {
        Client::builder(self.base_url())
            .api_key(ApiKey::new(self.key.clone()))
            .build()
            .expect("client")
    }
}
