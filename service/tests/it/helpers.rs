//! Test harness: a server on `127.0.0.1:0` with a fresh temporary database and a manual
//! clock, tenants created through the operator code, and a client that sends raw requests.

use std::net::SocketAddr;

use chrono::{TimeZone, Utc};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use svc_service::Clock;
use svc_service::config::Config;
use svc_service::credentials::ApiKey;
use svc_service::db::{Db, NewTenant, TenantChange};
use svc_test_support::service::Running;

/// A running server.
pub(crate) struct TestApp {
    pub(crate) addr: SocketAddr,
    pub(crate) db: Db,
    pub(crate) clock: Clock,
    pub(crate) config: Config,
    pub(crate) client: reqwest::Client,
    dir: Option<tempfile::TempDir>,
    server: Running,
}

/// A tenant with its API key.
#[derive(Clone, Debug)]
pub(crate) struct TestTenant {
    pub(crate) id: String,
    pub(crate) key: String,
}

/// A response: status, request-id header and parsed JSON body (`Null` when empty).
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) request_id: Option<String>,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) body: Value,
}

impl Reply {
    /// Asserts the status and returns the body.
    #[track_caller]
    pub(crate) fn expect(self, status: u16) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status, body: {}",
            self.body
        );
        self.body
    }

    /// Asserts an error envelope with this status and code whose requestId equals the
    /// header, and returns the `error` object.
    #[track_caller]
    pub(crate) fn expect_error(self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status, body: {}",
            self.body
        );
        assert_envelope(&self, code);
        self.body["error"].clone()
    }
}

/// Asserts `reply` is an envelope with `code` and the request id of its header.
#[track_caller]
pub(crate) fn assert_envelope(reply: &Reply, code: &str) {
    let error = &reply.body["error"];
    assert_eq!(error["code"], code, "body: {}", reply.body);
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    let header = reply
        .request_id
        .as_deref()
        .expect("X-Service-Request-Id header");
    assert!(header.starts_with("req_"));
    assert_eq!(error["requestId"], header);
    let keys: Vec<&String> = reply.body["error"]
        .as_object()
        .expect("error object")
        .keys()
        .collect();
    for key in keys {
        assert!(
            ["code", "message", "requestId", "details"].contains(&key.as_str()),
            "unexpected key {key}"
        );
    }
}

/// Starts a server with default settings.
pub(crate) async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Starts a server after letting `adjust` change its settings.
pub(crate) async fn spawn_app_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = Clock::manual(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap());
    let mut config = Config::new(dir.path().join("service.db"));
    config.clock = clock;
    adjust(&mut config);
    start(config, dir).await
}

async fn start(config: Config, dir: tempfile::TempDir) -> TestApp {
    let db = Db::open(&config.db_path).await.expect("open db");
    let server = Running::start(config.clone()).await;
    TestApp {
        addr: server.addr,
        db,
        clock: config.clock.clone(),
        config,
        client: reqwest::Client::new(),
        dir: Some(dir),
        server,
    }
}

impl TestApp {
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Creates an active tenant with one API key, as the operator would.
    pub(crate) async fn tenant(&self) -> TestTenant {
        let key = ApiKey::generate();
        let tenant = NewTenant::new("Test tenant", key.hash());
        let id = tenant.id.clone();
        self.db.create_tenant(tenant).await.expect("create tenant");
        TestTenant {
            id,
            key: key.expose().to_owned(),
        }
    }

    /// Applies an operator change to a tenant.
    pub(crate) async fn change(&self, tenant: &TestTenant, change: TenantChange) {
        self.db
            .update_tenant(&tenant.id, change)
            .await
            .expect("update tenant")
            .expect("tenant exists");
    }

    /// Sends a request with optional bearer key and JSON body.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let mut request = self.client.request(method, self.url(path));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        reply(request.send().await.expect("request sent")).await
    }

    pub(crate) async fn get(&self, tenant: &TestTenant, path: &str) -> Reply {
        self.send(Method::GET, path, Some(&tenant.key), None).await
    }

    pub(crate) async fn post(&self, tenant: &TestTenant, path: &str, body: Value) -> Reply {
        self.send(Method::POST, path, Some(&tenant.key), Some(body))
            .await
    }

    /// Creates an agency and returns its body.
    pub(crate) async fn agency(&self, tenant: &TestTenant, platform_id: &str) -> Value {
        let body = serde_json::json!({ "platformAgencyId": platform_id, "name": "Agency " });
        let reply = self.post(tenant, "/v1/agencies", body).await;
        assert!(reply.status.is_success(), "{}", reply.body);
        reply.body
    }

    /// Registers an agent into the agency with `platform_agency_id`; returns the agent.
    pub(crate) async fn agent(
        &self,
        tenant: &TestTenant,
        platform_agency_id: &str,
        handles: Value,
    ) -> Value {
        let mut body = serde_json::json!({
            "firstName": "Ann", "lastName": "Lee", "platformAgencyId": platform_agency_id,
        });
        if let (Some(body), Some(handles)) = (body.as_object_mut(), handles.as_object()) {
            body.extend(handles.clone());
        }
        self.post(tenant, "/v1/agents", body).await.expect(201)["agent"].clone()
    }

    /// Stops the server and starts a new one on the same database and settings.
    pub(crate) async fn restart(mut self) -> TestApp {
        self.server.stop().await;
        let dir = self.dir.take().expect("temp dir");
        start(self.config.clone(), dir).await
    }

    /// Stops the server and waits for it.
    pub(crate) async fn shutdown(mut self) {
        self.server.stop().await;
    }
}

/// Reads a response into a [`Reply`].
pub(crate) async fn reply(response: reqwest::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let request_id = headers
        .get("x-service-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = response.bytes().await.expect("body");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    Reply {
        status,
        request_id,
        headers,
        body,
    }
}
