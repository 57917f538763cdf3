//! Which part of `GET /calls` a run lists for one source, from the stored watermark, the
//! overlap, the command line's `--since`/`--until` and, for real calls, the refresh span.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::time::before;
use svc_client::CallSource;

/// How far back a practice-call window reaches before the watermark by default. A practice
/// call is listed once scored, which the contract expects within minutes of its end (its
/// missed-delivery fallback reads the call 30 minutes after the end), and it is listed by its
/// `endedAt`: a call that ended before the last run but was scored after it sits behind the
/// watermark. Two hours covers four times that fallback.
pub const DEFAULT_OVERLAP_ROLEPLAY: Duration = Duration::from_secs(2 * 3_600);

/// How far back a real-call window reaches before the watermark by default. Real calls are
/// listed by `startedAt` and are ingested from the dialer, scored and persisted long after
/// they started; a day is the contract's safe margin. The refresh span (30 days by default)
/// usually reaches further back anyway.
pub const DEFAULT_OVERLAP_REAL: Duration = Duration::from_secs(24 * 3_600);

/// How far back a source's first run lists when `--since` is not given: the 30 days of the
/// contract's recording retention. Pass `--since` for older history.
pub const DEFAULT_FIRST_RUN: Duration = Duration::from_secs(30 * 86_400);

/// How far back real calls are listed again to find re-dispositions: 30 days, the contract's
/// recording retention.
pub const DEFAULT_REFRESH_REAL: Duration = Duration::from_secs(30 * 86_400);

/// The default overlap of a source.
pub fn default_overlap(source: &CallSource) -> Duration {
    match source {
        CallSource::RealCall => DEFAULT_OVERLAP_REAL,
        _ => DEFAULT_OVERLAP_ROLEPLAY,
    }
}

/// The inclusive bounds a run lists one source in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// `from`.
    pub from: DateTime<Utc>,
    /// `to`.
    pub to: DateTime<Utc>,
    /// Whether, once every page is stored, the watermark may move to [`Window::watermark`]:
    /// the window starts at or before the watermark (or there is none yet), so no gap is left
    /// behind it.
    pub advances: bool,
    /// Where the watermark moves: `to`, but never past the run's start, as nothing later can
    /// have been listed yet (an `--until` in the future would otherwise make later runs skip
    /// what is scored until then).
    pub watermark: DateTime<Utc>,
}

/// What a window is computed from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WindowInputs<'a> {
    /// The source.
    pub source: &'a CallSource,
    /// The stored watermark.
    pub watermark: Option<DateTime<Utc>>,
    /// When the run started.
    pub run_start: DateTime<Utc>,
    /// `--since`.
    pub since: Option<DateTime<Utc>>,
    /// `--until`.
    pub until: Option<DateTime<Utc>>,
    /// `--overlap`, else the source's default.
    pub overlap: Option<Duration>,
    /// `--refresh-real` (zero: off).
    pub refresh_real: Duration,
}

impl Window {
    /// The window of one source:
    /// - `to`: `--until`, else the run's start;
    /// - `from`: `--since`, else the watermark minus the overlap, else (first run) 30 days
    ///   before `to`;
    /// - real calls: `from` reaches back at least `--refresh-real` before `to`, so that
    ///   re-dispositioned calls are listed again.
    ///
    /// `from` never passes `to`.
    pub(crate) fn of(inputs: &WindowInputs<'_>) -> Self {
        let to = inputs.until.unwrap_or(inputs.run_start);
        let overlap = inputs
            .overlap
            .unwrap_or_else(|| default_overlap(inputs.source));
        let mut from = match (inputs.since, inputs.watermark) {
            (Some(since), _) => since,
            (None, Some(watermark)) => before(watermark, overlap),
            (None, None) => before(to, DEFAULT_FIRST_RUN),
        };
        if *inputs.source == CallSource::RealCall && !inputs.refresh_real.is_zero() {
            from = from.min(before(to, inputs.refresh_real));
        }
        let from = from.min(to);
        let next = to.min(inputs.run_start);
        let advances = inputs
            .watermark
            .is_none_or(|watermark| from <= watermark && next > watermark);
        Self {
            from,
            to,
            advances,
            watermark: next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_ts;

    fn at(text: &str) -> DateTime<Utc> {
        parse_ts(text).expect("timestamp")
    }

    fn inputs<'a>(source: &'a CallSource, watermark: Option<&str>) -> WindowInputs<'a> {
        WindowInputs {
            source,
            watermark: watermark.map(at),
            run_start: at("2026-03-10T12:00:00Z"),
            since: None,
            until: None,
            overlap: None,
            refresh_real: DEFAULT_REFRESH_REAL,
        }
    }

    #[test]
    fn an_until_in_the_future_moves_the_watermark_no_further_than_the_run_s_start() {
        let mut first = inputs(&CallSource::Roleplay, Some("2026-03-10T11:00:00Z"));
        first.until = Some(at("2026-03-11T12:00:00Z"));
        let window = Window::of(&first);
        assert_eq!(window.to, at("2026-03-11T12:00:00Z"), "lists up to --until");
        assert!(window.advances);
        assert_eq!(window.watermark, first.run_start);
        // The next run starts from there, so what is scored meanwhile is listed.
        let mut later = inputs(&CallSource::Roleplay, Some("2026-03-10T12:00:00Z"));
        later.run_start = at("2026-03-11T12:30:00Z");
        assert!(Window::of(&later).from <= first.run_start);
        // A window wholly in the future leaves the watermark where it is.
        let mut ahead = inputs(&CallSource::Roleplay, Some("2026-03-10T12:00:00Z"));
        ahead.since = Some(at("2026-03-10T11:00:00Z"));
        ahead.until = Some(at("2026-03-12T00:00:00Z"));
        ahead.run_start = at("2026-03-10T12:00:00Z");
        assert!(!Window::of(&ahead).advances);
    }

    #[test]
    fn a_practice_window_reaches_back_the_overlap_before_the_watermark() {
        let window = Window::of(&inputs(&CallSource::Roleplay, Some("2026-03-10T11:00:00Z")));
        assert_eq!(window.from, at("2026-03-10T09:00:00Z"));
        assert_eq!(window.to, at("2026-03-10T12:00:00Z"));
        assert!(window.advances);
    }

    #[test]
    fn a_first_run_reads_thirty_days_unless_since_says_otherwise() {
        let window = Window::of(&inputs(&CallSource::Roleplay, None));
        assert_eq!(window.from, at("2026-02-08T12:00:00Z"));
        let mut with_since = inputs(&CallSource::Roleplay, None);
        with_since.since = Some(at("2025-01-01T00:00:00Z"));
        assert_eq!(Window::of(&with_since).from, at("2025-01-01T00:00:00Z"));
    }

    #[test]
    fn real_calls_are_listed_back_the_refresh_span_and_the_overlap_at_least() {
        let source = CallSource::RealCall;
        let window = Window::of(&inputs(&source, Some("2026-03-10T11:00:00Z")));
        assert_eq!(
            window.from,
            at("2026-02-08T12:00:00Z"),
            "30 days of refresh"
        );
        let mut no_refresh = inputs(&source, Some("2026-03-10T11:00:00Z"));
        no_refresh.refresh_real = Duration::ZERO;
        assert_eq!(
            Window::of(&no_refresh).from,
            at("2026-03-09T11:00:00Z"),
            "a day of overlap"
        );
    }

    #[test]
    fn a_window_that_leaves_a_gap_after_the_watermark_does_not_advance_it() {
        let mut gap = inputs(&CallSource::Roleplay, Some("2026-03-01T00:00:00Z"));
        gap.since = Some(at("2026-03-05T00:00:00Z"));
        assert!(!Window::of(&gap).advances);
        let mut backfill = inputs(&CallSource::Roleplay, Some("2026-03-01T00:00:00Z"));
        backfill.since = Some(at("2026-01-01T00:00:00Z"));
        backfill.until = Some(at("2026-02-01T00:00:00Z"));
        assert!(!Window::of(&backfill).advances, "ends before the watermark");
    }
}
