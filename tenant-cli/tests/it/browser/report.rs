//! The HTML report of a kept demo (`svc-cli demo --keep`, which writes it) opened from disk in
//! Chromium: every chart drawn, nothing loaded from anywhere, no console error.

use fantoccini::Locator;
use serde_json::json;

use super::chromium::{self, LAPTOP, PHONE};
use crate::helpers::Sandbox as TestDir;

#[tokio::test]
async fn the_demo_report_renders_its_charts_offline_with_no_console_errors() {
    let dir = TestDir::new();
    let Some(browser) = chromium::start("report", dir.dir.path()).await else {
        return;
    };
    let demo = dir.run(&["demo", "--calls", "6", "--keep", "kept"]).await;
    // The report is written whatever the demo's self-check says (exit 1 is a failed check,
    // which `sandbox.rs` tests; here only the report matters).
    assert!(demo.code == 0 || demo.code == 1, "{demo:?}");
    let report = dir.path("kept/report.html");
    assert!(report.is_file(), "{demo:?}");
    assert!(
        demo.stdout.contains(&report.display().to_string())
            || demo.stdout.contains("kept/report.html"),
        "the demo prints the report's path: {}",
        demo.stdout
    );
    let url = format!("file://{}", report.display());
    browser.client.goto(&url).await.expect("open the report");
    browser.wait_for("#delivery-health").await;

    let charts = browser
        .run(
            r#"
            const chart = (id) => {
              const svg = document.getElementById(id);
              if (!svg) return null;
              const box = svg.getBoundingClientRect();
              return {
                width: box.width,
                bars: svg.querySelectorAll('rect.bar').length,
                points: svg.querySelectorAll('circle.point').length,
                empty: svg.querySelectorAll('text.empty').length,
              };
            };
            return {
              distribution: chart('score-distribution-chart'),
              overTime: chart('scores-over-time-chart'),
              health: chart('delivery-health-chart'),
              agents: document.querySelectorAll('#agents tbody tr').length,
              days: document.querySelectorAll('#delivery-health tbody tr').length,
              resources: performance.getEntriesByType('resource').length,
              scripts: document.scripts.length,
            };
            "#,
            vec![],
        )
        .await;
    for chart in ["distribution", "overTime", "health"] {
        assert!(
            charts[chart]["width"].as_f64().is_some_and(|w| w > 300.0),
            "{chart} is drawn: {charts:#}"
        );
        assert_eq!(charts[chart]["empty"], 0, "{chart} has data: {charts:#}");
    }
    assert!(
        charts["distribution"]["bars"].as_u64() > Some(0),
        "{charts:#}"
    );
    assert!(
        charts["overTime"]["points"].as_u64() > Some(0),
        "{charts:#}"
    );
    assert!(charts["health"]["bars"].as_u64() > Some(0), "{charts:#}");
    assert!(charts["agents"].as_u64() > Some(1), "{charts:#}");
    assert!(charts["days"].as_u64() >= Some(1), "{charts:#}");
    assert_eq!(
        charts["resources"],
        json!(0),
        "nothing is loaded: {charts:#}"
    );
    assert_eq!(charts["scripts"], json!(0));

    let legends = browser
        .client
        .find_all(Locator::Css(".legend li"))
        .await
        .expect("legends");
    assert!(legends.len() >= 4);
    browser.screenshot("laptop").await;
    browser.viewport(PHONE, true).await;
    browser.screenshot("phone").await;
    browser.viewport(LAPTOP, false).await;

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}
