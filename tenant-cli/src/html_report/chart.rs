//! The report's charts as inline SVG (no script, no external resource): stacked bars, lines
//! over an even time axis, grouped bars. Each chart scales to its container's width; each mark
//! has a `<title>` that a browser shows on hover; every text is escaped.

use std::fmt::Write as _;

use super::escape::escape;
use super::model::Point;

/// Series colours, told apart by people with the common colour-vision deficiencies.
pub const PALETTE: [&str; 8] = [
    "#2457c5", "#e07a1f", "#16794c", "#b42318", "#7a3fb8", "#0e7c86", "#a15c00", "#5d6777",
];

const WIDTH: f64 = 720.0;
/// The longest x label that still fits beside its neighbours on a phone (a score band).
const SHORT_LABEL: usize = 6;
const HEIGHT: f64 = 280.0;
const LEFT: f64 = 48.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 40.0;
/// The widest bar, so that a chart of one day still looks like bars.
const MAX_BAR: f64 = 48.0;

/// One series of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series<'a, T> {
    /// Its name (legend, hover).
    pub label: &'a str,
    /// Its colour.
    pub color: &'a str,
    /// One value per category (bars), or the points (lines).
    pub values: T,
}

/// A round step and top for an axis from 0 to at least `max`, with about `ticks` steps.
pub fn nice_axis(max: f64, ticks: usize) -> (f64, f64) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let rough = max / ticks.max(1) as f64;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= rough)
        .unwrap_or(10.0 * magnitude);
    let step = if step < 1.0 && max >= 1.0 { 1.0 } else { step };
    (step, (max / step).ceil() * step)
}

fn number(value: f64) -> String {
    if (value - value.round()).abs() < 1e-9 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// The frame every chart shares: the `<svg>` start, the y grid with its labels, and the axes.
struct Frame {
    out: String,
    top: f64,
    /// How many x labels are drawn so far.
    x_labels: usize,
}

impl Frame {
    fn new(id: &str, label: &str, top: f64, step: f64) -> Self {
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg class="chart" id="{id}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{label}" preserveAspectRatio="xMidYMid meet">"#,
            id = escape(id),
            label = escape(label),
        );
        let mut value = 0.0;
        while value <= top + 1e-9 {
            let y = Self::y_of(value, top);
            let _ = write!(
                out,
                r#"<line class="grid" x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{tx}" y="{ty:.1}" text-anchor="end">{v}</text>"#,
                x2 = WIDTH - RIGHT,
                tx = LEFT - 6.0,
                ty = y + 4.0,
                v = number(value),
            );
            value += step;
        }
        let _ = write!(
            out,
            r#"<line class="axis" x1="{LEFT}" x2="{x2}" y1="{y}" y2="{y}"/>"#,
            x2 = WIDTH - RIGHT,
            y = HEIGHT - BOTTOM,
        );
        Self {
            out,
            top,
            x_labels: 0,
        }
    }

    fn y_of(value: f64, top: f64) -> f64 {
        let plot = HEIGHT - TOP - BOTTOM;
        HEIGHT - BOTTOM - plot * (value / top).clamp(0.0, 1.0)
    }

    fn y(&self, value: f64) -> f64 {
        Self::y_of(value, self.top)
    }

    /// Draws an x label. Every other label longer than [`SHORT_LABEL`] is of class `alt`,
    /// which the page hides on a narrow screen, where the chart is scaled down and such labels
    /// would overlap.
    fn x_label(&mut self, x: f64, text: &str) {
        let alt = self.x_labels % 2 == 1 && text.chars().count() > SHORT_LABEL;
        self.x_labels += 1;
        let _ = write!(
            self.out,
            r#"<text class="{class}" x="{x:.1}" y="{y}" text-anchor="middle">{t}</text>"#,
            class = if alt { "label alt" } else { "label" },
            y = HEIGHT - BOTTOM + 16.0,
            t = escape(text),
        );
    }

    fn empty(mut self, message: &str) -> String {
        let _ = write!(
            self.out,
            r#"<text class="empty" x="{x}" y="{y}" text-anchor="middle">{m}</text></svg>"#,
            x = WIDTH / 2.0,
            y = HEIGHT / 2.0,
            m = escape(message),
        );
        self.out
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

/// The width of one category's slot and the x of its left edge.
fn slots(count: usize) -> (f64, impl Fn(usize) -> f64) {
    let width = (WIDTH - LEFT - RIGHT) / count.max(1) as f64;
    (width, move |i: usize| LEFT + width * i as f64)
}

/// Which of `count` labels to print so that about `room` fit.
fn labelled(i: usize, count: usize, room: usize) -> bool {
    let every = count.div_ceil(room.max(1)).max(1);
    i.is_multiple_of(every) || i + 1 == count && count <= room
}

/// Bars stacked per category. `series[s].values[c]` is series `s` in category `c`.
pub fn stacked_bars(
    id: &str,
    label: &str,
    categories: &[String],
    series: &[Series<'_, Vec<u64>>],
    empty: &str,
) -> String {
    let totals: Vec<u64> = (0..categories.len())
        .map(|c| series.iter().filter_map(|s| s.values.get(c)).sum())
        .collect();
    let max = totals.iter().copied().max().unwrap_or(0);
    let (step, top) = nice_axis(max as f64, 5);
    let mut frame = Frame::new(id, label, top, step);
    if max == 0 {
        return frame.empty(empty);
    }
    let (width, left) = slots(categories.len());
    let bar = (width * 0.72).min(MAX_BAR);
    for (c, category) in categories.iter().enumerate() {
        let x = left(c) + (width - bar) / 2.0;
        let mut base = 0u64;
        for s in series {
            let value = s.values.get(c).copied().unwrap_or(0);
            if value == 0 {
                continue;
            }
            let (y0, y1) = (frame.y(base as f64), frame.y((base + value) as f64));
            let _ = write!(
                frame.out,
                r#"<rect class="bar" x="{x:.1}" y="{y1:.1}" width="{bar:.1}" height="{h:.1}" fill="{color}"><title>{t}</title></rect>"#,
                h = (y0 - y1).max(0.5),
                color = escape(s.color),
                t = escape(&format!("{}, {category}: {value}", s.label)),
            );
            base += value;
        }
        if labelled(c, categories.len(), 12) {
            frame.x_label(left(c) + width / 2.0, category);
        }
    }
    frame.finish()
}

/// Bars side by side per category.
pub fn grouped_bars(
    id: &str,
    label: &str,
    categories: &[String],
    series: &[Series<'_, Vec<u64>>],
    empty: &str,
) -> String {
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .max()
        .unwrap_or(0);
    let (step, top) = nice_axis(max as f64, 5);
    let mut frame = Frame::new(id, label, top, step);
    if max == 0 {
        return frame.empty(empty);
    }
    let (width, left) = slots(categories.len());
    let group = (width * 0.8).min(MAX_BAR * series.len() as f64);
    let bar = group / series.len().max(1) as f64;
    for (c, category) in categories.iter().enumerate() {
        let x0 = left(c) + (width - group) / 2.0;
        for (n, s) in series.iter().enumerate() {
            let value = s.values.get(c).copied().unwrap_or(0);
            let y = frame.y(value as f64);
            let _ = write!(
                frame.out,
                r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{color}"><title>{t}</title></rect>"#,
                x = x0 + bar * n as f64,
                w = (bar - 1.0).max(0.5),
                h = (frame.y(0.0) - y).max(if value > 0 { 0.5 } else { 0.0 }),
                color = escape(s.color),
                t = escape(&format!("{}, {category}: {value}", s.label)),
            );
        }
        if labelled(c, categories.len(), 8) {
            frame.x_label(left(c) + width / 2.0, category);
        }
    }
    frame.finish()
}

/// Dash patterns of the lines, one per series in turn (solid first): two series that run
/// together stay told apart by their pattern, not only by their colour.
pub const DASHES: [&str; 4] = ["", "7 4", "2 3", "10 3 2 3"];

/// The dash pattern of series `n`.
pub fn dash(n: usize) -> &'static str {
    DASHES[n % DASHES.len()]
}

/// How far (in the chart's units) series `n` of `count` is drawn from its category's centre:
/// series fan out across the slot, so that equal values stand side by side instead of one
/// covering the other. A point's radius is 3.5, so 8 apart never overlap while the slot has
/// room.
fn fan_out(n: usize, count: usize, slot: f64) -> f64 {
    if count < 2 {
        return 0.0;
    }
    let spread = (slot * 0.7 / count as f64).min(8.0);
    (n as f64 - (count - 1) as f64 / 2.0) * spread
}

/// One line per series over an even axis of `categories`; a series' points are
/// `(category index, value, how many calls)`; values run from 0 to 100. Series are drawn
/// side by side within each category and each with its own dash pattern ([`dash`]), so lines
/// with equal values all show.
pub fn score_lines(
    id: &str,
    label: &str,
    categories: &[String],
    series: &[Series<'_, &[Point]>],
    empty: &str,
) -> String {
    let mut frame = Frame::new(id, label, 100.0, 20.0);
    if series.iter().all(|s| s.values.is_empty()) {
        return frame.empty(empty);
    }
    let (width, left) = slots(categories.len());
    let x_of = |i: usize| left(i) + width / 2.0;
    // Every line first, then every point: no line runs over another series' point.
    for (n, s) in series.iter().enumerate() {
        let dx = fan_out(n, series.len(), width);
        let points: Vec<String> = s
            .values
            .iter()
            .map(|(i, v, _)| format!("{:.1},{:.1}", x_of(*i) + dx, frame.y(*v)))
            .collect();
        if points.len() > 1 {
            let dashes = match dash(n) {
                "" => String::new(),
                d => format!(r#" stroke-dasharray="{d}""#),
            };
            let _ = write!(
                frame.out,
                r#"<polyline class="line" data-series="{n}" fill="none" stroke="{color}" stroke-width="2"{dashes} points="{p}"/>"#,
                color = escape(s.color),
                p = points.join(" "),
            );
        }
    }
    for (n, s) in series.iter().enumerate() {
        let dx = fan_out(n, series.len(), width);
        for (i, value, calls) in s.values.iter() {
            let _ = write!(
                frame.out,
                r##"<circle class="point" data-series="{n}" cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}" stroke="#fff" stroke-width="1"><title>{t}</title></circle>"##,
                x = x_of(*i) + dx,
                y = frame.y(*value),
                color = escape(s.color),
                t = escape(&format!(
                    "{}, {}: average {} over {calls} call(s)",
                    s.label,
                    categories.get(*i).map_or("", String::as_str),
                    number((*value * 10.0).round() / 10.0)
                )),
            );
        }
    }
    for (i, category) in categories.iter().enumerate() {
        if labelled(i, categories.len(), 6) {
            frame.x_label(x_of(i), category);
        }
    }
    frame.finish()
}

/// A legend of lines: a sample of each series' line (its colour and dash pattern) and its name.
pub fn line_legend<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::from(r#"<ul class="legend">"#);
    for (n, (label, color)) in entries.into_iter().enumerate() {
        let dashes = match dash(n) {
            "" => String::new(),
            d => format!(r#" stroke-dasharray="{d}""#),
        };
        let _ = write!(
            out,
            r#"<li><svg width="28" height="12" aria-hidden="true"><line x1="1" x2="27" y1="6" y2="6" stroke="{c}" stroke-width="2"{dashes}/><circle cx="14" cy="6" r="3.5" fill="{c}"/></svg>{l}</li>"#,
            c = escape(color),
            l = escape(label),
        );
    }
    out.push_str("</ul>");
    out
}

/// A legend: one swatch and name per series.
pub fn legend<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::from(r#"<ul class="legend">"#);
    for (label, color) in entries {
        let _ = write!(
            out,
            r#"<li><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" rx="2" fill="{c}"/></svg>{l}</li>"#,
            c = escape(color),
            l = escape(label),
        );
    }
    out.push_str("</ul>");
    out
}

/// A small horizontal bar of `value` out of 100, for table cells.
pub fn meter(value: f64) -> String {
    let width = 60.0 * (value / 100.0).clamp(0.0, 1.0);
    format!(
        r##"<svg class="meter" width="60" height="8" aria-hidden="true"><rect width="60" height="8" rx="2" fill="#e6e9ef"/><rect width="{width:.1}" height="8" rx="2" fill="#2457c5"/></svg>"##
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_end_on_a_round_number_above_the_maximum() {
        assert_eq!(nice_axis(7.0, 5), (2.0, 8.0));
        assert_eq!(nice_axis(23.0, 5), (5.0, 25.0));
        assert_eq!(nice_axis(100.0, 5), (20.0, 100.0));
        assert_eq!(nice_axis(0.0, 5), (1.0, 1.0));
        assert_eq!(nice_axis(3.0, 5), (1.0, 3.0));
    }

    #[test]
    fn a_stacked_bar_chart_has_a_bar_per_nonzero_value_and_escapes_its_text() {
        let categories = vec!["0–9".to_owned(), "<b>".to_owned()];
        let svg = stacked_bars(
            "c",
            "Scores",
            &categories,
            &[
                Series {
                    label: "practice",
                    color: PALETTE[0],
                    values: vec![1, 2],
                },
                Series {
                    label: "real",
                    color: PALETTE[1],
                    values: vec![0, 3],
                },
            ],
            "none",
        );
        assert_eq!(svg.matches(r#"<rect class="bar""#).count(), 3);
        assert!(svg.contains("&lt;b&gt;") && !svg.contains("<b>"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    }

    #[test]
    fn a_chart_without_data_says_so() {
        let svg = score_lines("t", "Scores", &[], &[], "No scored calls");
        assert!(svg.contains("No scored calls"));
        assert!(!svg.contains("polyline"));
    }

    /// The `cx` of every point of series `n`.
    fn xs(svg: &str, n: usize) -> Vec<String> {
        svg.split(&format!(r#"<circle class="point" data-series="{n}" cx=""#))
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap_or_default().to_owned())
            .collect()
    }

    #[test]
    fn two_series_with_equal_values_are_drawn_side_by_side_with_their_own_dashes() {
        let points: Vec<Point> = vec![(0, 75.0, 2), (1, 75.0, 2)];
        let categories = vec!["2026-03-01".to_owned(), "2026-03-02".to_owned()];
        let series = [
            Series {
                label: "agency-1",
                color: PALETTE[0],
                values: points.as_slice(),
            },
            Series {
                label: "agency-2",
                color: PALETTE[1],
                values: points.as_slice(),
            },
        ];
        let svg = score_lines("t", "Scores", &categories, &series, "none");
        let (first, second) = (xs(&svg, 0), xs(&svg, 1));
        assert_eq!((first.len(), second.len()), (2, 2), "{svg}");
        for (a, b) in first.iter().zip(&second) {
            let (a, b): (f64, f64) = (a.parse().unwrap_or(0.0), b.parse().unwrap_or(0.0));
            assert!(
                (a - b).abs() >= 7.0,
                "points 3.5 in radius do not cover each other: {svg}"
            );
        }
        assert!(
            svg.contains(r##"data-series="1" fill="none" stroke="#e07a1f" stroke-width="2" stroke-dasharray="7 4""##),
            "{svg}"
        );
        let legend = line_legend(series.iter().map(|s| (s.label, s.color)));
        assert!(legend.contains(r#"stroke-dasharray="7 4""#), "{legend}");
    }
}
