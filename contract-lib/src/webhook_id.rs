//! The `X-Service-Webhook-Id` of a delivery: the idempotency key the sender keeps across its
//! retry.

use thiserror::Error;

/// Longest accepted `X-Service-Webhook-Id`, in bytes.
pub const MAX_WEBHOOK_ID_LEN: usize = 256;

/// A validated `X-Service-Webhook-Id`: 1 to 256 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WebhookId(String);

impl WebhookId {
    /// Checks and wraps a header value.
    ///
    /// # Errors
    /// [`InvalidWebhookId`] when empty, too long or not printable ASCII.
    pub fn parse(value: &[u8]) -> Result<Self, InvalidWebhookId> {
        if value.is_empty()
            || value.len() > MAX_WEBHOOK_ID_LEN
            || !value.iter().all(u8::is_ascii_graphic)
        {
            return Err(InvalidWebhookId);
        }
        // All bytes are ASCII, so this is valid UTF-8.
        Ok(Self(String::from_utf8_lossy(value).into_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for WebhookId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An `X-Service-Webhook-Id` that is empty, longer than 256 bytes or not printable ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("X-Service-Webhook-Id must be 1 to {MAX_WEBHOOK_ID_LEN} printable ASCII characters")]
pub struct InvalidWebhookId;
