//! Reading and validating a roster CSV before anything is sent: header columns in any order
//! (extra columns ignored, names matched case-insensitively), cells past the header ignored and
//! a row with fewer cells than the header invalid, an empty cell is an absent value,
//! file-level problems (bad encoding, missing columns) are errors, and row-level problems
//! (missing fields or handle, bad NPN or email, reserved prefixes, duplicate handles inside the
//! file, conflicting or missing agency names) mark the row invalid with its line number.
//! A quote is never allowed to swallow rows silently: one left open to the end of the file is a
//! file-level error, and a row with a line break where none belongs is invalid, naming the lines.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::lines::{self, LineCounter};
use svc_client::{AgencyId, AgentId};

/// The columns a roster file must name in its header.
pub const COLUMNS: [&str; 7] = [
    "platformAgencyId",
    "agencyName",
    "firstName",
    "lastName",
    "email",
    "npn",
    "platformAgentId",
];

/// A file that cannot be imported at all (nothing is sent).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Unreadable file.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not UTF-8.
    #[error("{path}: line {line} is not valid UTF-8 (save the file as UTF-8)")]
    Encoding {
        /// The file.
        path: PathBuf,
        /// First bad line.
        line: u64,
    },
    /// No header row.
    #[error("{0}: the file is empty (expected a header row)")]
    Empty(PathBuf),
    /// Required columns absent from the header.
    #[error("{path}: missing column(s) {missing} (the header must name {all})", missing = .missing.join(", "), all = COLUMNS.join(", "))]
    MissingColumns {
        /// The file.
        path: PathBuf,
        /// Which columns.
        missing: Vec<String>,
    },
    /// A column named twice.
    #[error("{path}: column {column} appears more than once in the header")]
    DuplicateColumn {
        /// The file.
        path: PathBuf,
        /// Which column.
        column: String,
    },
    /// A quote opens a cell and is never closed, so the rest of the file would be one cell.
    #[error(
        "{path}: the quote that opens a cell on line {line} is never closed, so every line after \
         it would be read into that one cell; close or remove the quote"
    )]
    UnclosedQuote {
        /// The file.
        path: PathBuf,
        /// Where the quote opens.
        line: u64,
    },
    /// Malformed CSV in the header.
    #[error("{path}: {message}")]
    Csv {
        /// The file.
        path: PathBuf,
        /// Parser message.
        message: String,
    },
}

/// One data row, cells trimmed, empty cells absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    /// 1-based line in the file where the row starts.
    pub line: u64,
    /// Agency (tenant id).
    pub platform_agency_id: Option<String>,
    /// Agency name.
    pub agency_name: Option<String>,
    /// First name.
    pub first_name: Option<String>,
    /// Last name.
    pub last_name: Option<String>,
    /// Email handle.
    pub email: Option<String>,
    /// NPN handle.
    pub npn: Option<String>,
    /// Agent (tenant id).
    pub platform_agent_id: Option<String>,
}

/// The validated import.
#[derive(Debug, Default)]
pub struct Plan {
    /// Rows ready to register.
    pub valid: Vec<Row>,
    /// Rows that will not be sent, with the reason.
    pub invalid: Vec<(Row, String)>,
    /// Agencies to upsert once each (tenant id, name), in first-seen order.
    pub agencies: Vec<(String, String)>,
}

/// Reads and validates a roster file.
///
/// # Errors
/// A [`FileError`] when the file as a whole cannot be imported.
pub fn read(path: &Path) -> Result<Plan, FileError> {
    let bytes = std::fs::read(path).map_err(|source| FileError::Io {
        path: path.to_owned(),
        source,
    })?;
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    if let Err(e) = std::str::from_utf8(bytes) {
        let line = lines::line_ends(&bytes[..e.valid_up_to()]) + 1;
        return Err(FileError::Encoding {
            path: path.to_owned(),
            line,
        });
    }
    if let Some(line) = lines::unclosed_quote(bytes) {
        return Err(FileError::UnclosedQuote {
            path: path.to_owned(),
            line,
        });
    }
    // Flexible: a row may have more cells than the header (they are ignored); one with fewer is
    // reported below.
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(bytes);
    let header = reader
        .headers()
        .map_err(|e| FileError::Csv {
            path: path.to_owned(),
            message: e.to_string(),
        })?
        .clone();
    if header.is_empty() || header.iter().all(|h| h.trim().is_empty()) {
        return Err(FileError::Empty(path.to_owned()));
    }
    let index = column_index(path, &header)?;
    let mut rows = Vec::new();
    let mut broken = Vec::new();
    let mut lines = LineCounter::new(bytes);
    let mut line_of =
        |position: Option<&csv::Position>| position.map_or(0, |p| lines.record_line(p.byte()));
    for record in reader.records() {
        let (line, row) = match record {
            Ok(record) => {
                let line = line_of(record.position());
                (line, row_of(&record, line, &index, header.len()))
            }
            Err(e) => (line_of(e.position()), Err(e.to_string())),
        };
        match row {
            Ok(row) => rows.push(row),
            Err(reason) => broken.push((
                Row {
                    line,
                    ..Row::default()
                },
                reason,
            )),
        }
    }
    let mut plan = validate(rows);
    plan.invalid.extend(broken);
    plan.invalid.sort_by_key(|(row, _)| row.line);
    Ok(plan)
}

/// The row of the record that starts on `line`, or why the record is not one: fewer cells than
/// the header, or a cell that runs over several lines where no line break belongs (a column of
/// the roster, or past the header), which means a stray quote took the lines after it into one
/// cell. Cells past the header are otherwise ignored.
fn row_of(
    record: &csv::StringRecord,
    line: u64,
    index: &[usize; 7],
    header_len: usize,
) -> Result<Row, String> {
    if record.len() < header_len {
        return Err(format!(
            "has {} fields but the header has {header_len}",
            record.len()
        ));
    }
    let breaks = |i: usize| record.get(i).map_or(0, |c| lines::line_ends(c.as_bytes()));
    let checked = index.iter().copied().chain(header_len..record.len());
    if let Some(i) = checked.into_iter().find(|&i| breaks(i) > 0) {
        let cell = COLUMNS
            .iter()
            .zip(index)
            .find(|(_, c)| **c == i)
            .map_or_else(
                || "a cell past the header".to_owned(),
                |(name, _)| format!("its {name} cell"),
            );
        let last = line + (0..record.len()).map(breaks).sum::<u64>();
        return Err(format!(
            "runs over lines {line}-{last}: {cell} holds line breaks (a stray quote?), so lines \
             {}-{last} are not read as rows",
            line + 1
        ));
    }
    let cell = |i: usize| {
        record
            .get(i)
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
    };
    Ok(Row {
        line,
        platform_agency_id: cell(index[0]),
        agency_name: cell(index[1]),
        first_name: cell(index[2]),
        last_name: cell(index[3]),
        email: cell(index[4]),
        npn: cell(index[5]),
        platform_agent_id: cell(index[6]),
    })
}

/// Position of each of [`COLUMNS`] in the header.
fn column_index(path: &Path, header: &csv::StringRecord) -> Result<[usize; 7], FileError> {
    let mut index = [usize::MAX; 7];
    for (position, name) in header.iter().enumerate() {
        let name = name.trim();
        if let Some(c) = COLUMNS
            .iter()
            .position(|col| col.eq_ignore_ascii_case(name))
        {
            if index[c] != usize::MAX {
                return Err(FileError::DuplicateColumn {
                    path: path.to_owned(),
                    column: COLUMNS[c].to_owned(),
                });
            }
            index[c] = position;
        }
    }
    let missing: Vec<String> = COLUMNS
        .iter()
        .zip(index)
        .filter(|(_, i)| *i == usize::MAX)
        .map(|(c, _)| (*c).to_owned())
        .collect();
    if missing.is_empty() {
        Ok(index)
    } else {
        Err(FileError::MissingColumns {
            path: path.to_owned(),
            missing,
        })
    }
}

/// Digits of an NPN when it has 4 to 10 of them.
pub fn npn_digits(npn: &str) -> Option<String> {
    let digits: String = npn.chars().filter(char::is_ascii_digit).collect();
    (4..=10).contains(&digits.len()).then_some(digits)
}

fn email_ok(email: &str) -> bool {
    let mut parts = email.split('@');
    let (Some(local), Some(domain), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    !local.is_empty() && domain.contains('.') && !email.chars().any(char::is_whitespace)
}

/// The contract reserves the service's agent and agency prefixes: no tenant id may start with them.
fn reserved(id: &str) -> bool {
    id.starts_with(AgentId::PREFIX) || id.starts_with(AgencyId::PREFIX)
}

/// The checks of one row on its own.
fn check_row(row: &Row) -> Result<(), String> {
    let Some(agency) = &row.platform_agency_id else {
        return Err("missing platformAgencyId".into());
    };
    if reserved(agency) {
        return Err(format!(
            "platformAgencyId {agency:?} uses a reserved svc_ prefix"
        ));
    }
    if row.first_name.is_none() || row.last_name.is_none() {
        return Err("missing firstName or lastName".into());
    }
    if row.email.is_none() && row.npn.is_none() && row.platform_agent_id.is_none() {
        return Err("missing handle: give at least one of npn, email, platformAgentId".into());
    }
    if let Some(npn) = &row.npn
        && npn_digits(npn).is_none()
    {
        return Err(format!("npn {npn:?} must have 4 to 10 digits"));
    }
    if let Some(email) = &row.email
        && !email_ok(email)
    {
        return Err(format!("email {email:?} is not an email address"));
    }
    if let Some(id) = &row.platform_agent_id
        && reserved(id)
    {
        return Err(format!(
            "platformAgentId {id:?} uses a reserved svc_ prefix"
        ));
    }
    Ok(())
}

/// Row checks, duplicate handles inside the file, and one name per agency.
fn validate(rows: Vec<Row>) -> Plan {
    // First non-empty name of each agency, and where it was given.
    let mut names: HashMap<String, (String, u64)> = HashMap::new();
    let mut order = Vec::new();
    for row in &rows {
        if let (Some(agency), Some(name)) = (&row.platform_agency_id, &row.agency_name)
            && !names.contains_key(agency)
        {
            names.insert(agency.clone(), (name.clone(), row.line));
            order.push(agency.clone());
        }
    }
    let mut seen: HashMap<(&'static str, String), u64> = HashMap::new();
    let mut plan = Plan {
        agencies: order
            .iter()
            .map(|a| (a.clone(), names[a].0.clone()))
            .collect(),
        ..Plan::default()
    };
    for row in rows {
        let verdict = check_row(&row)
            .and_then(|()| agency_name_check(&row, &names))
            .and_then(|()| {
                let keys = [
                    ("platformAgentId", row.platform_agent_id.clone()),
                    ("npn", row.npn.as_deref().and_then(npn_digits)),
                    ("email", row.email.as_deref().map(str::to_lowercase)),
                ];
                for (kind, value) in keys.iter().filter_map(|(k, v)| v.clone().map(|v| (*k, v))) {
                    if let Some(first) = seen.get(&(kind, value.clone())) {
                        return Err(format!(
                            "duplicate {kind} {value:?} (first on line {first})"
                        ));
                    }
                }
                for (kind, value) in keys.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))) {
                    seen.insert((kind, value), row.line);
                }
                Ok(())
            });
        match verdict {
            Ok(()) => plan.valid.push(row),
            Err(reason) => plan.invalid.push((row, reason)),
        }
    }
    // Agencies whose rows were all invalid are not created.
    plan.agencies.retain(|(agency, _)| {
        plan.valid
            .iter()
            .any(|r| r.platform_agency_id.as_ref() == Some(agency))
    });
    plan
}

fn agency_name_check(row: &Row, names: &HashMap<String, (String, u64)>) -> Result<(), String> {
    let agency = row.platform_agency_id.as_deref().unwrap_or_default();
    match (names.get(agency), &row.agency_name) {
        (None, _) => Err(format!(
            "agency {agency:?} has no agencyName on any row of this file"
        )),
        (Some((name, line)), Some(mine)) if mine != name => Err(format!(
            "agencyName {mine:?} differs from {name:?} given for agency {agency:?} on line {line}"
        )),
        _ => Ok(()),
    }
}
