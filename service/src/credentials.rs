//! Tenant credentials: the API key (`svc_live_…`, stored only as a SHA-256 hash) and the
//! webhook signing secret (`whsec_…`, stored as the service needs it to sign). Both have a
//! hand-written `Debug` that never prints the value.

use sha2::{Digest, Sha256};

use crate::ids::random_text;

/// Prefix of every API key.
pub const API_KEY_PREFIX: &str = "svc_live_";
/// Prefix of every webhook signing secret.
pub const SIGNING_SECRET_PREFIX: &str = "whsec_";
const SECRET_RANDOM_LEN: usize = 40;

/// A tenant's API key in clear text (only ever held briefly: at issue and per request).
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A new random key (200 bits of entropy).
    pub fn generate() -> Self {
        ApiKey(format!(
            "{API_KEY_PREFIX}{}",
            random_text(SECRET_RANDOM_LEN)
        ))
    }

    /// Wraps a presented credential.
    pub fn from_presented(text: &str) -> Self {
        ApiKey(text.to_owned())
    }

    /// The key itself, to show the operator once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The stored form: lowercase hex SHA-256 of the key. A high-entropy key needs no
    /// slow hash; the database never holds the key itself.
    pub fn hash(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// A tenant's webhook signing secret.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(String);

impl SigningSecret {
    /// A new random secret (200 bits of entropy).
    pub fn generate() -> Self {
        SigningSecret(format!(
            "{SIGNING_SECRET_PREFIX}{}",
            random_text(SECRET_RANDOM_LEN)
        ))
    }

    /// Wraps a stored secret.
    pub fn from_stored(text: String) -> Self {
        SigningSecret(text)
    }

    /// The secret itself (to sign, or to show the operator once).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_have_their_prefixes_and_debug_hides_them() {
        let key = ApiKey::generate();
        let secret = SigningSecret::generate();
        assert!(key.expose().starts_with("svc_live_"));
        assert!(secret.expose().starts_with("whsec_"));
        assert!(!format!("{key:?}{secret:?}").contains("svc_live_"));
        assert!(!format!("{secret:?}").contains("whsec_"));
    }

    #[test]
    fn the_stored_hash_is_stable_and_not_the_key() {
        let key = ApiKey::from_presented("svc_live_abc");
        assert_eq!(key.hash(), ApiKey::from_presented("svc_live_abc").hash());
        assert_eq!(key.hash().len(), 64);
        assert!(!key.hash().contains("abc"));
    }
}
