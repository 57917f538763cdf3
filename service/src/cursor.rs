//! Opaque pagination cursors that the service recognises as its own.
//!
//! A cursor is `base64url(position) "." base64url(tag)` where the tag is an HMAC-SHA256
//! (truncated to 16 bytes) over the endpoint name, the tenant id, a fingerprint of the
//! query's filters and the position. The key lives in the database. A cursor from another
//! endpoint, another tenant, another filter set, or one that was altered fails the check
//! and is `400 INVALID_REQUEST`. Any endpoint can reuse the codec with its own name and an
//! endpoint-specific position string.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::ApiError;

const TAG_LEN: usize = 16;
const MAX_CURSOR_LEN: usize = 1024;

/// What a cursor is bound to.
#[derive(Clone, Copy, Debug)]
pub struct CursorScope<'a> {
    /// Endpoint name, e.g. `"GET /agents"`.
    pub endpoint: &'a str,
    /// The tenant the page belongs to.
    pub tenant_id: &'a str,
    /// A canonical rendering of the query's filters (excluding `limit` and `cursor`).
    pub filters: &'a str,
}

/// Encodes and checks cursors with the service's key.
#[derive(Clone)]
pub struct CursorCodec {
    key: std::sync::Arc<[u8]>,
}

impl std::fmt::Debug for CursorCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorCodec { key: [redacted] }")
    }
}

impl CursorCodec {
    /// A codec keyed with `key`.
    pub fn new(key: Vec<u8>) -> Self {
        CursorCodec { key: key.into() }
    }

    fn mac(&self, scope: CursorScope<'_>, position: &str) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC accepts keys of any length");
        for part in [scope.endpoint, scope.tenant_id, scope.filters, position] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac
    }

    fn tag(&self, scope: CursorScope<'_>, position: &str) -> Vec<u8> {
        let full = self.mac(scope, position).finalize().into_bytes();
        full[..TAG_LEN].to_vec()
    }

    /// A cursor for `position` within `scope`.
    pub fn encode(&self, scope: CursorScope<'_>, position: &str) -> String {
        let tag = self.tag(scope, position);
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(position.as_bytes()),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// The position inside `cursor`, if this service issued it for `scope`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for anything else.
    pub fn decode(&self, scope: CursorScope<'_>, cursor: &str) -> Result<String, ApiError> {
        let invalid = || ApiError::invalid("cursor is not valid for this request");
        if cursor.len() > MAX_CURSOR_LEN {
            return Err(invalid());
        }
        let (position, tag) = cursor.split_once('.').ok_or_else(invalid)?;
        let position = URL_SAFE_NO_PAD.decode(position).map_err(|_| invalid())?;
        let position = String::from_utf8(position).map_err(|_| invalid())?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| invalid())?;
        if tag.len() != TAG_LEN {
            return Err(invalid());
        }
        // Constant-time comparison of the truncated tag.
        self.mac(scope, &position)
            .verify_truncated_left(&tag)
            .map_err(|_| invalid())?;
        Ok(position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope<'a>(endpoint: &'a str, tenant_id: &'a str) -> CursorScope<'a> {
        CursorScope {
            endpoint,
            tenant_id,
            filters: "",
        }
    }

    #[test]
    fn a_cursor_round_trips_within_its_scope() {
        let codec = CursorCodec::new(vec![7; 32]);
        let cursor = codec.encode(scope("GET /agents", "ten_a"), "42");
        assert_eq!(
            codec.decode(scope("GET /agents", "ten_a"), &cursor).ok(),
            Some("42".to_owned())
        );
    }

    #[test]
    fn a_cursor_is_rejected_elsewhere_or_when_altered() {
        let codec = CursorCodec::new(vec![7; 32]);
        let cursor = codec.encode(scope("GET /agents", "ten_a"), "42");
        assert!(codec.decode(scope("GET /calls", "ten_a"), &cursor).is_err());
        assert!(
            codec
                .decode(scope("GET /agents", "ten_b"), &cursor)
                .is_err()
        );
        let forged = codec.encode(scope("GET /agents", "ten_a"), "43");
        let (_, tag) = forged.split_once('.').unwrap_or_default();
        let (position, _) = cursor.split_once('.').unwrap_or_default();
        assert!(
            codec
                .decode(scope("GET /agents", "ten_a"), &format!("{position}.{tag}"))
                .is_err()
        );
        let other_key = CursorCodec::new(vec![8; 32]);
        assert!(
            other_key
                .decode(scope("GET /agents", "ten_a"), &cursor)
                .is_err()
        );
        assert!(
            codec
                .decode(scope("GET /agents", "ten_a"), "garbage")
                .is_err()
        );
    }
}
