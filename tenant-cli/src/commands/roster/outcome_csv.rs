//! The `--report` CSV, one line per row. The file is created before anything is sent, so a path
//! that cannot be written stops the import while nothing has happened yet; it is filled once
//! every row has an outcome.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::run::RowResult;
use crate::exit::CliError;
use svc_client::{AgencyId, AgentId};

/// The report's columns.
const HEADER: [&str; 9] = [
    "line",
    "platformAgencyId",
    "platformAgentId",
    "npn",
    "email",
    "outcome",
    "agentId",
    "agencyId",
    "message",
];

/// An open report file.
#[derive(Debug)]
pub(super) struct OutcomeCsv {
    path: PathBuf,
    writer: csv::Writer<File>,
}

impl OutcomeCsv {
    /// Creates (or truncates) the report file.
    ///
    /// # Errors
    /// [`CliError::Usage`] naming the path when it cannot be created.
    pub(super) fn create(path: &Path) -> Result<Self, CliError> {
        let writer = csv::Writer::from_path(path).map_err(|e| {
            CliError::Usage(format!(
                "cannot write report {}: {e} (nothing was sent)",
                path.display()
            ))
        })?;
        Ok(Self {
            path: path.to_owned(),
            writer,
        })
    }

    /// Writes every row's outcome, flushes the file and returns its path.
    ///
    /// # Errors
    /// [`CliError::Failed`] naming the path when a write fails (a full disk, for instance).
    pub(super) fn write(mut self, results: &[RowResult]) -> Result<PathBuf, CliError> {
        match self.write_rows(results) {
            Ok(()) => Ok(self.path),
            Err(e) => Err(CliError::Failed(format!(
                "cannot write report {}: {e}",
                self.path.display()
            ))),
        }
    }

    fn write_rows(&mut self, results: &[RowResult]) -> Result<(), csv::Error> {
        self.writer.write_record(HEADER)?;
        for r in results {
            let o = |v: &Option<String>| v.clone().unwrap_or_default();
            let id = |v: Option<&str>| v.unwrap_or_default().to_owned();
            self.writer.write_record([
                r.row.line.to_string(),
                o(&r.row.platform_agency_id),
                o(&r.row.platform_agent_id),
                o(&r.row.npn),
                o(&r.row.email),
                r.outcome.as_str().to_owned(),
                id(r.agent_id.as_ref().map(AgentId::as_str)),
                id(r.agency_id.as_ref().map(AgencyId::as_str)),
                o(&r.message),
            ])?;
        }
        self.writer.flush()?;
        Ok(())
    }
}
