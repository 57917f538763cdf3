//! Why a delivery was rejected, and the one mapping from each reason to an HTTP status.
//!
//! Messages and hints are for the receiver's own logs and operators. The HTTP integrations
//! answer the sender with [`VerifyError::public_message`] only, a fixed text per kind that
//! never echoes hints, skews, key names or anything derived from the secret.

use http::StatusCode;
use thiserror::Error;

/// What was wrong with an `X-Service-Signature` value (see [`crate::signature`] for the policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MalformedHeader {
    /// The value is empty.
    #[error("the header is empty")]
    Empty,
    /// The header was sent more than once (integrations check this; the parser sees one value).
    #[error("the header was sent more than once")]
    Repeated,
    /// The value is longer than allowed.
    #[error("the header is longer than {max} bytes")]
    TooLong {
        /// The limit.
        max: usize,
    },
    /// Whitespace somewhere in the value.
    #[error("the header contains whitespace")]
    Whitespace,
    /// A byte that is not printable ASCII.
    #[error("the header contains a byte that is not printable ASCII")]
    NotPrintableAscii,
    /// `,,`, a leading or a trailing `,`.
    #[error("the header has an empty element")]
    EmptyElement,
    /// An element with no `=`.
    #[error("an element of the header has no '='")]
    ElementWithoutEquals,
    /// An element like `=value`.
    #[error("an element of the header has an empty key")]
    EmptyKey,
    /// No `t=` element.
    #[error("the header has no t= timestamp")]
    MissingTimestamp,
    /// More than one `t=` element.
    #[error("the header has more than one t= timestamp")]
    DuplicateTimestamp,
    /// `t` is empty or has a character other than an ASCII digit.
    #[error("t= must be ASCII digits only")]
    TimestampNotDigits,
    /// `t` has too many digits.
    #[error("t= has more than {max_digits} digits")]
    TimestampTooLong {
        /// The limit.
        max_digits: usize,
    },
    /// No `v1=` element.
    #[error("the header has no v1= signature")]
    MissingSignature,
    /// A `v1` value that is not 64 characters long.
    #[error("a v1= signature has {len} characters, expected 64 hex digits")]
    SignatureWrongLength {
        /// The length found.
        len: usize,
    },
    /// A 64-character `v1` value with a non-hex character.
    #[error("a v1= signature is not hexadecimal")]
    SignatureNotHex,
    /// Too many `v1=` elements.
    #[error("the header has more than {max} v1= signatures")]
    TooManySignatures {
        /// The limit.
        max: usize,
    },
}

/// A likely cause of a signature mismatch, for the receiver's logs. Never sent to the sender.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MismatchHint {
    /// The signature matches a key of the keyring that has expired.
    ExpiredKey {
        /// The label of the expired key.
        key: String,
    },
    /// The body ends with a newline: it was probably rewritten by a proxy or a framework.
    TrailingNewline,
    /// The body looks pretty-printed: it was probably parsed and re-serialised before verifying.
    BodyLooksReserialised,
    /// Nothing specific: check the secret and that the raw body is used.
    CheckSecretAndRawBody,
}

impl std::fmt::Display for MismatchHint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ExpiredKey { key } => write!(
                f,
                "it matches key '{key}', which has expired; extend its expiry if the sender still uses it"
            ),
            Self::TrailingNewline => f.write_str(
                "the body ends with a newline; verify the raw bytes exactly as received",
            ),
            Self::BodyLooksReserialised => f.write_str(
                "the body looks re-serialised (pretty-printed); verify the raw bytes before any JSON parse",
            ),
            Self::CheckSecretAndRawBody => f.write_str(
                "check the secret is this endpoint's current whsec_ string, copied whole with no \
                 surrounding whitespace, and that the raw body bytes are verified",
            ),
        }
    }
}

/// Why a delivery failed verification or decoding.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// No `X-Service-Signature` header.
    #[error("missing X-Service-Signature header")]
    MissingHeader,
    /// The header is present but not well formed. The message includes what was wrong, so
    /// it is not repeated as the error's `source`.
    #[error("malformed X-Service-Signature header: {0}")]
    MalformedHeader(MalformedHeader),
    /// The signed timestamp is older than the tolerance allows.
    #[error("signature timestamp is {skew_secs} s old, beyond the {tolerance_secs} s tolerance")]
    TimestampTooOld {
        /// How far in the past `t` is, in seconds.
        skew_secs: u64,
        /// The tolerance applied.
        tolerance_secs: u64,
    },
    /// The signed timestamp is further in the future than the tolerance allows.
    #[error(
        "signature timestamp is {skew_secs} s in the future, beyond the {tolerance_secs} s tolerance"
    )]
    TimestampInFuture {
        /// How far in the future `t` is, in seconds.
        skew_secs: u64,
        /// The tolerance applied.
        tolerance_secs: u64,
    },
    /// No `v1` value matches any active key.
    #[error("no signature matches an active signing secret ({hint})")]
    NoMatchingSignature {
        /// A likely cause, for logs only.
        hint: MismatchHint,
    },
    /// The body is larger than the configured limit.
    #[error("body is larger than {limit} bytes")]
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The signature holds but the body is not a `call.scored` event.
    #[error("verified body is not a valid call.scored event: {reason}")]
    InvalidEvent {
        /// What the JSON decoder reported.
        reason: String,
    },
    /// The signature holds and the body is a JSON object, but its `event` is not one this
    /// version knows (v1 sends only `call.scored`). Refused by default, answered 400 so that the
    /// sender's one retry also fails; see [`crate::UnknownEvents`] to acknowledge such
    /// deliveries instead.
    #[error("verified body is a {event:?} event, which this receiver does not know")]
    UnknownEvent {
        /// The `event` value, at most 64 characters of it.
        event: String,
    },
}

impl From<MalformedHeader> for VerifyError {
    fn from(malformed: MalformedHeader) -> Self {
        Self::MalformedHeader(malformed)
    }
}

impl VerifyError {
    /// The HTTP status to answer with: 400 for a missing or malformed header, an undecodable
    /// body or an unknown event, 401 for a timestamp out of tolerance or no matching signature,
    /// 413 for a body over the limit. The same type as
    /// `svc_receiver::ReceiveError::http_status` (and axum's own `StatusCode`).
    pub fn http_status(&self) -> StatusCode {
        match self {
            Self::MissingHeader
            | Self::MalformedHeader(_)
            | Self::InvalidEvent { .. }
            | Self::UnknownEvent { .. } => StatusCode::BAD_REQUEST,
            Self::TimestampTooOld { .. }
            | Self::TimestampInFuture { .. }
            | Self::NoMatchingSignature { .. } => StatusCode::UNAUTHORIZED,
            Self::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    /// A fixed, short text safe to send back to whoever made the request: it names the kind of
    /// failure and nothing else (no hints, no skew, no key names).
    pub fn public_message(&self) -> &'static str {
        match self {
            Self::MissingHeader => "missing signature header",
            Self::MalformedHeader(_) => "malformed signature header",
            Self::TimestampTooOld { .. } | Self::TimestampInFuture { .. } => {
                "signature timestamp outside tolerance"
            }
            Self::NoMatchingSignature { .. } => "invalid signature",
            Self::BodyTooLarge { .. } => "body too large",
            Self::InvalidEvent { .. } => "invalid event body",
            Self::UnknownEvent { .. } => "unknown event",
        }
    }
}
