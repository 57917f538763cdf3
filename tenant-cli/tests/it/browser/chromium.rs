//! Real headless Chromium for the browser tests, driven over WebDriver: Debian's `chromium`
//! and `chromium-driver` (chromedriver, the same version as the browser), through the
//! `fantoccini` client. Where either is missing the test prints a loud skip line and passes,
//! unless `SVC_REQUIRE_BROWSER=1` (CI sets it), which makes it fail.
//!
//! Screenshots go to `<test dir>/screenshots/<name>.png`; with `SVC_SCREENSHOT_DIR` set they
//! are also copied there (as `<test>-<name>.png`) to look at after the run.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The variable that turns a missing browser into a failure.
pub(crate) const REQUIRE: &str = "SVC_REQUIRE_BROWSER";

/// How long a test waits for something to show on the page.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// A laptop's viewport.
pub(crate) const LAPTOP: (u32, u32) = (1366, 860);
/// A phone's viewport (CSS pixels).
pub(crate) const PHONE: (u32, u32) = (390, 844);

/// A browser session and its driver. Dropping it kills the driver's process group, Chromium
/// included, so a test that fails before [`Browser::close`] leaves no browser behind.
pub(crate) struct Browser {
    pub(crate) client: Client,
    driver: Child,
    test: String,
    shots: PathBuf,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver leads its own process group (see `spawn_driver`), and Chromium's
        // processes stay in it.
        if let Some(pid) = self.driver.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn required() -> bool {
    std::env::var(REQUIRE).is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The program named by `env`, else the first of `names` on the `PATH`.
fn find_program(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env).map(PathBuf::from) {
        return path.is_file().then_some(path);
    }
    let dirs = std::env::var_os("PATH")?;
    std::env::split_paths(&dirs)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|path| path.is_file())
}

/// Starts chromedriver and a headless Chromium session for `test`, or `None` (after a loud
/// line on stderr) when they are not installed and not required.
pub(crate) async fn start(test: &str, dir: &Path) -> Option<Browser> {
    let driver = find_program("CHROMEDRIVER", &["chromedriver"]);
    let chromium = find_program(
        "CHROME_BIN",
        &[
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ],
    );
    let (driver, chromium) = match (driver, chromium) {
        (Some(driver), Some(chromium)) => (driver, chromium),
        (driver, chromium) => {
            let missing = [
                driver
                    .is_none()
                    .then_some("chromedriver (Debian: chromium-driver)"),
                chromium.is_none().then_some("Chromium (Debian: chromium)"),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" and ");
            assert!(
                !required(),
                "{REQUIRE} is set but {missing} cannot be found (PATH, CHROMEDRIVER, CHROME_BIN)"
            );
            // Straight to the process's stderr: the test harness captures `eprintln!` of a
            // passing test, and this line must be seen.
            svc_test_support::skip::announce(
                &format!("browser test {test}"),
                &format!(
                    "{missing} not found. Install Debian's `chromium` and `chromium-driver` to \
                     run it; {REQUIRE}=1 makes this a failure"
                ),
            );
            return None;
        }
    };
    let (child, port) = spawn_driver(&driver).await;
    let mut capabilities = serde_json::Map::new();
    capabilities.insert("browserName".into(), json!("chrome"));
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            // --no-sandbox: CI runs as root, where Chromium refuses its sandbox (so do
            // containers without user namespaces); these pages are our own, on loopback.
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-dev-shm-usage",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--disable-crash-reporter",
                format!("--window-size={},{}", LAPTOP.0, LAPTOP.1),
            ],
        }),
    );
    capabilities.insert(
        "goog:loggingPrefs".into(),
        json!({ "browser": "ALL", "performance": "ALL" }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let client = ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a Chromium session starts");
    let shots = dir.join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    Some(Browser {
        client,
        driver: child,
        test: test.to_owned(),
        shots,
    })
}

/// Runs chromedriver on a free port; returns it and the port it printed.
async fn spawn_driver(driver: &Path) -> (Child, u16) {
    let mut child = Command::new(driver)
        .arg("--port=0")
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver starts");
    let stdout = child.stdout.take().expect("chromedriver stdout");
    let mut lines = BufReader::new(stdout).lines();
    let port = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.expect("read chromedriver") {
            // "ChromeDriver was started successfully on port 41235."
            if let Some(rest) = line.split("started successfully on port ").nth(1) {
                return rest.trim_end_matches('.').trim().parse::<u16>().ok();
            }
        }
        None
    })
    .await
    .expect("chromedriver says its port in time")
    .expect("chromedriver prints its port");
    // Keep draining its output so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, port)
}

/// A chromedriver command outside the W3C set (`/session/{id}/<path>`).
#[derive(Debug)]
struct Vendor {
    path: &'static str,
    body: Value,
}

impl WebDriverCompatibleCommand for Vendor {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/{}",
            session_id.unwrap_or_default(),
            self.path
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(self.body.to_string()))
    }
}

impl Browser {
    async fn vendor(&self, path: &'static str, body: Value) -> Value {
        self.client
            .issue_cmd(Vendor { path, body })
            .await
            .unwrap_or_else(|e| panic!("chromedriver {path}: {e}"))
    }

    /// A DevTools command through chromedriver.
    pub(crate) async fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.vendor("goog/cdp/execute", json!({ "cmd": cmd, "params": params }))
            .await
    }

    /// The browser's console and JavaScript messages since the last call.
    pub(crate) async fn console_log(&self) -> Vec<Value> {
        match self.vendor("se/log", json!({ "type": "browser" })).await {
            Value::Array(entries) => entries,
            other => panic!("browser log: {other}"),
        }
    }

    /// The console messages of level SEVERE (errors) since the last call.
    pub(crate) async fn console_errors(&self) -> Vec<String> {
        self.console_log()
            .await
            .into_iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The DevTools events recorded since the last call (`Network.*` and so on), each the
    /// `{method, params}` object.
    pub(crate) async fn devtools_events(&self) -> Vec<Value> {
        match self
            .vendor("se/log", json!({ "type": "performance" }))
            .await
        {
            Value::Array(entries) => entries
                .iter()
                .filter_map(|e| e["message"].as_str())
                .filter_map(|m| serde_json::from_str::<Value>(m).ok())
                .map(|m| m["message"].clone())
                .collect(),
            other => panic!("performance log: {other}"),
        }
    }

    /// Makes the viewport `width` × `height` CSS pixels (a phone's when `mobile`).
    pub(crate) async fn viewport(&self, (width, height): (u32, u32), mobile: bool) {
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile }),
        )
        .await;
    }

    /// Saves a screenshot of the whole page (beyond the viewport) as `<name>.png`.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        let metrics = self.cdp("Page.getLayoutMetrics", json!({})).await;
        let size = &metrics["cssContentSize"];
        let viewport = &metrics["cssVisualViewport"];
        let width = viewport["clientWidth"].as_f64().unwrap_or(1366.0);
        let height = size["height"].as_f64().unwrap_or(900.0).min(6000.0);
        let shot = self
            .cdp(
                "Page.captureScreenshot",
                json!({
                    "format": "png",
                    "captureBeyondViewport": true,
                    "clip": { "x": 0, "y": 0, "width": width, "height": height, "scale": 1 },
                }),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("screenshot is base64");
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, &png).expect("write screenshot");
        if let Some(dir) = std::env::var_os("SVC_SCREENSHOT_DIR") {
            let dir = PathBuf::from(dir);
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(dir.join(format!("{}-{name}.png", self.test)), &png);
        }
        path
    }

    /// Waits for the element `css` and returns it.
    pub(crate) async fn wait_for(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("waiting for {css}: {e}"))
    }

    /// The value of running `script` (a function body; `arguments` holds `args`) in the page.
    pub(crate) async fn run(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// The value an async script hands to its callback (the last of `arguments`).
    pub(crate) async fn run_async(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute_async(script, args)
            .await
            .unwrap_or_else(|e| panic!("async script failed: {e}\n{script}"))
    }

    /// Ends the session (the driver is killed when the browser is dropped, right after).
    pub(crate) async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}
