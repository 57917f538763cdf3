//! The service's notion of "now": the real clock in production, a settable one in tests.
//! Every rule that depends on time (timestamps, token lifetime, retry delays, ceilings)
//! reads it from here so tests control time instead of sleeping.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Duration, Utc};

/// A cheap-to-clone source of the current time.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The system clock.
    #[default]
    System,
    /// A clock that only moves when told to (tests).
    Manual(Arc<Mutex<DateTime<Utc>>>),
    /// The system clock moved by a fixed amount: a sandbox whose clock is skewed from its
    /// clients' (what a tenant's reconcile must survive).
    Offset(Duration),
}

impl Clock {
    /// A manual clock starting at `start`; clones share the same time.
    pub fn manual(start: DateTime<Utc>) -> Self {
        Clock::Manual(Arc::new(Mutex::new(start)))
    }

    /// The current time.
    pub fn now(&self) -> DateTime<Utc> {
        match self {
            Clock::System => Utc::now(),
            Clock::Offset(by) => Utc::now() + *by,
            Clock::Manual(at) => *at.lock().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Sets a manual clock to `at`; the system clock ignores it.
    pub fn set(&self, at: DateTime<Utc>) {
        if let Clock::Manual(current) = self {
            *current.lock().unwrap_or_else(PoisonError::into_inner) = at;
        }
    }

    /// Moves a manual clock forward by `by`; the system clock ignores it.
    pub fn advance(&self, by: Duration) {
        if let Clock::Manual(current) = self {
            let mut guard = current.lock().unwrap_or_else(PoisonError::into_inner);
            *guard += by;
        }
    }
}
