//! Operations: `webhook serve`'s `/metrics`, `/healthz` and `/readyz`
//! ([`endpoints`], [`readiness`]), `reconcile --metrics-file` ([`metrics_file`]) and
//! `--log-format json` ([`json_logs`]), each run as the real binary.

mod cron_examples;
mod endpoints;
mod json_logs;
mod metrics_file;
mod readiness;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use svc_contract::{CallScored, CallSource, sign};
use svc_test_support::webhook_serve;
use tokio::process::Child;
use tokio::sync::mpsc;

use crate::helpers::webhook_serve_command;

pub(super) const SECRET: &str = "whsec_ops_test_secret_0123456789";

/// A running `webhook serve`: its addresses and every stderr line it writes.
pub(super) struct Serving {
    pub(super) child: Child,
    /// `http://host:port` of `--listen`.
    pub(super) base: String,
    /// `http://host:port` where `/metrics` is served.
    pub(super) metrics_base: String,
    pub(super) store: PathBuf,
    pub(super) stderr: mpsc::UnboundedReceiver<String>,
    /// The lines read while waiting for it to listen.
    started: Vec<String>,
    _dir: tempfile::TempDir,
}

/// Starts `webhook serve` on a free port with `extra` flags, and waits until it listens.
pub(super) async fn serve(env: &[(&str, &str)], extra: &[&str]) -> Serving {
    serve_at(None, env, extra).await
}

/// Like [`serve`], with the store at `store` when given (else in the server's temp dir).
pub(super) async fn serve_at(
    store: Option<PathBuf>,
    env: &[(&str, &str)],
    extra: &[&str],
) -> Serving {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = store.unwrap_or_else(|| dir.path().join("store.db"));
    let mut command = webhook_serve_command(dir.path(), &store, SECRET, env, extra);
    let webhook_serve::Started {
        child,
        line: started,
        early,
        stderr,
    } = webhook_serve::start(&mut command, Duration::from_secs(30)).await;
    // "receiving webhooks on http://A/path into … ; metrics on http://B/metrics", plain or as
    // the message of a JSON line.
    let address_after = |marker: &str| {
        let rest = &started[started.find(marker).expect(marker) + marker.len()..];
        let end = rest.find('/').expect("host:port");
        format!("http://{}", &rest[..end])
    };
    Serving {
        child,
        base: address_after("receiving webhooks on http://"),
        metrics_base: address_after("metrics on http://"),
        store,
        stderr,
        started: early,
        _dir: dir,
    }
}

impl Serving {
    /// Stops the server with SIGTERM and returns its exit code.
    pub(super) async fn terminate(&mut self) -> i32 {
        let pid = self.child.id().expect("running").to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(killed.success());
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("exits after SIGTERM")
            .expect("wait");
        status.code().unwrap_or(-1)
    }

    /// Every stderr line written so far, waiting a moment for the last ones.
    pub(super) async fn stderr_lines(&mut self) -> Vec<String> {
        let mut lines = std::mem::take(&mut self.started);
        while let Ok(Some(line)) =
            tokio::time::timeout(Duration::from_millis(500), self.stderr.recv()).await
        {
            lines.push(line);
        }
        lines
    }
}

pub(super) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}

/// GETs `url`: (status, body).
pub(super) async fn get(url: &str) -> (u16, String) {
    let response = http().get(url).send().await.expect("get");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

pub(super) fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

pub(super) fn event(call_id: &str) -> Vec<u8> {
    let event = CallScored::scored(
        call_id,
        CallSource::Roleplay,
        "svc_agent_1",
        "svc_agency_1",
        "2026-03-01T10:05:30.000Z",
        "req_1",
    );
    serde_json::to_vec(&event).expect("serialise")
}

/// POSTs a delivery to `url`: the signature header as given (`None`: left out), the webhook
/// id as given (`None`: left out). Returns the status.
pub(super) async fn deliver(
    url: &str,
    webhook_id: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
) -> u16 {
    let mut request = http()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(id) = webhook_id {
        request = request.header("x-service-webhook-id", id);
    }
    if let Some(signature) = signature {
        request = request.header("x-service-signature", signature);
    }
    request.send().await.expect("post").status().as_u16()
}

/// The header the service would send for `body` now.
pub(super) fn signed(body: &[u8]) -> String {
    sign(SECRET, now(), body)
}

/// A Prometheus text exposition: `name{labels}` (labels as written) → value. Comments and
/// blank lines are skipped; every other line must be a sample.
pub(super) fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a sample: {line:?}"));
            let value = value
                .parse::<f64>()
                .unwrap_or_else(|e| panic!("{line:?}: {e}"));
            (series.to_owned(), value)
        })
        .collect()
}
