//! Bounded logging of a failure that repeats: a store on a full disk fails every checkpoint
//! and every poll until space returns, and a line per attempt would flood the log (and fill
//! the very disk that is full when the log is on it). The first failure of a streak is
//! logged, then at most one line per period (a minute) saying how many were left out, and
//! one line when the failures stop.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a failure that keeps repeating is logged again by default.
pub(crate) const REPEAT_EVERY: Duration = Duration::from_secs(60);

/// The state of one kind of failure; shared by the loops that meet it (behind a mutex, taken
/// only to log a failure or the end of one).
#[derive(Debug)]
pub(crate) struct Throttle {
    every: Duration,
    state: Mutex<Streak>,
}

#[derive(Debug, Default)]
struct Streak {
    /// When the last line of the streak was logged; `None` outside a streak.
    logged_at: Option<Instant>,
    /// Failures not logged since then.
    left_out: u64,
}

/// What to do about one failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Say {
    /// Log it, with how many failures were left out since the last line.
    Log {
        /// Failures not logged since the last line.
        left_out: u64,
    },
    /// Leave it out.
    Quiet,
}

impl Throttle {
    /// Logs a repeating failure at most once per `every`.
    pub(crate) fn new(every: Duration) -> Self {
        Self {
            every,
            state: Mutex::default(),
        }
    }

    fn streak(&self) -> std::sync::MutexGuard<'_, Streak> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A failure at `now`: whether to log it.
    pub(crate) fn failed(&self, now: Instant) -> Say {
        let mut streak = self.streak();
        match streak.logged_at {
            Some(at) if now.saturating_duration_since(at) < self.every => {
                streak.left_out += 1;
                Say::Quiet
            }
            _ => {
                let left_out = std::mem::take(&mut streak.left_out);
                streak.logged_at = Some(now);
                Say::Log { left_out }
            }
        }
    }

    /// A success: `true` when it ends a streak of failures (log that they stopped).
    pub(crate) fn succeeded(&self) -> bool {
        let mut streak = self.streak();
        let ended = streak.logged_at.is_some();
        *streak = Streak::default();
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeating_failure_is_said_once_per_period_with_how_many_were_left_out() {
        let throttle = Throttle::new(Duration::from_secs(60));
        let start = Instant::now();
        let at = |secs| start + Duration::from_secs(secs);
        assert_eq!(throttle.failed(at(0)), Say::Log { left_out: 0 });
        for secs in 1..60 {
            assert_eq!(throttle.failed(at(secs)), Say::Quiet);
        }
        assert_eq!(throttle.failed(at(60)), Say::Log { left_out: 59 });
        assert_eq!(throttle.failed(at(61)), Say::Quiet);
        assert!(throttle.succeeded(), "the streak ends");
        assert!(!throttle.succeeded(), "once");
        assert_eq!(
            throttle.failed(at(62)),
            Say::Log { left_out: 0 },
            "a new streak is said at once"
        );
    }
}
