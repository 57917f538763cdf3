//! The `X-Service-Signature` header: producing it ([`sign`]) and parsing it strictly
//! ([`SignatureHeader::parse`]) before any value in it is used.
//!
//! # Parsing policy
//!
//! The header is `t=<unix seconds>,v1=<64 hex>`, elements separated by `,`, each `key=value`.
//!
//! - The whole value is at most [`MAX_HEADER_LEN`] bytes of printable ASCII with no whitespace
//!   anywhere (no trimming: a header that needs trimming was mangled on the way).
//! - Every element has a non-empty key and an `=`; an empty element (`,,` or a trailing `,`) is
//!   rejected.
//! - `t` appears exactly once; it is 1 to [`MAX_TIMESTAMP_DIGITS`] ASCII digits (no sign, no
//!   spaces), so it always fits an `i64`. The HMAC covers `t` exactly as sent.
//! - `v1` appears one or more times (at most [`MAX_SIGNATURES`]); each is exactly 64 hex digits
//!   (the contract sends lowercase; uppercase is accepted since it decodes to the same bytes).
//!   Any one matching is enough, which lets a sender sign with two secrets during a rotation.
//! - Elements with other keys (`v0`, `v2`, …) are ignored for forward compatibility, but they
//!   still count towards the length limit and must be well formed `key=value`.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::MalformedHeader;

/// HMAC-SHA256, the v1 signature scheme.
pub(crate) type HmacSha256 = Hmac<Sha256>;

/// Largest accepted header value, in bytes.
pub const MAX_HEADER_LEN: usize = 1024;
/// Most digits accepted in `t` (enough for year 33658; always fits an `i64`).
pub const MAX_TIMESTAMP_DIGITS: usize = 12;
/// Most `v1` values accepted in one header.
pub const MAX_SIGNATURES: usize = 8;

/// Signs a webhook body: returns the full `X-Service-Signature` value
/// `t=<timestamp>,v1=<64 lowercase hex>`.
///
/// `v1` is HMAC-SHA256 of `<timestamp>.<raw body>`, keyed with the bytes of the whole
/// `whsec_…` secret string exactly as issued (the prefix is part of the key; nothing is decoded).
/// Used by the service to sign deliveries and by tests and fixtures. A negative `timestamp`
/// yields a header every verifier rejects (`t` must be digits).
///
/// ```
/// let header = svc_receiver::sign("whsec_fixture", 1767225600, b"{}");
/// assert!(header.starts_with("t=1767225600,v1="));
/// assert_eq!(header.len(), "t=1767225600,v1=".len() + 64);
/// ```
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mac = keyed(secret.as_bytes());
    let digest = mac_of(&mac, timestamp.to_string().as_bytes(), body);
    format!("t={timestamp},v1={}", hex::encode(digest))
}

/// An HMAC state keyed with `key`; clone it to sign many messages without re-keying.
pub(crate) fn keyed(key: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail.
    <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC accepts keys of any length")
}

/// HMAC of `<timestamp text>.<body>` from an already keyed state.
pub(crate) fn mac_of(keyed: &HmacSha256, timestamp: &[u8], body: &[u8]) -> [u8; 32] {
    let mut mac = keyed.clone();
    mac.update(timestamp);
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// A parsed, well-formed `X-Service-Signature` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeader<'a> {
    timestamp_text: &'a [u8],
    timestamp: i64,
    signatures: [[u8; 32]; MAX_SIGNATURES],
    count: usize,
}

impl<'a> SignatureHeader<'a> {
    /// Parses a header value following the policy in the module docs.
    ///
    /// # Errors
    /// [`MalformedHeader`] saying what was wrong. Never panics, whatever the input.
    pub fn parse(value: &'a [u8]) -> Result<Self, MalformedHeader> {
        if value.is_empty() {
            return Err(MalformedHeader::Empty);
        }
        if value.len() > MAX_HEADER_LEN {
            return Err(MalformedHeader::TooLong {
                max: MAX_HEADER_LEN,
            });
        }
        if let Some(byte) = value.iter().find(|b| !b.is_ascii_graphic()) {
            return Err(if byte.is_ascii_whitespace() {
                MalformedHeader::Whitespace
            } else {
                MalformedHeader::NotPrintableAscii
            });
        }
        let mut timestamp: Option<(&[u8], i64)> = None;
        let mut signatures = [[0u8; 32]; MAX_SIGNATURES];
        let mut count = 0;
        for element in value.split(|&b| b == b',') {
            let Some(eq) = element.iter().position(|&b| b == b'=') else {
                return Err(if element.is_empty() {
                    MalformedHeader::EmptyElement
                } else {
                    MalformedHeader::ElementWithoutEquals
                });
            };
            let (key, val) = (&element[..eq], &element[eq + 1..]);
            match key {
                b"" => return Err(MalformedHeader::EmptyKey),
                b"t" => {
                    if timestamp.is_some() {
                        return Err(MalformedHeader::DuplicateTimestamp);
                    }
                    timestamp = Some((val, parse_timestamp(val)?));
                }
                b"v1" => {
                    if count == MAX_SIGNATURES {
                        return Err(MalformedHeader::TooManySignatures {
                            max: MAX_SIGNATURES,
                        });
                    }
                    signatures[count] = parse_v1(val)?;
                    count += 1;
                }
                _ => {}
            }
        }
        let (timestamp_text, timestamp) = timestamp.ok_or(MalformedHeader::MissingTimestamp)?;
        if count == 0 {
            return Err(MalformedHeader::MissingSignature);
        }
        Ok(Self {
            timestamp_text,
            timestamp,
            signatures,
            count,
        })
    }

    /// The signed timestamp, in unix seconds.
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }

    /// The timestamp exactly as sent (what the HMAC covers).
    pub fn timestamp_text(&self) -> &'a [u8] {
        self.timestamp_text
    }

    /// The decoded `v1` signatures, in header order.
    pub fn signatures(&self) -> &[[u8; 32]] {
        &self.signatures[..self.count]
    }
}

fn parse_timestamp(text: &[u8]) -> Result<i64, MalformedHeader> {
    if text.is_empty() {
        return Err(MalformedHeader::TimestampNotDigits);
    }
    if text.len() > MAX_TIMESTAMP_DIGITS {
        return Err(MalformedHeader::TimestampTooLong {
            max_digits: MAX_TIMESTAMP_DIGITS,
        });
    }
    text.iter().try_fold(0i64, |acc, &b| {
        if b.is_ascii_digit() {
            // At most 12 digits: cannot overflow an i64.
            Ok(acc * 10 + i64::from(b - b'0'))
        } else {
            Err(MalformedHeader::TimestampNotDigits)
        }
    })
}

fn parse_v1(text: &[u8]) -> Result<[u8; 32], MalformedHeader> {
    if text.len() != 64 {
        return Err(MalformedHeader::SignatureWrongLength { len: text.len() });
    }
    let mut out = [0u8; 32];
    // Decoding is not secret-dependent (the header is public), so a plain table is fine.
    let mut invalid = 0u8;
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        let (high, low) = (
            HEX_VALUE[usize::from(pair[0])],
            HEX_VALUE[usize::from(pair[1])],
        );
        invalid |= (high | low) & 0x10;
        *byte = (high << 4) | (low & 0x0f);
    }
    if invalid != 0 {
        return Err(MalformedHeader::SignatureNotHex);
    }
    Ok(out)
}

/// Hex digit values; 0x10 marks a byte that is not a hex digit.
const HEX_VALUE: [u8; 256] = {
    let mut table = [0x10u8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};
