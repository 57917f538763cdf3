//! The report as one self-contained HTML page: inline CSS and SVG, no script, no external
//! resource (its Content-Security-Policy forbids any), so it opens offline and prints. Every
//! value from the store is escaped.
//!
//! It reads at any width: the charts scale with their `viewBox` (no minimum width, no sideways
//! scrolling), long ids wrap anywhere rather than widen their table, and on a narrow screen
//! (640 px and less) each table row stacks into a card whose cells name their column
//! (`data-label`).

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use super::HtmlReport;
use super::chart::{self, PALETTE, Series, legend, line_legend, meter};
use super::model::{BINS, Figures, Point};
use svc_store::report_rows::DayCounts;

use super::escape::escape;

const STYLE: &str = include_str!("report.css");

/// One series of the delivery-health chart.
struct HealthSeries {
    label: &'static str,
    color: &'static str,
    count: fn(&DayCounts) -> u64,
}

const HEALTH: [HealthSeries; 4] = [
    HealthSeries {
        label: "webhooks received",
        color: "#2457c5",
        count: |d| d.scored_webhooks,
    },
    HealthSeries {
        label: "recovered by reconcile",
        color: "#e07a1f",
        count: |d| d.recovered,
    },
    HealthSeries {
        label: "failure events",
        color: "#b42318",
        count: |d| d.failure_events,
    },
    HealthSeries {
        label: "silent changes",
        color: "#7a3fb8",
        count: |d| d.silent_changes,
    },
];

fn ts(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M UTC").to_string()
}

fn score_text(score: Option<f64>) -> String {
    score.map_or_else(|| "–".to_owned(), |s| format!("{s:.1}"))
}

fn source_name(source: &str) -> &str {
    match source {
        "roleplay" => "practice calls",
        "real_call" => "real calls",
        other => other,
    }
}

/// The whole page.
pub fn render(report: &HtmlReport) -> String {
    let f = &report.figures;
    let mut page = String::with_capacity(64 * 1024);
    let window = match report.since {
        Some(since) => format!("calls since {}", ts(since)),
        None => "every call in the store".to_owned(),
    };
    let _ = write!(
        page,
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>Scored calls report</title>
<style>{STYLE}</style>
</head>
<body>
<header>
<h1>Scored calls report</h1>
<p class="meta">Store <code>{store}</code> · {window} · generated {generated}</p>
</header>
<main>
"#,
        store = escape(&report.store),
        window = escape(&window),
        generated = ts(report.generated_at),
    );
    summary(&mut page, f);
    distribution(&mut page, f);
    over_time(&mut page, f);
    agents(&mut page, f);
    delivery_health(&mut page, f);
    page.push_str(
        "</main>\n<footer>Written by <code>svc-cli store report</code>. Self-contained: no script, \
         nothing loaded from the network.</footer>\n</body>\n</html>\n",
    );
    page
}

fn summary(page: &mut String, f: &Figures) {
    let t = &f.totals;
    let days = &f.days;
    let sum = |get: fn(&DayCounts) -> u64| days.iter().map(|(_, d)| get(d)).sum::<u64>();
    let cards = [
        (
            "Calls",
            t.calls.to_string(),
            format!("{} practice · {} real", t.practice, t.real),
        ),
        (
            "Average score",
            score_text(t.average_score),
            "headline scores, out of 100".to_owned(),
        ),
        (
            "Compliance",
            t.average_compliance
                .map_or_else(|| "–".to_owned(), |c| format!("{c:.0} %")),
            "average over calls assessed".to_owned(),
        ),
        (
            "Webhooks received",
            sum(|d| d.scored_webhooks + d.failure_events).to_string(),
            format!("{} failure events", sum(|d| d.failure_events)),
        ),
        (
            "Recovered",
            sum(|d| d.recovered).to_string(),
            "webhook missed, found by reconcile".to_owned(),
        ),
        (
            "Silent changes",
            sum(|d| d.silent_changes).to_string(),
            "scores changed without a webhook".to_owned(),
        ),
    ];
    page.push_str(r#"<section class="cards" id="summary">"#);
    for (title, value, note) in cards {
        let _ = write!(
            page,
            r#"<div class="card"><div class="card-title">{}</div><div class="card-value">{}</div><div class="card-note">{}</div></div>"#,
            escape(title),
            escape(&value),
            escape(&note)
        );
    }
    page.push_str("</section>\n");
}

fn distribution(page: &mut String, f: &Figures) {
    let categories: Vec<String> = (0..BINS)
        .map(|b| {
            if b + 1 == BINS {
                format!("{}–100", b * 10)
            } else {
                format!("{}–{}", b * 10, b * 10 + 9)
            }
        })
        .collect();
    let series: Vec<Series<'_, Vec<u64>>> = f
        .distribution
        .iter()
        .rev() // roleplay before real_call
        .enumerate()
        .map(|(n, (source, bins))| Series {
            label: source_name(source),
            color: PALETTE[n % PALETTE.len()],
            values: bins.to_vec(),
        })
        .collect();
    let svg = chart::stacked_bars(
        "score-distribution-chart",
        "Score distribution: calls per score band, stacked by source",
        &categories,
        &series,
        "No scored calls",
    );
    let note = if f.totals.real_without_score > 0 {
        format!(
            r#"<p class="note">{} real call(s) without a headline score (<code>overallScore</code> 0) are left out here and in every average.</p>"#,
            f.totals.real_without_score
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        page,
        r#"<section id="score-distribution"><h2>Score distribution</h2><figure><div class="chart-wrap">{svg}</div><figcaption>Calls per band of headline score.</figcaption></figure>{legend}{note}</section>"#,
        legend = legend(series.iter().map(|s| (s.label, s.color))),
    );
}

fn over_time(page: &mut String, f: &Figures) {
    let over = &f.over_time;
    let categories: Vec<String> = over.starts.iter().map(|s| over.bucket.label(*s)).collect();
    let series: Vec<Series<'_, &[Point]>> = over
        .series
        .iter()
        .enumerate()
        .map(|(n, s)| Series {
            label: s.label.as_str(),
            color: PALETTE[n % PALETTE.len()],
            values: s.points.as_slice(),
        })
        .collect();
    let svg = chart::score_lines(
        "scores-over-time-chart",
        "Average score over time, one line per agency",
        &categories,
        &series,
        "No scored calls",
    );
    let _ = writeln!(
        page,
        r#"<section id="scores-over-time"><h2>Scores over time, per agency</h2><figure><div class="chart-wrap">{svg}</div><figcaption>Average headline score per {bucket} (UTC), one line per agency.</figcaption></figure>{legend}</section>"#,
        bucket = over.bucket.name(),
        legend = line_legend(series.iter().map(|s| (s.label, s.color))),
    );
}

fn agents(page: &mut String, f: &Figures) {
    page.push_str(
        r#"<section id="agents"><h2>Agents</h2><div class="table-wrap"><table><thead><tr><th>Agent</th><th>Agency</th><th class="num">Calls</th><th class="num">Practice</th><th class="num">Real</th><th>Average score</th><th class="num">Compliance</th></tr></thead><tbody>"#,
    );
    if f.agents.is_empty() {
        page.push_str(r#"<tr><td colspan="7" class="empty">No calls in the store.</td></tr>"#);
    }
    for agent in &f.agents {
        let id = match &agent.agent_id {
            Some(id) if *id != agent.label => format!(r#"<div class="sub">{}</div>"#, escape(id)),
            _ => String::new(),
        };
        let score = agent.average_score.map_or_else(
            || "–".to_owned(),
            |s| format!("{} {}", meter(s), escape(&format!("{s:.1}"))),
        );
        let compliance = agent.average_compliance.map_or_else(
            || "–".to_owned(),
            |c| {
                format!(
                    "{c:.0} % <span class=\"sub\">({})</span>",
                    agent.compliance_calls
                )
            },
        );
        let _ = write!(
            page,
            r#"<tr><td data-label="Agent" class="id">{label}{id}</td><td data-label="Agency" class="id">{agency}</td><td data-label="Calls" class="num">{calls}</td><td data-label="Practice" class="num">{practice}</td><td data-label="Real" class="num">{real}</td><td data-label="Average score" class="score">{score}</td><td data-label="Compliance" class="num">{compliance}</td></tr>"#,
            label = escape(&agent.label),
            agency = escape(&agent.agency),
            calls = agent.calls,
            practice = agent.practice,
            real = agent.real,
        );
    }
    page.push_str(
        "</tbody></table></div><p class=\"note\">Compliance is the average <code>compliancePercent</code> over the calls assessed for it (how many in brackets).</p></section>\n",
    );
}

fn delivery_health(page: &mut String, f: &Figures) {
    let categories: Vec<String> = f.days.iter().map(|(day, _)| day.clone()).collect();
    let series: Vec<Series<'_, Vec<u64>>> = HEALTH
        .iter()
        .map(|h| Series {
            label: h.label,
            color: h.color,
            values: f.days.iter().map(|(_, d)| (h.count)(d)).collect(),
        })
        .collect();
    let svg = chart::grouped_bars(
        "delivery-health-chart",
        "Delivery health per day",
        &categories,
        &series,
        "No deliveries, recoveries or changes recorded",
    );
    let _ = write!(
        page,
        r#"<section id="delivery-health"><h2>Delivery health per day</h2><figure><div class="chart-wrap">{svg}</div><figcaption>Per UTC day: <code>call.scored</code> webhooks received (scored calls), calls recovered by reconcile after their webhook was missed, failure events (<code>success: false</code> webhooks), and silent score changes reconcile found.</figcaption></figure>{legend}<div class="table-wrap"><table><thead><tr><th>Day</th><th class="num">Webhooks received</th><th class="num">Recovered by reconcile</th><th class="num">Failure events</th><th class="num">Silent changes</th></tr></thead><tbody>"#,
        legend = legend(series.iter().map(|s| (s.label, s.color))),
    );
    if f.days.is_empty() {
        page.push_str(r#"<tr><td colspan="5" class="empty">Nothing recorded.</td></tr>"#);
    }
    for (day, d) in f.days.iter().rev() {
        let _ = write!(
            page,
            r#"<tr><td data-label="Day">{day}</td><td data-label="Webhooks received" class="num">{}</td><td data-label="Recovered by reconcile" class="num">{}</td><td data-label="Failure events" class="num">{}</td><td data-label="Silent changes" class="num">{}</td></tr>"#,
            d.scored_webhooks,
            d.recovered,
            d.failure_events,
            d.silent_changes,
            day = escape(day),
        );
    }
    page.push_str("</tbody></table></div></section>\n");
}
