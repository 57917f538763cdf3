//! The browser SDK (`GET /sdk/v1/svc-sdk.js`, served by the service) used directly from a page
//! of another origin (the console's): misuse is reported at once and clearly, redeem errors
//! arrive as `error` events with the contract's codes, and a call can be run with nothing but
//! the module.

use serde_json::{Value, json};

use super::RunningSandbox;
use super::chromium;
use crate::helpers::Sandbox as TestDir;

/// Runs `body` in the console page with `SvcCall`, `SvcUsageError`, `baseUrl` and
/// `mint()` (a fresh token from the console's backend) in scope; `body` ends with
/// `return <value>`.
fn harness(body: &str) -> String {
    format!(
        r#"
        const [baseUrl, done] = arguments;
        (async () => {{
          const sdk = await import(new URL('/sdk/v1/svc-sdk.js', baseUrl).href);
          const {{ SvcCall, SvcUsageError }} = sdk;
          const mint = async () => {{
            const response = await fetch('/console/api/token', {{
              method: 'POST',
              headers: {{ 'Content-Type': 'application/json' }},
              body: JSON.stringify({{ platformAgentId: 'rep-grace' }}),
            }});
            return (await response.json()).token;
          }};
          const recorder = (call) => {{
            const seen = [];
            for (const name of sdk.EVENTS) call.on(name, (payload) => seen.push({{ name, payload }}));
            return seen;
          }};
          {body}
        }})().then(done, (error) => done({{ thrown: `${{error.name}}: ${{error.message}}` }}));
        "#
    )
}

#[tokio::test]
async fn the_sdk_reports_misuse_at_once_and_redeem_errors_as_error_events() {
    let dir = TestDir::new();
    let Some(browser) = chromium::start("sdk-errors", dir.dir.path()).await else {
        return;
    };
    let sandbox = RunningSandbox::start(&dir).await;
    browser
        .client
        .goto(&sandbox.console_url)
        .await
        .expect("open a page of another origin");
    browser.wait_for(r#"body[data-ready="true"]"#).await;

    let outcome: Value = browser
        .run_async(
            &harness(
                r#"
                const out = {};
                // A handler registered after connect() is refused, naming the rule.
                const late = new SvcCall({ baseUrl });
                const lateSeen = recorder(late);
                const connecting = late.connect('not.a.token', { drillKey: 'ma-full-sale' });
                try { late.on('ready', () => {}); out.lateHandler = 'accepted'; }
                catch (error) { out.lateHandler = { name: error.name, message: error.message, usage: error instanceof SvcUsageError }; }
                out.badToken = await connecting;
                out.badTokenEvents = lateSeen;
                try { await late.connect('again', { drillKey: 'ma-full-sale' }); out.secondConnect = 'accepted'; }
                catch (error) { out.secondConnect = error.message; }
                try { late.say('hello'); out.sayBeforeReady = 'accepted'; }
                catch (error) { out.sayBeforeReady = error.message; }
                try { new SvcCall({}); out.noBaseUrl = 'accepted'; }
                catch (error) { out.noBaseUrl = error.name; }

                // The contract's redeem codes arrive as error events.
                const unknownDrill = new SvcCall({ baseUrl });
                const unknownSeen = recorder(unknownDrill);
                out.unknownDrill = await unknownDrill.connect(await mint(), { drillKey: 'no-such-drill' });
                out.unknownDrillEvents = unknownSeen;
                out.unknownDrillState = unknownDrill.state;

                const noDrill = new SvcCall({ baseUrl });
                const noDrillSeen = recorder(noDrill);
                await noDrill.connect(await mint(), {});
                out.noDrillEvents = noDrillSeen;

                // And a whole call with nothing but the module.
                const call = new SvcCall({ baseUrl: baseUrl + '/' });
                const seen = recorder(call);
                const ready = await call.connect(await mint(), { drillKey: 'ma-full-sale', difficulty: 'Beginner', filters: { state: 'FL' } });
                const replied = new Promise((resolve) => {
                  const check = () => seen.filter((e) => e.name === 'message').length >= 2 ? resolve() : setTimeout(check, 50);
                  check();
                });
                call.say('Hi, this is Grace, a licensed insurance agent.');
                await replied;
                out.ended = await call.disconnect();
                out.ready = ready;
                out.events = seen.map((e) => e.name);
                out.finalState = call.state;
                out.afterEnd = await call.disconnect();
                return out;
                "#,
            ),
            vec![json!(sandbox.base_url)],
        )
        .await;
    assert!(outcome.get("thrown").is_none(), "{outcome:#}");

    let late = &outcome["lateHandler"];
    assert_eq!(late["name"], "SvcUsageError", "{outcome:#}");
    assert_eq!(late["usage"], true);
    assert!(
        late["message"]
            .as_str()
            .is_some_and(|m| m.contains("after connect()") && m.contains("before connect()")),
        "{late}"
    );
    assert_eq!(outcome["badToken"], Value::Null);
    let bad = &outcome["badTokenEvents"];
    assert_eq!(bad.as_array().map(Vec::len), Some(1), "{bad:#}");
    assert_eq!(bad[0]["name"], "error");
    assert_eq!(bad[0]["payload"]["code"], "INVALID_TOKEN", "{bad:#}");
    assert_eq!(bad[0]["payload"]["status"], 401);
    assert!(
        outcome["secondConnect"]
            .as_str()
            .is_some_and(|m| m.contains("already called")),
        "{outcome:#}"
    );
    assert!(
        outcome["sayBeforeReady"]
            .as_str()
            .is_some_and(|m| m.contains("live call")),
        "{outcome:#}"
    );
    assert_eq!(outcome["noBaseUrl"], "SvcUsageError");

    assert_eq!(outcome["unknownDrill"], Value::Null);
    assert_eq!(outcome["unknownDrillState"], "failed");
    assert_eq!(
        outcome["unknownDrillEvents"][0]["payload"]["code"], "DRILL_NOT_FOUND",
        "{outcome:#}"
    );
    assert_eq!(
        outcome["noDrillEvents"][0]["payload"]["code"], "INVALID_REQUEST",
        "{outcome:#}"
    );

    let ready = &outcome["ready"];
    let ended = &outcome["ended"];
    assert!(ready["persona"]["name"].is_string(), "{outcome:#}");
    assert_eq!(ready["callId"], ended["callId"], "{outcome:#}");
    assert!(ended["durationSec"].is_i64(), "{outcome:#}");
    assert_eq!(
        outcome["events"],
        json!(["ready", "message", "message", "ended"]),
        "greeting, the reply, then the end"
    );
    assert_eq!(outcome["finalState"], "ended");
    assert_eq!(
        outcome["afterEnd"], *ended,
        "disconnect() again gives the same end"
    );

    let call_id = ended["callId"].as_str().expect("call id");
    let mut scored = false;
    for _ in 0..100 {
        let (status, _) = sandbox.api_get(&format!("/calls/{call_id}")).await;
        if status == 200 {
            scored = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(scored, "the SDK's call is scored and readable over the API");
    browser.close().await;
}
