//! A delivery whose signature holds, and decoding it into the typed event.

use std::borrow::Cow;

use crate::error::VerifyError;
use crate::event::{CALL_SCORED, CallScored, CallSource, FailureReason};

/// A delivery whose signature holds. The only way to get a typed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedDelivery<'b> {
    pub(crate) body: &'b [u8],
    pub(crate) timestamp: i64,
    pub(crate) key: std::sync::Arc<str>,
    pub(crate) signature: [u8; 32],
}

/// Longest `event` value kept in [`VerifyError::UnknownEvent`], in characters.
const MAX_EVENT_NAME: usize = 64;

impl<'b> VerifiedDelivery<'b> {
    /// The raw verified body.
    pub fn body(&self) -> &'b [u8] {
        self.body
    }

    /// The signed timestamp, unix seconds.
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }

    /// The label of the keyring key that matched.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The signature that matched (HMAC of `<t>.<body>`); what replay protection remembers.
    pub fn signature(&self) -> &[u8; 32] {
        &self.signature
    }

    /// Decodes the verified body into the typed event. Unknown fields are ignored; unknown
    /// `source` and `reason` values are kept, and logged (`tracing` warn) as the contract asks.
    ///
    /// # Errors
    /// - [`VerifyError::UnknownEvent`] when the body is a JSON object whose `event` is a string
    ///   other than `call.scored`: v1 sends no other, and an event this version does not know
    ///   is never read as a `call.scored` (see [`crate::UnknownEvents`] for what the
    ///   integrations answer then);
    /// - [`VerifyError::InvalidEvent`] when the body is not a `call.scored` object otherwise.
    pub fn decode(&self) -> Result<CallScored, VerifyError> {
        let event = match serde_json::from_slice::<CallScored>(self.body) {
            Ok(event) if event.event == CALL_SCORED => event,
            Ok(event) => return Err(unknown_event(&event.event)),
            Err(err) => {
                // Another kind of event has other fields: name it rather than a missing field.
                return Err(match event_name(self.body) {
                    Some(name) if name != CALL_SCORED => unknown_event(&name),
                    _ => VerifyError::InvalidEvent {
                        reason: err.to_string(),
                    },
                });
            }
        };
        if let Some(FailureReason::Other(code)) = &event.reason {
            tracing::warn!(call_id = %event.call_id, reason = %code, "unknown call.scored reason code");
        }
        if let CallSource::Other(source) = &event.source {
            tracing::warn!(call_id = %event.call_id, source = %source, "unknown call.scored source");
        }
        Ok(event)
    }
}

fn unknown_event(name: &str) -> VerifyError {
    VerifyError::UnknownEvent {
        event: name.chars().take(MAX_EVENT_NAME).collect(),
    }
}

/// The `event` string of a JSON object, whatever its other fields.
fn event_name(body: &[u8]) -> Option<Cow<'_, str>> {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        event: Cow<'a, str>,
    }
    serde_json::from_slice::<Kind<'_>>(body)
        .ok()
        .map(|kind| kind.event)
}
