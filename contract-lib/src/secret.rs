//! Signing secrets and the keyring of secrets a receiver accepts (current and, for a while after
//! a rotation, previous ones). Secrets never appear in `Debug`, `Display` or errors.

use thiserror::Error;

use crate::signature::{HmacSha256, keyed};

/// The prefix of every signing secret the service issues.
pub const SECRET_PREFIX: &str = "whsec_";

/// Why a string is not a usable signing secret. The secret itself is never included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The value does not start with `whsec_`.
    #[error("a signing secret starts with 'whsec_'")]
    MissingPrefix,
    /// Nothing after `whsec_`.
    #[error("the signing secret is empty after 'whsec_'")]
    Empty,
    /// Whitespace somewhere (often a trailing newline from a file or an env var).
    #[error("the signing secret contains whitespace; copy it whole, without spaces or newlines")]
    Whitespace,
    /// The documentation's placeholder `whsec_…` (its ellipsis, U+2026), not a secret.
    #[error(
        "the signing secret holds '…' (U+2026): that is the documentation's placeholder whsec_…, \
         not a secret; use the secret the service (or `svc-cli sandbox`) handed over"
    )]
    Placeholder,
    /// A character outside printable ASCII: the service issues `whsec_` and ASCII letters and
    /// digits, so the secret was mangled on its way.
    #[error(
        "the signing secret holds a character that is not printable ASCII: a signing secret is \
         whsec_ followed by ASCII letters and digits; copy it again whole"
    )]
    NotPrintableAscii,
}

/// A `whsec_…` signing secret, kept with its keyed HMAC state so verifying does not re-key.
///
/// The HMAC key is the whole string exactly as issued, prefix included.
#[derive(Clone)]
pub struct SigningSecret {
    keyed: HmacSha256,
}

impl SigningSecret {
    /// Checks the form (no whitespace, then `whsec_` and at least one character) and keeps it.
    ///
    /// Whitespace is checked first: a secret pasted with a leading space or newline is reported
    /// as such, not as lacking its prefix.
    ///
    /// # Errors
    /// [`SecretError`] naming the problem, never the secret.
    pub fn new(secret: &str) -> Result<Self, SecretError> {
        if secret.chars().any(char::is_whitespace) {
            return Err(SecretError::Whitespace);
        }
        if secret.contains('\u{2026}') {
            return Err(SecretError::Placeholder);
        }
        if !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(SecretError::NotPrintableAscii);
        }
        let rest = secret
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SecretError::MissingPrefix)?;
        if rest.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(Self {
            keyed: keyed(secret.as_bytes()),
        })
    }

    /// Signs `body` at `timestamp` (unix seconds) as the service signs a delivery: the full
    /// `X-Service-Signature` value, as [`crate::sign`] gives from the secret's text.
    ///
    /// ```
    /// use svc_contract::{SigningSecret, sign};
    /// # fn main() -> Result<(), svc_contract::SecretError> {
    /// let secret = SigningSecret::new("whsec_fixture")?;
    /// assert_eq!(secret.sign(1_767_225_600, b"{}"), sign("whsec_fixture", 1_767_225_600, b"{}"));
    /// # Ok(()) }
    /// ```
    pub fn sign(&self, timestamp: i64, body: &[u8]) -> String {
        crate::signature::sign_keyed(&self.keyed, timestamp, body)
    }

    pub(crate) fn keyed(&self) -> &HmacSha256 {
        &self.keyed
    }

    /// An HMAC of a fixed text under this secret: tells two secrets apart (a secret file
    /// reloaded with the same secret, say) without keeping or showing either.
    pub fn fingerprint(&self) -> [u8; 32] {
        crate::signature::mac_of(&self.keyed, b"0", b"svc-receiver secret fingerprint")
    }
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret([redacted])")
    }
}

/// One secret in a [`Keyring`], with a label reported when it matches and an optional expiry.
#[derive(Clone)]
struct KeyEntry {
    label: std::sync::Arc<str>,
    secret: SigningSecret,
    /// Unix seconds after which the key no longer verifies anything.
    expires_at: Option<i64>,
}

/// The secrets a receiver accepts.
///
/// The service rotates immediately: every later delivery, including a pending retry, uses the
/// new secret. So a running receiver must take the new secret as soon as the operator hands
/// it over, without a restart: build its [`crate::Verifier`] from a [`SharedKeyring`] and
/// [`SharedKeyring::replace`] the keyring then. Deliveries signed with the old secret before
/// the rotation can still be in flight: keep the previous secret with an expiry a few minutes
/// after the rotation. Verification reports which key matched.
///
/// ```
/// use svc_contract::{Keyring, SigningSecret};
/// # fn main() -> Result<(), svc_contract::SecretError> {
/// let keyring = Keyring::new()
///     .with_key("current", SigningSecret::new("whsec_new")?)
///     .with_expiring_key("previous", SigningSecret::new("whsec_old")?, 1_767_229_200);
/// assert_eq!(keyring.len(), 2);
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Keyring {
    keys: Vec<KeyEntry>,
}

impl Keyring {
    /// An empty keyring (verifies nothing until a key is added).
    pub fn new() -> Self {
        Self::default()
    }

    /// A keyring with one key labelled `current` that never expires.
    pub fn single(secret: SigningSecret) -> Self {
        Self::new().with_key("current", secret)
    }

    /// Adds a key that never expires.
    pub fn with_key(mut self, label: impl Into<String>, secret: SigningSecret) -> Self {
        self.keys.push(KeyEntry {
            label: label.into().into(),
            secret,
            expires_at: None,
        });
        self
    }

    /// Adds a key that verifies nothing after `expires_at` (unix seconds, inclusive).
    pub fn with_expiring_key(
        mut self,
        label: impl Into<String>,
        secret: SigningSecret,
        expires_at: i64,
    ) -> Self {
        self.keys.push(KeyEntry {
            label: label.into().into(),
            secret,
            expires_at: Some(expires_at),
        });
        self
    }

    /// How many keys the ring holds, expired or not.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when the ring holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys with whether each is active at `now`.
    pub(crate) fn keys_at(
        &self,
        now: i64,
    ) -> impl Iterator<Item = (&std::sync::Arc<str>, &SigningSecret, bool)> + '_ {
        self.keys.iter().map(move |key| {
            let active = key.expires_at.is_none_or(|at| now <= at);
            (&key.label, &key.secret, active)
        })
    }
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut list = f.debug_list();
        for key in &self.keys {
            list.entry(&format_args!(
                "{} (expires_at: {:?}, secret: [redacted])",
                key.label, key.expires_at
            ));
        }
        list.finish()
    }
}

/// A [`Keyring`] that can be replaced while verifiers use it, for a secret rotation without a
/// restart. Cheap to clone: every clone, and every [`crate::Verifier`] built from one, sees a
/// replacement at its next verification.
///
/// ```
/// use svc_contract::{Keyring, SharedKeyring, SigningSecret, Verifier, sign};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let keys = SharedKeyring::new(Keyring::single(SigningSecret::new("whsec_old")?));
/// let verifier = Verifier::with_shared_keyring(keys.clone());
/// // The operator rotated the secret: accept the new one at once, the old one a while longer.
/// keys.replace(
///     Keyring::new()
///         .with_key("current", SigningSecret::new("whsec_new")?)
///         .with_expiring_key("previous", SigningSecret::new("whsec_old")?, 1_767_226_200),
/// );
/// let body = br#"{"event":"call.scored"}"#;
/// let header = sign("whsec_new", 1_767_225_600, body);
/// assert_eq!(verifier.verify(header.as_bytes(), body, 1_767_225_600)?.key(), "current");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SharedKeyring {
    current: std::sync::Arc<std::sync::RwLock<std::sync::Arc<Keyring>>>,
}

impl SharedKeyring {
    /// Shares `keyring`.
    pub fn new(keyring: Keyring) -> Self {
        Self {
            current: std::sync::Arc::new(std::sync::RwLock::new(std::sync::Arc::new(keyring))),
        }
    }

    /// Replaces the keyring; verifications that already started finish with the old one.
    pub fn replace(&self, keyring: Keyring) {
        let keyring = std::sync::Arc::new(keyring);
        // A panic elsewhere cannot leave the Arc half-written, so a poisoned lock is still
        // safe to use.
        let mut current = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *current = keyring;
    }

    /// The keyring in force now.
    pub fn current(&self) -> std::sync::Arc<Keyring> {
        let current = self
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::sync::Arc::clone(&current)
    }
}

impl std::fmt::Debug for SharedKeyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SharedKeyring")
            .field(&self.current())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_documentations_placeholder_and_mangled_secrets_are_refused() {
        assert_eq!(
            SigningSecret::new("whsec_\u{2026}").err(),
            Some(SecretError::Placeholder)
        );
        assert_eq!(
            SigningSecret::new("whsec_s\u{e9}cret").err(),
            Some(SecretError::NotPrintableAscii)
        );
        assert!(SigningSecret::new("whsec_3kX9pQ2vR7mT1wY8zB4nL6cF0hJ5sD").is_ok());
    }

    use super::{SecretError, SigningSecret};

    #[test]
    fn a_secret_pasted_with_surrounding_whitespace_is_reported_as_whitespace() {
        for pasted in [
            " whsec_abc",
            "\nwhsec_abc",
            "\twhsec_abc",
            "whsec_abc\n",
            "whsec_a bc",
        ] {
            assert_eq!(
                SigningSecret::new(pasted).map(drop),
                Err(SecretError::Whitespace),
                "{pasted:?}"
            );
        }
    }
}
