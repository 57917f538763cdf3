//! The first refusal of the API key during an import. A 401 or 403 means no later request can
//! succeed with that key, so once one is seen nothing more is sent; the refusal is kept to end
//! the import with (exit 4).

use std::sync::{Mutex, MutexGuard, PoisonError};

use svc_client::{ClientError, ErrorClass};

/// Shared by every task of one import.
#[derive(Debug, Default)]
pub(super) struct Refusal(Mutex<Option<ClientError>>);

impl Refusal {
    /// Whether the key has been refused: nothing more should be sent.
    pub(super) fn happened(&self) -> bool {
        self.lock().is_some()
    }

    /// Keeps `error` when it is the first authentication or authorisation error; any other
    /// error is the caller's to report.
    pub(super) fn note(&self, error: ClientError) {
        if error.class() == ErrorClass::Auth {
            self.lock().get_or_insert(error);
        }
    }

    /// Takes the first refusal, if there was one.
    pub(super) fn take(&self) -> Option<ClientError> {
        self.lock().take()
    }

    fn lock(&self) -> MutexGuard<'_, Option<ClientError>> {
        // A poisoned lock only means another task panicked; the value is still usable.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
