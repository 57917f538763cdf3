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

/// A report of two agencies with equal averages hour by hour, one of them with an id as long
/// as a UUID, and half the calls in the 80–89 band.
fn crowded_report() -> String {
    use svc_cli::html_report::HtmlReport;
    use svc_cli::html_report::model::Aggregator;
    use svc_store::report_rows::{DayCounts, ReportCall};

    let long_agency = "agency-0f8fad5b-d9cb-469f-a165-70867728950e-with-a-suffix".to_owned();
    let long_agent = "agent-7c9e6679-7425-40de-944b-e07fc1f90ae7-of-the-north".to_owned();
    let start = 1_772_323_200_000_i64; // 2026-03-01T00:00:00Z
    let mut aggregator = Aggregator::new();
    for hour in 0..6_i64 {
        for (agency, agent) in [
            ("agency-1", "rep-ada"),
            (long_agency.as_str(), long_agent.as_str()),
        ] {
            for score in [84.0, 62.0] {
                aggregator.add(ReportCall {
                    source: "roleplay".to_owned(),
                    agent_id: Some(format!("ag_{agent}")),
                    agency_id: Some(format!("agy_{agency}")),
                    platform_agent_id: Some(agent.to_owned()),
                    platform_agency_id: Some(agency.to_owned()),
                    listed_ms: Some(start + hour * 3_600_000),
                    overall_score: Some(score),
                    compliance_percent: Some(90.0),
                });
            }
        }
    }
    let day = DayCounts {
        scored_webhooks: 20,
        failure_events: 1,
        recovered: 4,
        silent_changes: 0,
    };
    let report = HtmlReport {
        store: "calls.db".to_owned(),
        generated_at: chrono::Utc::now(),
        since: None,
        figures: aggregator.finish(vec![("2026-03-01".to_owned(), day)]),
    };
    report.to_html()
}

/// What overflows at the current width: the page sideways, each chart, the 80–89 bar, each
/// table and the agents' Compliance column against their card, and x-axis labels that overlap
/// one another; and which of the scores-over-time points are covered by another.
const LAYOUT: &str = r#"
const width = document.documentElement.clientWidth;
const inside = (el, box) => {
  const r = el.getBoundingClientRect();
  return r.left >= box.left - 0.5 && r.right <= box.right + 0.5;
};
const card = (el) => el.closest('section').getBoundingClientRect();
const out = [];
if (document.documentElement.scrollWidth > width) out.push('page is ' + document.documentElement.scrollWidth + ' wide');
for (const svg of document.querySelectorAll('svg.chart')) {
  if (!inside(svg, card(svg))) out.push(svg.id + ' leaves its card');
  if (svg.getBoundingClientRect().right > width + 0.5) out.push(svg.id + ' leaves the screen');
}
const band = [...document.querySelectorAll('#score-distribution-chart rect.bar')]
  .filter((r) => r.querySelector('title').textContent.includes('80–89'));
if (band.length === 0) out.push('no 80–89 bar');
for (const bar of band) {
  const r = bar.getBoundingClientRect();
  if (r.right > width + 0.5 || !inside(bar, card(bar))) out.push('the 80–89 bar is cut off');
}
for (const table of document.querySelectorAll('table')) {
  if (!inside(table, card(table))) out.push('a table leaves its card: ' + table.closest('section').id);
  for (const cell of table.querySelectorAll('td, th')) {
    if (cell.getClientRects().length && !inside(cell, card(cell))) {
      out.push('a cell leaves its card: ' + cell.textContent.slice(0, 40));
      break;
    }
  }
}
for (const svg of document.querySelectorAll('svg.chart')) {
  const labels = [...svg.querySelectorAll('text.label')]
    .filter((t) => getComputedStyle(t).display !== 'none')
    .map((t) => ({ text: t.textContent, r: t.getBoundingClientRect() }))
    .sort((a, b) => a.r.left - b.r.left);
  for (let i = 1; i < labels.length; i++) {
    if (labels[i].r.left < labels[i - 1].r.right) {
      out.push(svg.id + ': x labels ' + labels[i - 1].text + ' and ' + labels[i].text + ' overlap');
    }
  }
}
const covered = [];
for (const point of document.querySelectorAll('#scores-over-time-chart circle.point')) {
  point.scrollIntoView({ block: 'center', inline: 'center' });
  const r = point.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  const mark = hit && hit.closest('circle.point');
  if (mark !== point) covered.push(point.querySelector('title').textContent);
}
return { out, covered, points: document.querySelectorAll('#scores-over-time-chart circle.point').length };
"#;

#[tokio::test]
async fn the_report_fits_a_phone_and_a_laptop_with_long_ids_and_overlapping_agencies_all_visible() {
    let dir = TestDir::new();
    let Some(browser) = chromium::start("report-widths", dir.dir.path()).await else {
        return;
    };
    dir.write("crowded.html", crowded_report());
    let url = format!("file://{}", dir.path("crowded.html").display());
    browser.client.goto(&url).await.expect("open the report");
    browser.wait_for("#delivery-health").await;
    for (name, size, mobile) in [("laptop", (1280, 800), false), ("phone", PHONE, true)] {
        browser.viewport(size, mobile).await;
        browser
            .run("window.scrollTo(0, 0); return null;", vec![])
            .await;
        let layout = browser.run(LAYOUT, vec![]).await;
        browser.screenshot(&format!("crowded-{name}")).await;
        assert_eq!(layout["out"], json!([]), "at {name} width: {layout:#}");
        assert_eq!(
            layout["points"],
            json!(12),
            "two agencies, six hours, a point an hour each: {layout:#}"
        );
        assert_eq!(
            layout["covered"],
            json!([]),
            "at {name} width, every point of the two equal agencies shows: {layout:#}"
        );
    }
    browser.close().await;
}
