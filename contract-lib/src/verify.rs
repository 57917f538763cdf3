//! The framework-agnostic verifier: raw body bytes + header value + "now" in, a
//! [`VerifiedDelivery`] out; or, in one call, request headers + raw body in, the typed event
//! out ([`verify_request`]). Nothing is parsed as JSON before the signature holds.

use std::time::Duration;

use http::HeaderMap;
use subtle::ConstantTimeEq;

use crate::clock::{Clock, SystemClock};
use crate::delivery::VerifiedDelivery;
use crate::error::{MalformedHeader, MismatchHint, VerifyError};
use crate::event::CallScored;
use crate::secret::{Keyring, SharedKeyring, SigningSecret};
use crate::signature::{SignatureHeader, mac_of};

/// The signature header's name (lowercase, as `http` spells header names).
pub const SIGNATURE_HEADER: &str = "x-service-signature";
/// The idempotency key header's name: the same on the sender's retry.
pub const WEBHOOK_ID_HEADER: &str = "x-service-webhook-id";

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

/// What the integrations answer for a verified delivery whose `event` this version does not
/// know ([`VerifyError::UnknownEvent`]).
///
/// v1 has one event, `call.scored`. A later service version may send others; refusing them (the
/// default) answers 400, the sender retries once, and the event is then gone. A receiver that
/// would rather stay quiet about events it cannot use can acknowledge them: they are answered
/// 200 and logged (warn, with the webhook id and the event name), never stored and never
/// handed to user code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownEvents {
    /// Answer 400 (the default): the delivery counts as failed at the sender.
    #[default]
    Refuse,
    /// Answer 200 and log it; user code never sees it.
    Acknowledge,
}

/// Verifies deliveries against a [`Keyring`].
///
/// ```
/// use svc_contract::{Keyring, SigningSecret, Verifier, sign};
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
    unknown_events: UnknownEvents,
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
            unknown_events: UnknownEvents::default(),
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

    /// Sets what the integrations answer for an event this version does not know (refused
    /// by default; see [`UnknownEvents`]).
    pub fn with_unknown_events(mut self, unknown_events: UnknownEvents) -> Self {
        self.unknown_events = unknown_events;
        self
    }

    /// What the integrations answer for an event this version does not know.
    pub fn unknown_events(&self) -> UnknownEvents {
        self.unknown_events
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
        // The service's form is read by the fast parser, the rest by the general one, and the
        // header is checked where it was parsed: moving it out of a `Result` first was a copy
        // the CPU stalled on (a load waiting on the narrower stores that built it), about 9 ns
        // of the 30 verify took over the pre-keyed HMAC (BENCHMARKS.md).
        match SignatureHeader::parse_canonical(header) {
            Some(parsed) => self.verify_parsed(&parsed, body, now),
            None => self.verify_parsed(&SignatureHeader::parse_general(header)?, body, now),
        }
    }

    /// [`Self::verify`] past the body limit and the header's form.
    #[inline(always)]
    fn verify_parsed<'b>(
        &self,
        parsed: &SignatureHeader<'_>,
        body: &'b [u8],
        now: i64,
    ) -> Result<VerifiedDelivery<'b>, VerifyError> {
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

    /// Verifies a request as it arrived, reading "now" from the system clock, and decodes its
    /// event: the one `X-Service-Signature` header of `headers`, the raw `body` bytes exactly
    /// as received. [`Self::verify_request_at`] takes "now" instead, for tests and replays.
    ///
    /// Deduplicate on the `X-Service-Webhook-Id` header ([`WEBHOOK_ID_HEADER`]) before acting:
    /// the sender's retry carries the same id.
    ///
    /// # Errors
    /// [`VerifyError`] saying why; answer [`VerifyError::http_status`]. A header sent more
    /// than once is [`MalformedHeader::Repeated`].
    pub fn verify_request(
        &self,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<CallScored, VerifyError> {
        self.verify_request_at(headers, body, SystemClock.now())
    }

    /// [`Self::verify_request`] at `now` (unix seconds).
    ///
    /// # Errors
    /// As [`Self::verify_request`].
    pub fn verify_request_at(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<CallScored, VerifyError> {
        self.verify(signature_header(headers)?, body, now)?.decode()
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

/// The value of the one `X-Service-Signature` header of a request.
///
/// # Errors
/// [`VerifyError::MissingHeader`] when there is none, a malformed-header error when there are
/// several.
pub fn signature_header(headers: &HeaderMap) -> Result<&[u8], VerifyError> {
    let mut values = headers.get_all(SIGNATURE_HEADER).iter();
    let header = values.next().ok_or(VerifyError::MissingHeader)?;
    if values.next().is_some() {
        return Err(MalformedHeader::Repeated.into());
    }
    Ok(header.as_bytes())
}

/// Verifies a request with one secret, in one call, reading the clock itself: the one
/// `X-Service-Signature` header of `headers` and the raw `body` bytes exactly as received, then
/// the typed event. What Stripe's `constructEvent` and svix's `verify` do; the verify-only path
/// for any framework that gives you an [`http::HeaderMap`] and the body bytes.
///
/// It builds a [`Verifier`] per call (a few allocations); a receiver handling many deliveries,
/// or rotating secrets, builds one [`Verifier`] and calls [`Verifier::verify_request`].
///
/// ```
/// use svc_contract::{SigningSecret, sign, verify_request};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let secret = SigningSecret::new("whsec_fixture")?;
/// let body = br#"{"event":"call.scored","success":true,"callId":"svc_call_1","source":"roleplay","agentId":"svc_agent_1","agencyId":"svc_agency_1","platformAgentId":null,"platformAgencyId":null,"occurredAt":"2026-01-01T00:00:00Z","requestId":"req_1"}"#;
/// # let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-service-signature", sign("whsec_fixture", now as i64, body).parse()?);
/// let event = verify_request(&secret, &headers, body)?;
/// assert_eq!(event.call_id, "svc_call_1");
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`VerifyError`] saying why; answer [`VerifyError::http_status`].
pub fn verify_request(
    secret: &SigningSecret,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<CallScored, VerifyError> {
    Verifier::new(Keyring::single(secret.clone())).verify_request(headers, body)
}
