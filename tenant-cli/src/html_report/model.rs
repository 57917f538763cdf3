//! The report's figures, aggregated from the store's rows as they stream past: totals, the
//! score distribution per source, average scores over time per agency, one row per agent, and
//! delivery health per day.
//!
//! A real call's `overallScore` of 0 means "no headline score could be produced" (contract,
//! section 2): such calls are counted, but kept out of the distribution and every average.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Datelike as _, Duration, TimeZone as _, Timelike as _, Utc};

use svc_store::report_rows::{DayCounts, ReportCall};

/// Score bins of the distribution: 0–9, 10–19, …, 90–100.
pub const BINS: usize = 10;
/// Agencies drawn as their own line; the others share one.
pub const MAX_AGENCY_LINES: usize = 8;
/// Spans up to this many hours are drawn per hour; up to [`DAILY_UP_TO_DAYS`] per day; longer
/// ones per week.
pub const HOURLY_UP_TO_HOURS: i64 = 48;
/// See [`HOURLY_UP_TO_HOURS`].
pub const DAILY_UP_TO_DAYS: i64 = 180;
/// The label of the line that gathers the agencies past [`MAX_AGENCY_LINES`].
pub const OTHER_AGENCIES: &str = "other agencies";

/// Everything the report shows.
#[derive(Debug, Clone)]
pub struct Figures {
    /// Headline counts.
    pub totals: Totals,
    /// Scores per bin, per source (sources in name order).
    pub distribution: BTreeMap<String, [u64; BINS]>,
    /// Average score per time bucket, per agency.
    pub over_time: OverTime,
    /// One row per agent, most calls first.
    pub agents: Vec<AgentRow>,
    /// Delivery health per UTC day, in day order.
    pub days: Vec<(String, DayCounts)>,
}

/// Headline counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Stored calls in the window.
    pub calls: u64,
    /// Of which practice calls.
    pub practice: u64,
    /// Of which real calls.
    pub real: u64,
    /// Real calls without a headline score (`overallScore` 0).
    pub real_without_score: u64,
    /// Average of the headline scores.
    pub average_score: Option<f64>,
    /// Average `compliancePercent` of the calls assessed for compliance.
    pub average_compliance: Option<f64>,
    /// The first and last listing time (unix ms).
    pub span_ms: Option<(i64, i64)>,
}

/// How long one bucket of the time chart is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    /// One hour.
    Hour,
    /// One UTC day.
    Day,
    /// One week, Monday to Sunday.
    Week,
}

impl Bucket {
    /// The unit's name, for captions.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hour => "hour",
            Self::Day => "day",
            Self::Week => "week",
        }
    }

    /// The start of the bucket holding `at`.
    pub fn start(self, at: DateTime<Utc>) -> DateTime<Utc> {
        let day = Utc
            .with_ymd_and_hms(at.year(), at.month(), at.day(), 0, 0, 0)
            .single()
            .unwrap_or(at);
        match self {
            Self::Hour => day + Duration::hours(i64::from(at.hour())),
            Self::Day => day,
            Self::Week => day - Duration::days(i64::from(at.weekday().num_days_from_monday())),
        }
    }

    /// How long a bucket lasts.
    pub fn length(self) -> Duration {
        match self {
            Self::Hour => Duration::hours(1),
            Self::Day => Duration::days(1),
            Self::Week => Duration::weeks(1),
        }
    }

    /// A bucket's label.
    pub fn label(self, start: DateTime<Utc>) -> String {
        match self {
            Self::Hour => start.format("%m-%d %H:00").to_string(),
            Self::Day | Self::Week => start.format("%Y-%m-%d").to_string(),
        }
    }

    /// The bucket that fits a span from `first` to `last`.
    pub fn for_span(first: DateTime<Utc>, last: DateTime<Utc>) -> Self {
        let span = last - first;
        if span <= Duration::hours(HOURLY_UP_TO_HOURS) {
            Self::Hour
        } else if span <= Duration::days(DAILY_UP_TO_DAYS) {
            Self::Day
        } else {
            Self::Week
        }
    }
}

/// Average scores over time, per agency.
#[derive(Debug, Clone, PartialEq)]
pub struct OverTime {
    /// The bucket size.
    pub bucket: Bucket,
    /// The start of every bucket from the first call's to the last's (empty buckets included,
    /// so the time axis is even).
    pub starts: Vec<DateTime<Utc>>,
    /// One line per agency, most calls first.
    pub series: Vec<AgencySeries>,
}

/// A point of a line: `(bucket index, average score, calls)`.
pub type Point = (usize, f64, u64);

/// One agency's line.
#[derive(Debug, Clone, PartialEq)]
pub struct AgencySeries {
    /// The tenant's agency id, else the service's.
    pub label: String,
    /// Scored calls on the line.
    pub calls: u64,
    /// The buckets with calls.
    pub points: Vec<Point>,
}

/// One agent's row.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRow {
    /// The tenant's agent id, else the service's.
    pub label: String,
    /// The service's agent id.
    pub agent_id: Option<String>,
    /// The agent's agency (tenant's id, else service's).
    pub agency: String,
    /// Calls stored.
    pub calls: u64,
    /// Practice calls.
    pub practice: u64,
    /// Real calls.
    pub real: u64,
    /// Average headline score.
    pub average_score: Option<f64>,
    /// Average `compliancePercent` over the calls assessed.
    pub average_compliance: Option<f64>,
    /// Calls assessed for compliance.
    pub compliance_calls: u64,
}

/// A running mean.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Mean {
    sum: f64,
    n: u64,
}

impl Mean {
    fn add(&mut self, value: f64) {
        self.sum += value;
        self.n += 1;
    }

    fn merge(&mut self, other: Mean) {
        self.sum += other.sum;
        self.n += other.n;
    }

    fn get(self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

#[derive(Debug, Default)]
struct AgentTally {
    label: String,
    agent_id: Option<String>,
    agency: String,
    calls: u64,
    practice: u64,
    real: u64,
    score: Mean,
    compliance: Mean,
}

/// Collects the calls one at a time; [`Aggregator::finish`] gives the [`Figures`].
#[derive(Debug, Default)]
pub struct Aggregator {
    totals: Totals,
    score: Mean,
    compliance: Mean,
    distribution: BTreeMap<String, [u64; BINS]>,
    agents: HashMap<String, AgentTally>,
    /// Per agency: calls, and score sums per day and (while the span allows) per hour.
    agencies: HashMap<String, u64>,
    per_day: HashMap<(String, i64), Mean>,
    per_hour: HashMap<(String, i64), Mean>,
    hourly: bool,
}

/// The headline score a call counts with, if any.
fn headline(call: &ReportCall) -> Option<f64> {
    let score = call.overall_score?;
    (call.source != "real_call" || score > 0.0).then_some(score.clamp(0.0, 100.0))
}

fn bin_of(score: f64) -> usize {
    ((score / 10.0).floor().max(0.0) as usize).min(BINS - 1)
}

fn agency_of(call: &ReportCall) -> String {
    call.platform_agency_id
        .clone()
        .or_else(|| call.agency_id.clone())
        .unwrap_or_else(|| "(no agency)".to_owned())
}

impl Aggregator {
    /// An empty aggregator.
    pub fn new() -> Self {
        Self {
            hourly: true,
            ..Self::default()
        }
    }

    /// Counts one call.
    pub fn add(&mut self, call: ReportCall) {
        let totals = &mut self.totals;
        totals.calls += 1;
        match call.source.as_str() {
            "roleplay" => totals.practice += 1,
            "real_call" => totals.real += 1,
            _ => {}
        }
        let score = headline(&call);
        if call.source == "real_call" && call.overall_score.is_some() && score.is_none() {
            totals.real_without_score += 1;
        }
        if let Some(at) = call.listed_ms {
            totals.span_ms = Some(match totals.span_ms {
                None => (at, at),
                Some((first, last)) => (first.min(at), last.max(at)),
            });
        }
        if let Some(score) = score {
            self.score.add(score);
            self.distribution
                .entry(call.source.clone())
                .or_insert([0; BINS])[bin_of(score)] += 1;
        }
        if let Some(compliance) = call.compliance_percent {
            self.compliance.add(compliance.clamp(0.0, 100.0));
        }
        let agency = agency_of(&call);
        if let (Some(score), Some(at)) = (score, call.listed_ms) {
            *self.agencies.entry(agency.clone()).or_default() += 1;
            self.per_day
                .entry((agency.clone(), at.div_euclid(86_400_000)))
                .or_default()
                .add(score);
            self.hourly = self
                .totals
                .span_ms
                .is_some_and(|(first, last)| last - first <= HOURLY_UP_TO_HOURS * 3_600_000);
            if self.hourly {
                self.per_hour
                    .entry((agency.clone(), at.div_euclid(3_600_000)))
                    .or_default()
                    .add(score);
            } else if !self.per_hour.is_empty() {
                self.per_hour = HashMap::new();
            }
        }
        self.add_to_agent(&call, agency, score);
    }

    fn add_to_agent(&mut self, call: &ReportCall, agency: String, score: Option<f64>) {
        let key = call
            .agent_id
            .clone()
            .or_else(|| call.platform_agent_id.clone())
            .unwrap_or_else(|| "(unknown agent)".to_owned());
        let tally = self
            .agents
            .entry(key.clone())
            .or_insert_with(|| AgentTally {
                label: call.platform_agent_id.clone().unwrap_or(key),
                agent_id: call.agent_id.clone(),
                agency,
                ..AgentTally::default()
            });
        tally.calls += 1;
        match call.source.as_str() {
            "roleplay" => tally.practice += 1,
            "real_call" => tally.real += 1,
            _ => {}
        }
        if let Some(score) = score {
            tally.score.add(score);
        }
        if let Some(compliance) = call.compliance_percent {
            tally.compliance.add(compliance.clamp(0.0, 100.0));
        }
    }

    /// The figures, with `days` (delivery health) as the store counted them.
    pub fn finish(mut self, days: Vec<(String, DayCounts)>) -> Figures {
        self.totals.average_score = self.score.get();
        self.totals.average_compliance = self.compliance.get();
        let over_time = self.over_time();
        let mut agents: Vec<AgentRow> = self
            .agents
            .into_values()
            .map(|t| AgentRow {
                label: t.label,
                agent_id: t.agent_id,
                agency: t.agency,
                calls: t.calls,
                practice: t.practice,
                real: t.real,
                average_score: t.score.get(),
                average_compliance: t.compliance.get(),
                compliance_calls: t.compliance.n,
            })
            .collect();
        agents.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.label.cmp(&b.label)));
        Figures {
            totals: self.totals,
            distribution: self.distribution,
            over_time,
            agents,
            days,
        }
    }

    fn over_time(&mut self) -> OverTime {
        let span = self
            .totals
            .span_ms
            .and_then(|(first, last)| Some((ms_time(first)?, ms_time(last)?)));
        let Some((first, last)) = span else {
            return OverTime {
                bucket: Bucket::Day,
                starts: Vec::new(),
                series: Vec::new(),
            };
        };
        let bucket = if self.hourly {
            Bucket::Hour
        } else {
            Bucket::for_span(first, last).max_daily()
        };
        let mut starts = Vec::new();
        let mut at = bucket.start(first);
        while at <= last {
            starts.push(at);
            at += bucket.length();
        }
        let index = |start: DateTime<Utc>| starts.binary_search(&start).ok();
        let mut ranked: Vec<(String, u64)> = self
            .agencies
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(a, n)| (a.clone(), *n))
            .collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let overflow = ranked.len() > MAX_AGENCY_LINES;
        let line_of = |agency: &str| -> String {
            match ranked.iter().position(|(a, _)| a == agency) {
                Some(rank) if !overflow || rank < MAX_AGENCY_LINES - 1 => agency.to_owned(),
                _ => OTHER_AGENCIES.to_owned(),
            }
        };
        let source = if bucket == Bucket::Hour {
            std::mem::take(&mut self.per_hour)
                .into_iter()
                .map(|((a, hour), m)| ((a, hour * 3_600_000), m))
                .collect::<Vec<_>>()
        } else {
            std::mem::take(&mut self.per_day)
                .into_iter()
                .map(|((a, day), m)| ((a, day * 86_400_000), m))
                .collect()
        };
        let mut lines: BTreeMap<String, BTreeMap<usize, Mean>> = BTreeMap::new();
        for ((agency, at_ms), mean) in source {
            let Some(i) = ms_time(at_ms).and_then(|at| index(bucket.start(at))) else {
                continue;
            };
            lines
                .entry(line_of(&agency))
                .or_default()
                .entry(i)
                .or_default()
                .merge(mean);
        }
        let mut series: Vec<AgencySeries> = lines
            .into_iter()
            .map(|(label, points)| AgencySeries {
                calls: points.values().map(|m| m.n).sum(),
                points: points
                    .into_iter()
                    .filter_map(|(i, m)| Some((i, m.get()?, m.n)))
                    .collect(),
                label,
            })
            .collect();
        series.sort_by(|a, b| {
            (a.label == OTHER_AGENCIES)
                .cmp(&(b.label == OTHER_AGENCIES))
                .then(b.calls.cmp(&a.calls))
                .then_with(|| a.label.cmp(&b.label))
        });
        OverTime {
            bucket,
            starts,
            series,
        }
    }
}

impl Bucket {
    /// Hours are only kept while the span is short: past it, days at least.
    fn max_daily(self) -> Self {
        match self {
            Self::Hour => Self::Day,
            other => other,
        }
    }
}

/// Unix milliseconds as a time.
pub fn ms_time(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(source: &str, agency: &str, agent: &str, at_ms: i64, score: f64) -> ReportCall {
        ReportCall {
            source: source.to_owned(),
            agent_id: Some(format!("svc_agent_{agent}")),
            agency_id: Some(format!("svc_agency_{agency}")),
            platform_agent_id: Some(agent.to_owned()),
            platform_agency_id: Some(agency.to_owned()),
            listed_ms: Some(at_ms),
            overall_score: Some(score),
            compliance_percent: (source == "real_call").then_some(80.0),
        }
    }

    const HOUR: i64 = 3_600_000;
    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    #[test]
    fn scores_fall_in_their_bins_and_a_real_call_without_a_headline_score_is_left_out() {
        let mut agg = Aggregator::new();
        for (source, score) in [
            ("roleplay", 0.0),
            ("roleplay", 9.9),
            ("roleplay", 10.0),
            ("roleplay", 100.0),
            ("real_call", 95.0),
            ("real_call", 0.0),
        ] {
            agg.add(call(source, "a1", "rep-1", T0, score));
        }
        let figures = agg.finish(Vec::new());
        assert_eq!(
            figures.distribution["roleplay"],
            [2, 1, 0, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(figures.distribution["real_call"][9], 1);
        assert_eq!(figures.totals.calls, 6);
        assert_eq!(figures.totals.real_without_score, 1);
        let average = figures.totals.average_score.unwrap_or_default();
        assert!((average - (9.9 + 10.0 + 100.0 + 95.0) / 5.0).abs() < 1e-9);
        assert_eq!(figures.agents.len(), 1);
        assert_eq!(figures.agents[0].calls, 6);
        assert_eq!(figures.agents[0].compliance_calls, 2);
    }

    #[test]
    fn a_short_span_is_drawn_per_hour_and_a_long_one_per_day_or_week() {
        let mut agg = Aggregator::new();
        agg.add(call("roleplay", "a1", "rep-1", T0 + 10 * 60_000, 60.0));
        agg.add(call("roleplay", "a1", "rep-1", T0 + 20 * 60_000, 80.0));
        agg.add(call("roleplay", "a2", "rep-2", T0 + 3 * HOUR, 50.0));
        let figures = agg.finish(Vec::new());
        let over = &figures.over_time;
        assert_eq!(over.bucket, Bucket::Hour);
        assert_eq!(over.starts.len(), 4, "hours 0 to 3, empty ones included");
        assert_eq!(over.series[0].label, "a1");
        assert_eq!(over.series[0].points, vec![(0, 70.0, 2)]);
        assert_eq!(over.series[1].points, vec![(3, 50.0, 1)]);

        let mut agg = Aggregator::new();
        agg.add(call("roleplay", "a1", "rep-1", T0, 60.0));
        agg.add(call("roleplay", "a1", "rep-1", T0 + 10 * 24 * HOUR, 80.0));
        let over = agg.finish(Vec::new()).over_time;
        assert_eq!(over.bucket, Bucket::Day);
        assert_eq!(over.starts.len(), 11);
        assert_eq!(over.series[0].points, vec![(0, 60.0, 1), (10, 80.0, 1)]);

        let mut agg = Aggregator::new();
        agg.add(call("roleplay", "a1", "rep-1", T0, 60.0));
        agg.add(call("roleplay", "a1", "rep-1", T0 + 400 * 24 * HOUR, 80.0));
        assert_eq!(agg.finish(Vec::new()).over_time.bucket, Bucket::Week);
    }

    #[test]
    fn agencies_past_the_line_limit_share_one_line() {
        let mut agg = Aggregator::new();
        for n in 0..12 {
            for _ in 0..(20 - n) {
                agg.add(call("roleplay", &format!("agency-{n:02}"), "rep", T0, 50.0));
            }
        }
        let series = agg.finish(Vec::new()).over_time.series;
        assert_eq!(series.len(), MAX_AGENCY_LINES);
        assert_eq!(series[0].label, "agency-00");
        let last = &series[MAX_AGENCY_LINES - 1];
        assert_eq!(last.label, OTHER_AGENCIES);
        assert_eq!(last.calls, (7..12).map(|n| 20 - n).sum::<u64>());
    }

    #[test]
    fn an_empty_store_has_empty_figures() {
        let figures = Aggregator::new().finish(Vec::new());
        assert_eq!(figures.totals, Totals::default());
        assert!(figures.over_time.starts.is_empty());
        assert!(figures.agents.is_empty() && figures.distribution.is_empty());
    }
}
