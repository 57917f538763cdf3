//! Reading the header's numbers eight bytes at a time in a `u64` (SWAR): the ten digits of `t`
//! and the 64 hex digits of `v1`. The parser's fast path uses them; a table lookup per byte was
//! most of what a verification cost beyond its HMAC. The header is public, so none of this
//! needs to be constant-time; it is branch-free for speed.

/// One byte per lane of a `u64`.
const LANES: u64 = 0x0101_0101_0101_0101;
/// The high bit of every lane.
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Ten ASCII digits as a number, eight at a time in a `u64`; `None` if any is not a digit.
pub(super) fn parse_ten_digits(text: &[u8]) -> Option<i64> {
    let mut word = [0u8; 8];
    word.copy_from_slice(text.get(..8)?);
    let word = u64::from_le_bytes(word);
    // Every lane is 0x30..=0x39: its high nibble is 3, and adding 6 does not carry out of the
    // low nibble (nor, then, out of the lane).
    let digits = word & 0xf0f0_f0f0_f0f0_f0f0 == LANES * 0x30
        && word.wrapping_add(LANES * 6) & 0xf0f0_f0f0_f0f0_f0f0 == LANES * 0x30;
    let (nine, ten) = (*text.get(8)?, *text.get(9)?);
    if !(digits && nine.is_ascii_digit() && ten.is_ascii_digit() && text.len() == 10) {
        return None;
    }
    // The first digit is in the lowest lane: combine neighbouring lanes into 2, 4, then 8
    // digits (each step's products stay inside their lane; what overflows the top is masked).
    let v = word & (LANES * 0x0f);
    let v = (v.wrapping_mul(10) + (v >> 8)) & 0x00ff_00ff_00ff_00ff;
    let v = (v.wrapping_mul(100) + (v >> 16)) & 0x0000_ffff_0000_ffff;
    let v = (v.wrapping_mul(10_000) + (v >> 32)) & 0xffff_ffff;
    // At most 99 999 999: fits an i64.
    let eight = i64::try_from(v).ok()?;
    Some(eight * 100 + i64::from(nine - b'0') * 10 + i64::from(ten - b'0'))
}

/// Decodes 64 hex digits (either case) into 32 bytes, eight digits at a time in a `u64`;
/// `None` when any byte is not a hex digit. No branch per digit or word: the header is public,
/// so this is for speed (a table lookup per digit was most of a verification's own cost).
pub(super) fn decode_hex64(text: &[u8; 64]) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    let mut invalid = 0u64;
    for (bytes, chunk) in out.chunks_exact_mut(4).zip(text.chunks_exact(8)) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let (decoded, bad) = decode_hex8(u64::from_le_bytes(word));
        invalid |= bad;
        bytes.copy_from_slice(&decoded.to_le_bytes());
    }
    (invalid == 0).then_some(out)
}

/// Decodes the eight hex digits in the lanes of `word` (the first digit in the lowest lane) into
/// four bytes; the second value is zero exactly when all eight were hex digits.
fn decode_hex8(word: u64) -> (u32, u64) {
    // For lanes below 0x80, `lane + (0x80 - lo)` sets the lane's high bit exactly when
    // lane >= lo, and `lane + (0x7f - hi)` exactly when lane > hi; neither carries into the
    // next lane. A lane of 0x80 or more is invalid anyway (the first term of `bad`).
    let low7 = word & !HIGH_BITS;
    let at_least = |x: u64, lo: u8| x.wrapping_add(LANES * u64::from(0x80 - lo));
    let above = |x: u64, hi: u8| x.wrapping_add(LANES * u64::from(0x7f - hi));
    let digit = at_least(low7, b'0') & !above(low7, b'9');
    // Setting 0x20 folds 'A'..='F' onto 'a'..='f' and nothing else onto them.
    let folded = low7 | (LANES * 0x20);
    let letter = at_least(folded, b'a') & !above(folded, b'f');
    let bad = (word | !(digit | letter)) & HIGH_BITS;
    // Each lane's value: its low nibble, plus 9 for a letter (bit 6 set: 'a' is 0x61, 1 + 9).
    let nibbles = (word & (LANES * 0x0f)) + ((word >> 6) & LANES) * 9;
    // Pair lanes 2i (high nibble) and 2i+1 (low nibble) into one byte per 16-bit lane, then
    // squeeze the four 16-bit lanes into four bytes.
    let pairs = ((nibbles << 4) | (nibbles >> 8)) & 0x00ff_00ff_00ff_00ff;
    let halves = (pairs | (pairs >> 8)) & 0x0000_ffff_0000_ffff;
    let bytes = (halves | (halves >> 16)) & 0xffff_ffff;
    // Only the low 32 bits are left.
    (bytes as u32, bad)
}

#[cfg(test)]
mod tests {
    use super::{decode_hex64, parse_ten_digits};

    #[test]
    fn ten_digits_are_read_as_the_general_parser_reads_them() {
        for text in [
            "0000000000",
            "1767225600",
            "9999999999",
            "1234567890",
            "0000000001",
        ] {
            assert_eq!(
                parse_ten_digits(text.as_bytes()),
                text.parse().ok(),
                "{text}"
            );
        }
        let mut text = *b"1767225600";
        for position in 0..10 {
            for byte in 0..=255u8 {
                let saved = text[position];
                text[position] = byte;
                let expected = std::str::from_utf8(&text)
                    .ok()
                    .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|t| t.parse().ok());
                assert_eq!(
                    parse_ten_digits(&text),
                    expected,
                    "byte {byte:#04x} at {position}"
                );
                text[position] = saved;
            }
        }
    }

    #[test]
    fn the_word_wise_hex_decoder_agrees_with_the_hex_crate_on_every_byte_in_every_position() {
        let mut text = *b"00112233445566778899aabbccddeeffAABBCCDDEEFF0123456789abcdefABCD";
        assert_eq!(
            decode_hex64(&text).map(|d| d.to_vec()),
            hex::decode(text).ok()
        );
        for position in 0..64 {
            for byte in 0..=255u8 {
                let saved = text[position];
                text[position] = byte;
                assert_eq!(
                    decode_hex64(&text).map(|d| d.to_vec()),
                    hex::decode(text).ok(),
                    "byte {byte:#04x} at {position}"
                );
                text[position] = saved;
            }
        }
    }
}
