//! Opaque, unguessable identifiers with the contract's prefixes.
//!
//! Each id is a prefix followed by 26 characters drawn from a 32-letter lowercase
//! alphabet using the operating system's random source (130 bits of entropy).

use rand::RngCore;
use rand::rngs::OsRng;

/// Prefix of service agency ids.
pub const AGENCY_PREFIX: &str = "svc_agency_";
/// Prefix of service agent ids.
pub const AGENT_PREFIX: &str = "svc_agent_";
/// Prefix of public call ids.
pub const CALL_PREFIX: &str = "svc_call_";
/// Prefix of SDK session ids.
pub const SESSION_PREFIX: &str = "ext_";
/// Prefix of request ids.
pub const REQUEST_PREFIX: &str = "req_";
/// Prefix of webhook delivery ids.
pub const WEBHOOK_PREFIX: &str = "wh_";
/// Prefix of tenant ids (operator side; not part of the contract).
pub const TENANT_PREFIX: &str = "ten_";
/// Prefixes a tenant id may not begin with (contract section 2, rule 1).
pub const RESERVED_PREFIXES: [&str; 2] = [AGENT_PREFIX, AGENCY_PREFIX];

const ALPHABET: &[u8; 32] = b"abcdefghijkmnpqrstuvwxyz23456789";
const RANDOM_LEN: usize = 26;

/// Random text of `len` characters from the id alphabet (one OS read; each byte's low five
/// bits pick a letter, uniform because the alphabet has exactly 32 letters).
pub fn random_text(len: usize) -> String {
    let mut bytes = vec![0u8; len];
    OsRng.fill_bytes(&mut bytes);
    bytes
        .iter()
        .map(|byte| char::from(ALPHABET[usize::from(byte & 31)]))
        .collect()
}

/// A new id: `prefix` followed by 26 random characters.
pub fn new_id(prefix: &str) -> String {
    let mut id = String::with_capacity(prefix.len() + RANDOM_LEN);
    id.push_str(prefix);
    id.push_str(&random_text(RANDOM_LEN));
    id
}

/// A new service agency id.
pub fn agency_id() -> String {
    new_id(AGENCY_PREFIX)
}

/// A new service agent id.
pub fn agent_id() -> String {
    new_id(AGENT_PREFIX)
}

/// A new public call id.
pub fn call_id() -> String {
    new_id(CALL_PREFIX)
}

/// A new SDK session id.
pub fn session_id() -> String {
    new_id(SESSION_PREFIX)
}

/// A new request id.
pub fn request_id() -> String {
    new_id(REQUEST_PREFIX)
}

/// A new webhook delivery id.
pub fn webhook_id() -> String {
    new_id(WEBHOOK_PREFIX)
}

/// A new tenant id.
pub fn tenant_id() -> String {
    new_id(TENANT_PREFIX)
}

/// Whether `text` starts with a prefix reserved for service ids.
pub fn has_reserved_prefix(text: &str) -> bool {
    RESERVED_PREFIXES
        .iter()
        .any(|prefix| text.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_prefix_and_differ() {
        let a = agent_id();
        let b = agent_id();
        assert!(a.starts_with("svc_agent_") && a.len() == "svc_agent_".len() + 26);
        assert_ne!(a, b);
        assert!(call_id().starts_with("svc_call_"));
        assert!(request_id().starts_with("req_"));
        assert!(webhook_id().starts_with("wh_"));
        assert!(session_id().starts_with("ext_"));
    }

    #[test]
    fn reserved_prefixes_are_recognised() {
        assert!(has_reserved_prefix("svc_agent_x"));
        assert!(has_reserved_prefix("svc_agency_x"));
        assert!(!has_reserved_prefix("svc_call_x"));
        assert!(!has_reserved_prefix("agent-1"));
    }
}
