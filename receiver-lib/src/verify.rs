//! The framework-agnostic verifier: raw body bytes + header value + "now" in, a
//! [`VerifiedDelivery`] out. Nothing is parsed as JSON before the signature holds.

use std::time::Duration;

use subtle::ConstantTimeEq;

use crate::error::{MismatchHint, VerifyError};
use crate::event::{CALL_SCORED, CallScored, CallSource, FailureReason};
use crate::secret::{Keyring, SharedKeyring};
use crate::signature::{SignatureHeader, mac_of};

/// The default timestamp tolerance: 5 minutes either way (contract section 6).
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);
/// The default body size limit. A `call.scored` body is under 1 KiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024;

/// How far the signed timestamp may be from "now", symmetrically.
///
/// Disabling the check is an explicit [`Tolerance::Disabled`], never a zero: a zero-second
/// window is a (useless) window, not "off". Disable only to debug an old captured delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tolerance {
    /// Reject a timestamp further than this from now, in either direction.
    Window(Duration),
    /// Accept any timestamp. Replay protection then rests on deduplication alone.
    Disabled,
}

impl Default for Tolerance {
    fn default() -> Self {
        Self::Window(DEFAULT_TOLERANCE)
    }
}

/// Verifies deliveries against a [`Keyring`].
///
/// ```
/// use svc_receiver::{Keyring, SigningSecret, Verifier, sign};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let verifier = Verifier::new(Keyring::single(SigningSecret::new("whsec_fixture")?));
/// let body = br#"{"event":"call.scored"}"#;
/// let header = sign("whsec_fixture", 1_767_225_600, body);
/// let delivery = verifier.verify(header.as_bytes(), body, 1_767_225_630)?;
/// assert_eq!(delivery.key(), "current");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Verifier {
    keys: Keys,
    tolerance: Tolerance,
    max_body_bytes: usize,
}

/// Where a verifier's keys come from.
#[derive(Debug, Clone)]
enum Keys {
    Fixed(Keyring),
    Shared(SharedKeyring),
}

impl Verifier {
    /// A verifier with the default tolerance (5 minutes) and body limit (64 KiB).
    pub fn new(keyring: Keyring) -> Self {
        Self::with_keys(Keys::Fixed(keyring))
    }

    /// A verifier reading its keys from `keyring` at every verification, so that replacing it
    /// takes effect at once (a secret rotation without a restart: see [`SharedKeyring`]).
    pub fn with_shared_keyring(keyring: SharedKeyring) -> Self {
        Self::with_keys(Keys::Shared(keyring))
    }

    fn with_keys(keys: Keys) -> Self {
        Self {
            keys,
            tolerance: Tolerance::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// Sets the timestamp tolerance.
    pub fn with_tolerance(mut self, tolerance: Tolerance) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// Sets the largest accepted body, in bytes.
    pub fn with_max_body_bytes(mut self, limit: usize) -> Self {
        self.max_body_bytes = limit;
        self
    }

    /// The tolerance in force.
    pub fn tolerance(&self) -> Tolerance {
        self.tolerance
    }

    /// The body limit in force, in bytes.
    pub fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    /// Verifies one delivery at `now` (unix seconds): body size, header form, timestamp
    /// tolerance, then HMAC over `<t>.<body>` compared in constant time against every `v1`
    /// value with every active key.
    ///
    /// # Errors
    /// [`VerifyError`] saying why (see its variants); never panics on any input.
    pub fn verify<'b>(
        &self,
        header: &[u8],
        body: &'b [u8],
        now: i64,
    ) -> Result<VerifiedDelivery<'b>, VerifyError> {
        if body.len() > self.max_body_bytes {
            return Err(VerifyError::BodyTooLarge {
                limit: self.max_body_bytes,
            });
        }
        let parsed = SignatureHeader::parse(header)?;
        self.check_timestamp(parsed.timestamp(), now)?;
        let shared;
        let keyring = match &self.keys {
            Keys::Fixed(keyring) => keyring,
            Keys::Shared(keys) => {
                shared = keys.current();
                &*shared
            }
        };
        let mut expired_match = None;
        for (label, secret, active) in keyring.keys_at(now) {
            let expected = mac_of(secret.keyed(), parsed.timestamp_text(), body);
            // Each comparison is constant-time; which of several values matched need not be
            // hidden (the outcome is told anyway), so the search may stop at the first.
            let matched = parsed
                .signatures()
                .iter()
                .any(|sig| bool::from(equal(&expected, sig)));
            if matched {
                if active {
                    return Ok(VerifiedDelivery {
                        body,
                        timestamp: parsed.timestamp(),
                        key: std::sync::Arc::clone(label),
                        signature: expected,
                    });
                }
                expired_match.get_or_insert_with(|| label.to_string());
            }
        }
        let hint = match expired_match {
            Some(key) => MismatchHint::ExpiredKey { key },
            None => mismatch_hint(body),
        };
        Err(VerifyError::NoMatchingSignature { hint })
    }

    fn check_timestamp(&self, timestamp: i64, now: i64) -> Result<(), VerifyError> {
        let Tolerance::Window(window) = self.tolerance else {
            return Ok(());
        };
        let tolerance_secs = window.as_secs();
        // Both are bounded well inside i64 (t has at most 12 digits), but stay total anyway.
        let skew = i128::from(now) - i128::from(timestamp);
        let skew_secs = u64::try_from(skew.unsigned_abs()).unwrap_or(u64::MAX);
        if skew_secs <= tolerance_secs {
            Ok(())
        } else if skew > 0 {
            Err(VerifyError::TimestampTooOld {
                skew_secs,
                tolerance_secs,
            })
        } else {
            Err(VerifyError::TimestampInFuture {
                skew_secs,
                tolerance_secs,
            })
        }
    }
}

/// Whether two MACs are equal, in constant time: the words' differences are OR-ed together
/// with no early exit, and only that one word goes through `subtle`'s optimisation barrier
/// (one barrier per call rather than one per byte or word).
fn equal(a: &[u8; 32], b: &[u8; 32]) -> subtle::Choice {
    let difference = a
        .chunks_exact(8)
        .zip(b.chunks_exact(8))
        .fold(0u64, |acc, (x, y)| acc | (word(x) ^ word(y)));
    difference.ct_eq(&0)
}

/// Eight bytes as a word (`chunks_exact(8)` always hands over eight).
fn word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

fn mismatch_hint(body: &[u8]) -> MismatchHint {
    if body.last() == Some(&b'\n') {
        MismatchHint::TrailingNewline
    } else if body.windows(2).any(|w| w == b"\n " || w == b": ") {
        MismatchHint::BodyLooksReserialised
    } else {
        MismatchHint::CheckSecretAndRawBody
    }
}

/// A delivery whose signature holds. The only way to get a typed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedDelivery<'b> {
    body: &'b [u8],
    timestamp: i64,
    key: std::sync::Arc<str>,
    signature: [u8; 32],
}

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
    /// [`VerifyError::InvalidEvent`] when the body is not a `call.scored` object, its `event`
    /// included: v1 sends no other, and an event this version does not know is refused (the
    /// integrations answer 400) rather than read as a `call.scored`.
    pub fn decode(&self) -> Result<CallScored, VerifyError> {
        let event: CallScored =
            serde_json::from_slice(self.body).map_err(|err| VerifyError::InvalidEvent {
                reason: err.to_string(),
            })?;
        if event.event != CALL_SCORED {
            let named: String = event.event.chars().take(64).collect();
            return Err(VerifyError::InvalidEvent {
                reason: format!("the event is {:?}, not {CALL_SCORED}", named),
            });
        }
        if let Some(FailureReason::Other(code)) = &event.reason {
            tracing::warn!(call_id = %event.call_id, reason = %code, "unknown call.scored reason code");
        }
        if let CallSource::Other(source) = &event.source {
            tracing::warn!(call_id = %event.call_id, source = %source, "unknown call.scored source");
        }
        Ok(event)
    }
}
