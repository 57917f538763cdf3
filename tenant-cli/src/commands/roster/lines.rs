//! Where things are in a roster file, by line: the real line of a byte offset whatever the line
//! endings (`\n`, `\r\n` or a lone `\r` each end one line), and a quote left open to the end of
//! the file. The csv reader's own line count is one short on CRLF files, and an unclosed quote is
//! not an error to it: it silently reads the rest of the file into one cell.

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

/// The line where a quoted cell opens and is never closed, if one does. The scan follows the csv
/// reader's rules: a quote opens a quoted cell only as a cell's first character, `""` inside it
/// is a literal quote, and a quote elsewhere in an unquoted cell is literal.
pub(super) fn unclosed_quote(bytes: &[u8]) -> Option<u64> {
    #[derive(Clone, Copy)]
    enum State {
        CellStart,
        Unquoted,
        Quoted,
        QuoteInQuoted,
    }
    let (mut state, mut line, mut opened) = (State::CellStart, 1, 1);
    for (i, &b) in bytes.iter().enumerate() {
        state = match (state, b) {
            (State::CellStart, b'"') => {
                opened = line;
                State::Quoted
            }
            (State::Quoted, b'"') => State::QuoteInQuoted,
            (State::Quoted, _) => State::Quoted,
            (State::QuoteInQuoted, b'"') => State::Quoted,
            (_, b',' | b'\n' | b'\r') => State::CellStart,
            (_, _) => State::Unquoted,
        };
        if ends_line(bytes, i) {
            line += 1;
        }
    }
    matches!(state, State::Quoted).then_some(opened)
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

    #[test]
    fn only_a_quote_open_at_the_end_of_the_file_is_unclosed() {
        assert_eq!(unclosed_quote(b"a,b\n\"c,d\ne,f\n"), Some(2));
        assert_eq!(unclosed_quote(b"a,b\r\nx,\"c\r\ne\r\n"), Some(2));
        assert_eq!(
            unclosed_quote(b"a,\"b\nc\",d\n"),
            None,
            "a closed multi-line cell"
        );
        assert_eq!(
            unclosed_quote(b"a,\"say \"\"hi\"\"\",b\n"),
            None,
            "escaped quotes"
        );
        assert_eq!(
            unclosed_quote(b"a,5\" tall,b\n"),
            None,
            "a quote inside a cell"
        );
        assert_eq!(unclosed_quote(b"a,\"b\"c,\"d\n"), Some(1));
    }
}
