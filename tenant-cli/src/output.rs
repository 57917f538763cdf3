//! Output: data on stdout (a comfy-table by default, JSON with `--json`: indented on a
//! terminal, one object per line when stdout is a pipe or a file), messages and progress on
//! stderr; progress bars only on a terminal, never with `--json` or `NO_COLOR`. A reader that went
//! away (`svc-cli … | head -0`, stderr closed too) is not an error: what it would have read is
//! dropped and the command ends with its usual exit code, never a panic.
//!
//! Human output never passes a control character through: text from the service (a live
//! call's or a dialer transcript's lines, names, messages) could otherwise drive the terminal
//! (an ESC sequence retitling the window or rewriting what is shown, a BEL, a NUL, a `\r`
//! overwriting the line). Tables, lines and messages show each control character (but the
//! newline) and each bidirectional override escaped, as `\u{1b}` ([`escape_controls`]). JSON
//! output (`--json`) and exported data are written exactly as they are.
//!
//! Tables fit the terminal (comfy-table's dynamic arrangement wraps cells); written into a pipe
//! they wrap to `COLUMNS` when it is set, and otherwise keep each row on one line.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};

use comfy_table::{ContentArrangement, Table, presets};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

/// Where and how a command writes.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// Machine output: JSON data only on stdout.
    pub json: bool,
    /// Whether progress bars may be drawn.
    pub progress: bool,
    /// Whether `--json` is indented for a person (stdout is a terminal); otherwise each
    /// object is one line, so that a log of runs (cron's `>> file`) is JSON Lines.
    pub pretty: bool,
}

impl Output {
    /// Decides from the `--json` flag, `NO_COLOR` and whether stderr is a terminal.
    pub fn new(json: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            json,
            progress: !json && !no_color && std::io::stderr().is_terminal(),
            pretty: std::io::stdout().is_terminal(),
        }
    }

    /// Writes `value` as JSON on stdout: indented on a terminal, else on one line.
    ///
    /// # Errors
    /// When stdout is closed.
    pub fn json_data<T: Serialize>(&self, value: &T) -> anyhow::Result<()> {
        let text = if self.pretty {
            serde_json::to_string_pretty(value)?
        } else {
            serde_json::to_string(value)?
        };
        stdout_line(&text)
    }

    /// Writes a table on stdout.
    ///
    /// # Errors
    /// When stdout cannot be written (a closed pipe is not an error).
    pub fn table(&self, table: &Table) -> anyhow::Result<()> {
        stdout_line(&escaped_table(table).to_string())
    }

    /// Writes a line of text on stdout (human mode data that is not a table).
    ///
    /// # Errors
    /// When stdout cannot be written (a closed pipe is not an error).
    pub fn line(&self, text: &str) -> anyhow::Result<()> {
        stdout_line(&escape_controls(text))
    }

    /// A message for the user on stderr (both modes).
    pub fn note(&self, text: &str) {
        stderr_line(text);
    }

    /// A progress bar on stderr, hidden unless progress is allowed.
    pub fn progress_bar(&self, len: u64, what: &str) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new(len);
        if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({eta})") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_owned());
        bar
    }
}

/// Writes `bytes` on stdout; a closed pipe (the reader went away) is not an error.
///
/// # Errors
/// Any other failure to write (a full disk, say).
pub fn stdout_bytes(bytes: &[u8]) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Writes a line on stdout; a closed pipe is not an error.
///
/// # Errors
/// Any other failure to write.
pub fn stdout_line(text: &str) -> anyhow::Result<()> {
    stdout_bytes(format!("{text}\n").as_bytes())
}

/// Writes a line on stderr, ignoring any failure: there is nowhere left to report it, and a
/// message must never turn into a panic (`eprintln!` panics on a closed stderr).
/// Control characters are escaped ([`escape_controls`]): every message is for a human.
pub fn stderr_line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", escape_controls(text));
}

/// `text` with each control character but the newline (ESC, BEL, NUL, `\r`, tab, DEL, the C1
/// controls) and each bidirectional override or isolate written as an escape (`\u{1b}`), so
/// that it shows as text on a terminal instead of acting on it.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let acts = |c: char| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.contains(acts) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts(c) {
            escaped.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

/// A copy of `table` (made by [`table`] or [`pairs`]) with its cells' control characters
/// escaped, laid out on the escaped text.
fn escaped_table(table: &Table) -> Table {
    let escape_row = |row: &comfy_table::Row| -> Vec<String> {
        row.cell_iter()
            .map(|cell| escape_controls(&cell.content()).into_owned())
            .collect()
    };
    let mut clean = Table::new();
    clean
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(table.content_arrangement());
    if let Some(header) = table.header() {
        clean.set_header(escape_row(header));
    }
    for row in table.row_iter() {
        clean.add_row(escape_row(row));
    }
    // Column rules (an id kept whole) apply to the copy, which comfy-table lays out.
    for (index, column) in table.column_iter().enumerate() {
        if let (Some(constraint), Some(copy)) = (column.constraint(), clean.column_mut(index)) {
            copy.set_constraint(*constraint);
        }
    }
    if let Some(width) = piped_width() {
        clean.set_width(width);
    }
    clean
}

/// Keeps the cells of `columns` (by index) whole when the table wraps to fit, so an id reads
/// and pastes as one piece; the other columns wrap around them.
pub fn keep_whole(table: &mut Table, columns: &[usize]) {
    for &index in columns {
        if let Some(column) = table.column_mut(index) {
            column.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
        }
    }
}

/// The width tables wrap to when stdout is not a terminal: `COLUMNS`, when set to a usable
/// width (a narrow terminal behind `| less`, a CI log); else none, and each row is one line.
/// On a terminal, comfy-table reads the terminal's own width.
fn piped_width() -> Option<u16> {
    if std::io::stdout().is_terminal() {
        return None;
    }
    columns(std::env::var("COLUMNS").ok().as_deref())
}

/// A `COLUMNS` value as a table width: a number of at least 20 columns.
fn columns(value: Option<&str>) -> Option<u16> {
    value?.trim().parse::<u16>().ok().filter(|w| *w >= 20)
}

/// `text` cut to at most `max` characters, an ellipsis marking the cut (tables show the
/// start of a long error; `--json` has it whole).
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.chars().count() <= max {
        return Cow::Borrowed(text);
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    Cow::Owned(format!("{kept}…"))
}

/// A table with a header row, in the house preset.
pub fn table<I, S>(header: I) -> Table
where
    I: IntoIterator<Item = S>,
    S: Into<comfy_table::Cell>,
{
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    table
}

/// A key/value table (two columns, no header).
pub fn pairs<'a>(rows: impl IntoIterator<Item = (&'a str, String)>) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    for (key, value) in rows {
        table.add_row(vec![key.to_owned(), value]);
    }
    table
}

/// `n` and the noun in its number: `1 retry`, `2 retries`, `0 calls`.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `-` for an absent value.
pub fn opt(value: Option<&str>) -> String {
    value.unwrap_or("-").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_bidi_overrides_are_escaped_and_newlines_kept() {
        assert_eq!(
            escape_controls("\u{1b}]0;pwned\u{7}hi\0\r\tx\u{7f}\u{9b}\u{202e}y\nz"),
            "\\u{1b}]0;pwned\\u{7}hi\\u{0}\\u{d}\\u{9}x\\u{7f}\\u{9b}\\u{202e}y\nz"
        );
        assert!(matches!(escape_controls("plain, é ✓"), Cow::Borrowed(_)));
    }

    #[test]
    fn columns_is_a_width_only_when_usable_and_clip_marks_its_cut() {
        assert_eq!(columns(Some("100")), Some(100));
        assert_eq!(columns(Some(" 80 ")), Some(80));
        for unusable in [None, Some(""), Some("wide"), Some("5"), Some("-80")] {
            assert_eq!(columns(unusable), None, "{unusable:?}");
        }
        assert_eq!(clip("connection refused", 40), "connection refused");
        assert_eq!(
            clip("connection refused", 10),
            "connectio…",
            "10 characters in all"
        );
    }

    #[test]
    fn a_count_names_its_noun_in_its_number() {
        assert_eq!(count(1_u64, "retry", "retries"), "1 retry");
        assert_eq!(count(0_u64, "retry", "retries"), "0 retries");
        assert_eq!(count(17_u32, "attempt", "attempts"), "17 attempts");
    }

    #[test]
    fn a_table_shows_its_cells_escaped() {
        let mut t = table(["key", "value"]);
        t.add_row(vec!["agent".to_owned(), "\u{1b}[2Jgone".to_owned()]);
        let shown = escaped_table(&t).to_string();
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(shown.contains("\\u{1b}[2Jgone"), "{shown}");
    }
}
