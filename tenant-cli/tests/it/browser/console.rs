//! The rep console of `svc-cli sandbox` in Chromium: a whole practice call through the SDK, a
//! spent token, and the API-key endpoints refusing the page.

use fantoccini::Locator;
use serde_json::{Value, json};
use svc_cli::demo::Rep;

use super::RunningSandbox;
use super::chromium::{self, Browser, LAPTOP, PHONE};
use crate::helpers::Sandbox as TestDir;

/// Opens the console and waits until it has loaded the SDK and the roster.
async fn open_console(browser: &Browser, sandbox: &RunningSandbox) {
    browser
        .client
        .goto(&sandbox.console_url)
        .await
        .expect("open the console");
    browser.wait_for(r#"body[data-ready="true"]"#).await;
}

/// The payload of the `n`th SDK event called `name` in the console's event list (waiting for
/// it).
async fn event(browser: &Browser, name: &str, n: usize) -> Value {
    let css = format!(r#"#events li[data-event="{name}"]"#);
    let deadline = std::time::Instant::now() + chromium::WAIT;
    loop {
        let items = browser
            .client
            .find_all(Locator::Css(&css))
            .await
            .expect("find events");
        if let Some(item) = items.get(n) {
            let payload = item
                .attr("data-payload")
                .await
                .expect("read the payload")
                .expect("a payload");
            return serde_json::from_str(&payload).expect("the payload is JSON");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {name} event number {n} within {:?}",
            chromium::WAIT
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn click(browser: &Browser, css: &str) {
    browser.wait_for(css).await.click().await.expect(css);
}

/// Waits until the `#transcript` shows `count` lines.
async fn transcript_lines(browser: &Browser, count: usize) {
    browser
        .wait_for(&format!("#transcript li:nth-child({count})"))
        .await;
}

/// Starts a call for the first agent and waits for `ready`.
async fn start_call(browser: &Browser) -> Value {
    browser
        .wait_for("#agent")
        .await
        .select_by_value("0")
        .await
        .expect("pick the first agent");
    click(browser, "#start").await;
    event(browser, "ready", 0).await
}

#[tokio::test]
async fn the_console_runs_a_whole_practice_call_through_the_sdk_and_the_call_reads_back_over_the_api()
 {
    let dir = TestDir::new();
    let Some(browser) = chromium::start("console-call", dir.dir.path()).await else {
        return;
    };
    let sandbox = RunningSandbox::start(&dir).await;
    open_console(&browser, &sandbox).await;

    // The page comes from another origin than the API: the SDK's redeem is cross-origin.
    let origins = browser
        .run(
            "return [location.origin, new URL(document.querySelector('meta[name=svc-base-url]').content).origin];",
            vec![],
        )
        .await;
    assert_ne!(origins[0], origins[1], "{origins}");
    assert_eq!(origins[1], json!(sandbox.api_origin()));
    browser.screenshot("laptop-1-start").await;

    let ready = start_call(&browser).await;
    let persona = ready["persona"]["name"]
        .as_str()
        .expect("ready.persona.name");
    assert!(!persona.is_empty());
    let call_id = ready["callId"].as_str().expect("ready.callId").to_owned();
    assert!(call_id.starts_with("svc_call_"), "{ready}");
    transcript_lines(&browser, 1).await; // the persona's greeting

    let lines = Rep::Strong.lines("Ada Lovelace");
    for (n, line) in lines.iter().enumerate() {
        let input = browser.wait_for("#say-text:enabled").await;
        input.send_keys(line).await.expect("type a line");
        click(&browser, "#say").await;
        // Each line and the persona's reply.
        transcript_lines(&browser, 1 + 2 * (n + 1)).await;
    }
    browser.screenshot("laptop-2-live").await;

    click(&browser, "#hangup").await;
    let ended = event(&browser, "ended", 0).await;
    assert_eq!(ended["callId"], json!(call_id), "{ended}");
    assert!(
        ended["durationSec"].as_i64().is_some_and(|d| d >= 0),
        "{ended}"
    );
    let messages = browser
        .client
        .find_all(Locator::Css(r#"#events li[data-event="message"]"#))
        .await
        .expect("message events");
    assert_eq!(
        messages.len(),
        1 + lines.len(),
        "greeting and one reply per line"
    );

    browser
        .wait_for(r#"#score-state[data-state="scored"]"#)
        .await;
    let shown: f64 = browser
        .wait_for("#overall")
        .await
        .text()
        .await
        .expect("score text")
        .parse()
        .expect("the score is a number");
    browser.screenshot("laptop-3-scored").await;
    browser.viewport(PHONE, true).await;
    browser.screenshot("phone-scored").await;
    browser.viewport(LAPTOP, false).await;

    // The call reads back over the API, with what the rep said.
    let (status, detail) = sandbox.api_get(&format!("/calls/{call_id}")).await;
    assert_eq!(status, 200, "{detail}");
    let overall = detail["score"]["overallScore"].as_f64().expect("score");
    assert_eq!(overall.round(), shown);
    let said: Vec<&str> = detail["transcript"]
        .as_array()
        .expect("transcript")
        .iter()
        .filter(|t| t["role"] == "agent")
        .filter_map(|t| t["content"].as_str())
        .collect();
    assert_eq!(said, lines.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(detail["durationSec"], ended["durationSec"]);

    // The browser ran the CORS preflight of the redeem, and the redeem itself.
    let network: Vec<Value> = browser.devtools_events().await;
    let redeem_requests: Vec<&Value> = network
        .iter()
        .filter(|e| e["method"] == "Network.requestWillBeSent")
        .filter(|e| {
            e["params"]["request"]["url"]
                .as_str()
                .is_some_and(|u| u.ends_with("/v1/roleplay/session"))
        })
        .collect();
    assert!(
        redeem_requests
            .iter()
            .any(|e| e["params"]["request"]["method"] == "POST"),
        "the redeem was sent: {redeem_requests:#?}"
    );
    let preflights = network
        .iter()
        .filter(|e| {
            e["method"]
                .as_str()
                .is_some_and(|m| m.starts_with("Network."))
                && e.to_string().contains("Preflight")
                && e.to_string().contains("/v1/roleplay/session")
        })
        .count();
    assert!(
        preflights > 0,
        "a CORS preflight of the redeem was recorded"
    );

    // The API key never reached the page.
    let html = browser.client.source().await.expect("page source");
    assert!(!html.contains(&sandbox.api_key));
    let storage = browser
        .run(
            "return JSON.stringify([document.documentElement.outerHTML, Object.assign({}, localStorage), Object.assign({}, sessionStorage), document.cookie]);",
            vec![],
        )
        .await;
    assert!(!storage.to_string().contains(&sandbox.api_key));
    assert!(
        !network
            .iter()
            .any(|e| e.to_string().contains(&sandbox.api_key)),
        "no request or response the page saw carries the key"
    );
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

#[tokio::test]
async fn redeeming_a_spent_token_gives_an_error_event_with_token_already_used() {
    let dir = TestDir::new();
    let Some(browser) = chromium::start("console-spent-token", dir.dir.path()).await else {
        return;
    };
    let sandbox = RunningSandbox::start(&dir).await;
    open_console(&browser, &sandbox).await;
    let ready = start_call(&browser).await;
    click(&browser, "#hangup").await;
    let ended = event(&browser, "ended", 0).await;
    assert_eq!(ended["callId"], ready["callId"]);
    // The rep never spoke: the call is not scored, and the console says so.
    browser
        .wait_for(r#"#score-state[data-state="not_scored"]"#)
        .await;

    click(&browser, "#reuse-token:enabled").await;
    let error = event(&browser, "error", 0).await;
    assert_eq!(error["code"], "TOKEN_ALREADY_USED", "{error}");
    assert_eq!(error["status"], 401, "{error}");
    assert!(
        error["requestId"]
            .as_str()
            .is_some_and(|id| id.starts_with("req_")),
        "the request id is readable cross-origin: {error}"
    );
    let banner = browser
        .wait_for("#error:not([hidden]) #error-code")
        .await
        .text()
        .await
        .expect("banner");
    assert_eq!(banner, "TOKEN_ALREADY_USED");
    browser.screenshot("laptop-spent-token").await;
    browser.viewport(PHONE, true).await;
    browser.screenshot("phone-spent-token").await;
    // A 401 response is logged by the browser as a failed resource load; nothing else.
    let errors: Vec<String> = browser
        .console_errors()
        .await
        .into_iter()
        .filter(|e| !e.contains("/v1/roleplay/session") || !e.contains("401"))
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}

#[tokio::test]
async fn an_api_key_endpoint_called_from_the_console_page_is_refused_by_the_browser() {
    let dir = TestDir::new();
    let Some(browser) = chromium::start("console-api-key-refused", dir.dir.path()).await else {
        return;
    };
    let sandbox = RunningSandbox::start(&dir).await;
    open_console(&browser, &sandbox).await;
    // Even holding the real key, a page cannot use the API-key endpoints: the browser finds
    // no CORS headers (on the preflight, or on the simple GET) and refuses the response.
    let outcomes = browser
        .run_async(
            r#"
            const [base, key, done] = arguments;
            const attempt = async (path, init) => {
              try {
                const response = await fetch(base + path, init);
                return `answered ${response.status}`;
              } catch (error) {
                return `${error.name}: ${error.message}`;
              }
            };
            const auth = { Authorization: `Bearer ${key}` };
            done({
              listAgents: await attempt('/agents', { headers: auth }),
              simpleGet: await attempt('/calls?source=roleplay&from=2026-01-01T00:00:00.000Z'),
              mint: await attempt('/session', {
                method: 'POST',
                headers: { ...auth, 'Content-Type': 'application/json' },
                body: JSON.stringify({ platformAgentId: 'rep-ada' }),
              }),
              redeem: await attempt('/roleplay/session', {
                method: 'POST',
                headers: { Authorization: 'Bearer not-a-token', 'Content-Type': 'application/json' },
                body: JSON.stringify({ drillKey: 'ma-full-sale' }),
              }),
            });
            "#,
            vec![json!(sandbox.base_url), json!(sandbox.api_key)],
        )
        .await;
    for refused in ["listAgents", "simpleGet", "mint"] {
        assert_eq!(
            outcomes[refused],
            json!("TypeError: Failed to fetch"),
            "{refused}: {outcomes:#}"
        );
    }
    assert_eq!(
        outcomes["redeem"],
        json!("answered 401"),
        "the redeem endpoint answers the page: {outcomes:#}"
    );
    // The browser says why.
    let errors = browser.console_errors().await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("CORS policy") && e.contains("/v1/agents")),
        "{errors:#?}"
    );
    browser.close().await;
}

#[tokio::test]
async fn every_control_of_the_console_has_an_accessible_name_in_chromiums_accessibility_tree() {
    let dir = TestDir::new();
    let Some(browser) = chromium::start("console-names", dir.dir.path()).await else {
        return;
    };
    let sandbox = RunningSandbox::start(&dir).await;
    open_console(&browser, &sandbox).await;
    // What a screen reader announces: Chromium's own computed names, not our reading of the
    // markup (a placeholder alone is not a label, though Chromium falls back to it).
    browser.cdp("Accessibility.enable", json!({})).await;
    let tree = browser.cdp("Accessibility.getFullAXTree", json!({})).await;
    let nodes = tree["nodes"].as_array().expect("the accessibility tree");
    let controls: Vec<(String, String, String)> = nodes
        .iter()
        .filter(|n| n["ignored"] != json!(true))
        .filter_map(|n| {
            let role = n["role"]["value"].as_str()?;
            matches!(
                role,
                "button" | "textbox" | "combobox" | "checkbox" | "radio" | "link" | "slider"
            )
            .then(|| {
                let name = n["name"]["value"].as_str().unwrap_or_default().trim();
                let from = n["name"]["sources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|s| s["value"]["value"].as_str().is_some_and(|v| !v.is_empty()))
                    .and_then(|s| s["attribute"].as_str().or(s["type"].as_str()))
                    .unwrap_or_default();
                (role.to_owned(), name.to_owned(), from.to_owned())
            })
        })
        .collect();
    assert!(
        controls.len() >= 8,
        "the console's controls are in the tree: {controls:#?}"
    );
    for (role, name, from) in &controls {
        assert!(!name.is_empty(), "a {role} has no name: {controls:#?}");
        assert_ne!(
            from, "placeholder",
            "a {role} is named by its placeholder only ({name}): {controls:#?}"
        );
    }
    assert!(
        controls
            .iter()
            .any(|(role, name, _)| role == "textbox" && name == "Message to the persona"),
        "the chat input is labelled: {controls:#?}"
    );
    browser.close().await;
}
