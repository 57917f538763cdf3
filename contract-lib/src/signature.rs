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
use words::{decode_hex64, parse_ten_digits};

/// HMAC-SHA256, the v1 signature scheme.
pub(crate) type HmacSha256 = Hmac<Sha256>;

mod words;

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
/// let header = svc_contract::sign("whsec_fixture", 1767225600, b"{}");
/// assert!(header.starts_with("t=1767225600,v1="));
/// assert_eq!(header.len(), "t=1767225600,v1=".len() + 64);
/// ```
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    sign_keyed(&keyed(secret.as_bytes()), timestamp, body)
}

/// [`sign`] from an already keyed state.
pub(crate) fn sign_keyed(keyed: &HmacSha256, timestamp: i64, body: &[u8]) -> String {
    let digest = mac_of(keyed, timestamp.to_string().as_bytes(), body);
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
    signatures: Signatures,
}

/// The decoded `v1` values: the service sends one, kept inline; only a header with several
/// (a sender signing with two secrets) allocates.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Signatures {
    One([u8; 32]),
    Many(Vec<[u8; 32]>),
}

impl<'a> SignatureHeader<'a> {
    /// Parses a header value following the policy in the module docs.
    ///
    /// # Errors
    /// [`MalformedHeader`] saying what was wrong. Never panics, whatever the input.
    #[inline]
    pub fn parse(value: &'a [u8]) -> Result<Self, MalformedHeader> {
        if let Some(parsed) = Self::parse_canonical(value) {
            return Ok(parsed);
        }
        Self::parse_general(value)
    }

    /// The form the service sends, `t=<10 digits>,v1=<64 hex>` and nothing else (80 bytes; `t`
    /// has 10 digits from 2001 to 2286), read with no loop over its bytes; `None` for anything
    /// else, which [`Self::parse_general`] then reads. Whatever it accepts, the general parser
    /// accepts with the same result (every byte of that form is printable ASCII, and it has one
    /// `t` and one `v1`), so errors always come from there.
    #[inline]
    pub(crate) fn parse_canonical(value: &'a [u8]) -> Option<Self> {
        let value: &'a [u8; 80] = value.try_into().ok()?;
        let (head, hex) = value.split_at(16);
        if head[..2] != *b"t=" || head[12..] != *b",v1=" {
            return None;
        }
        let timestamp_text = &head[2..12];
        let timestamp = parse_ten_digits(timestamp_text)?;
        let hex: &[u8; 64] = hex.try_into().ok()?;
        Some(Self {
            timestamp_text,
            timestamp,
            signatures: Signatures::One(decode_hex64(hex)?),
        })
    }

    /// Reads any header value under the policy of the module docs, saying what is wrong.
    pub(crate) fn parse_general(value: &'a [u8]) -> Result<Self, MalformedHeader> {
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
        let mut signatures = Vec::new();
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
                    if signatures.len() == MAX_SIGNATURES {
                        return Err(MalformedHeader::TooManySignatures {
                            max: MAX_SIGNATURES,
                        });
                    }
                    signatures.push(parse_v1(val)?);
                }
                _ => {}
            }
        }
        let (timestamp_text, timestamp) = timestamp.ok_or(MalformedHeader::MissingTimestamp)?;
        let signatures = match signatures.as_slice() {
            [] => return Err(MalformedHeader::MissingSignature),
            [one] => Signatures::One(*one),
            _ => Signatures::Many(signatures),
        };
        Ok(Self {
            timestamp_text,
            timestamp,
            signatures,
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
        match &self.signatures {
            Signatures::One(one) => std::slice::from_ref(one),
            Signatures::Many(many) => many,
        }
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
    let hex: &[u8; 64] = text
        .try_into()
        .map_err(|_| MalformedHeader::SignatureWrongLength { len: text.len() })?;
    decode_hex64(hex).ok_or(MalformedHeader::SignatureNotHex)
}

#[cfg(test)]
mod tests {
    use super::SignatureHeader;

    #[test]
    fn the_fast_path_and_the_general_parser_agree_on_near_canonical_headers() {
        let canonical =
            *b"t=1767225600,v1=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let mut header = canonical;
        for position in 0..header.len() {
            for byte in [b'0', b'9', b'a', b'F', b'g', b',', b'=', b' ', b't', 0x80] {
                let saved = header[position];
                header[position] = byte;
                let fast = SignatureHeader::parse_canonical(&header);
                if let Some(fast) = fast {
                    assert_eq!(Ok(fast), SignatureHeader::parse_general(&header));
                }
                header[position] = saved;
            }
        }
        assert!(SignatureHeader::parse_canonical(&canonical).is_some());
    }
}
