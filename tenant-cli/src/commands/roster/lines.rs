//! Where things are in a roster file, by line: the real line of a byte offset whatever the line
//! endings (`\n`, `\r\n` or a lone `\r` each end one line). The csv reader's own line count is
//! one short on CRLF files.

/// How many lines end in `bytes` (`\r\n` counts once).
pub(super) fn line_ends(bytes: &[u8]) -> u64 {
    count_line_ends(bytes, 0..bytes.len())
}

/// How many lines end at the indices `range` of `bytes`.
fn count_line_ends(bytes: &[u8], range: std::ops::Range<usize>) -> u64 {
    let ends = range.filter(|&i| ends_line(bytes, i)).count();
    u64::try_from(ends).unwrap_or(u64::MAX)
}

/// Whether the byte at `i` ends a line: a `\n`, or a `\r` not followed by `\n`.
fn ends_line(bytes: &[u8], i: usize) -> bool {
    match bytes.get(i) {
        Some(b'\n') => true,
        Some(b'\r') => bytes.get(i + 1) != Some(&b'\n'),
        _ => false,
    }
}

/// Line numbers (1-based) of the records, as the reader goes through them: each call counts only
/// the bytes since the previous one.
#[derive(Debug)]
pub(super) struct LineCounter<'a> {
    bytes: &'a [u8],
    offset: usize,
    line: u64,
}

impl<'a> LineCounter<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            offset: 0,
            line: 1,
        }
    }

    /// The line a record starts on, from the reader's byte position for it. That position can
    /// point at blank lines the reader skipped before the record (or at the `\n` of the previous
    /// record's `\r\n`), so line ends there are passed over first. Positions must not go back.
    pub(super) fn record_line(&mut self, position: u64) -> u64 {
        let mut start = usize::try_from(position)
            .unwrap_or(usize::MAX)
            .min(self.bytes.len());
        while matches!(self.bytes.get(start), Some(b'\r' | b'\n')) {
            start += 1;
        }
        if start > self.offset {
            self.line += count_line_ends(self.bytes, self.offset..start);
            self.offset = start;
        }
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_ending_ends_one_line() {
        assert_eq!(line_ends(b"a\nb\r\nc\rd"), 3);
    }

    #[test]
    fn a_record_is_on_the_line_after_the_blank_lines_before_it() {
        let text = b"h\r\nr1\r\n\r\nr2\n";
        let mut lines = LineCounter::new(text);
        assert_eq!(lines.record_line(0), 1);
        assert_eq!(lines.record_line(3), 2);
        // The reader's position for r2 is where r1's line ends, before the blank line.
        assert_eq!(lines.record_line(6), 4);
    }
}
