//! What a person sees in a browser, in real headless Chromium: the rep console of
//! `svc-cli sandbox` running practice calls through the service's browser SDK, the SDK's
//! errors, cross-origin refusals, and the HTML report. Each test runs the real `svc-cli`
//! binary and its own browser; without Chromium they skip loudly (see [`chromium`]).
//! [`RunningSandbox`] is shared with the console's HTTP tests.

mod chromium;
mod console;
mod report;
mod sdk;

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::helpers::Sandbox as TestDir;

pub(crate) const ROSTER: &str =
    "platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId
agency-1,First Agency,Ada,Lovelace,ada@example.com,1234567,rep-ada
agency-1,First Agency,Grace,Hopper,grace@example.com,,rep-grace
";

/// A running `svc-cli sandbox` with its console, and what it printed (`--json`).
pub(crate) struct RunningSandbox {
    _child: Child,
    /// `http://127.0.0.1:<port>/v1`.
    pub(crate) base_url: String,
    /// The tenant's API key (the test's only: the page never gets it).
    pub(crate) api_key: String,
    /// `http://127.0.0.1:<other port>/console`.
    pub(crate) console_url: String,
}

impl RunningSandbox {
    /// Starts the sandbox with the test roster, its API and console on free ports.
    pub(crate) async fn start(dir: &TestDir) -> Self {
        Self::start_with(dir, &["--console-listen", "127.0.0.1:0"]).await
    }

    /// Starts the sandbox with the test roster, its API on a free port, and `extra` flags.
    pub(crate) async fn start_with(dir: &TestDir, extra: &[&str]) -> Self {
        dir.write("roster.csv", ROSTER);
        let mut args = vec![
            "sandbox",
            "--json",
            "--listen",
            "127.0.0.1:0",
            "--db",
            "sandbox.db",
            "--roster",
            "roster.csv",
        ];
        args.extend_from_slice(extra);
        let mut child = dir
            .command(&args)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the sandbox");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut text = String::new();
        let printed: Value = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let line = lines
                    .next_line()
                    .await
                    .expect("read stdout")
                    .expect("the sandbox exited before printing its settings");
                text.push_str(&line);
                text.push('\n');
                if let Ok(value) = serde_json::from_str(&text) {
                    return value;
                }
            }
        })
        .await
        .expect("the sandbox prints its settings in time");
        let field = |name: &str| {
            printed[name]
                .as_str()
                .unwrap_or_else(|| panic!("no {name} in {printed:#}"))
                .to_owned()
        };
        RunningSandbox {
            base_url: field("baseUrl"),
            api_key: field("apiKey"),
            console_url: field("consoleUrl"),
            _child: child,
        }
    }

    /// The API's origin (`http://127.0.0.1:<port>`).
    pub(crate) fn api_origin(&self) -> String {
        self.base_url.trim_end_matches("/v1").to_owned()
    }

    /// A GET of the API with the tenant's key: status and JSON body.
    pub(crate) async fn api_get(&self, path: &str) -> (u16, Value) {
        let response = reqwest::Client::new()
            .get(format!("{}{path}", self.base_url))
            .bearer_auth(&self.api_key)
            .send()
            .await
            .expect("the API answers");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}
