//! [`OperatorStep`] and [`operate`]: the operator's real-call steps (`svc-service agency …` and
//! `calls …`) as typed values, for the sandbox's callers; the command line converts its flags
//! into the same functions.

use std::path::PathBuf;

use super::target::OperatorTarget;
use super::{agency, calls};
use crate::db::Rubric;
use crate::scoring::real_call::Disposition;

/// An operator step on one tenant's real calls: what `svc-service agency …` and
/// `svc-service calls …` do, run by [`operate`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OperatorStep {
    /// Switch an agency on for real calls: its dialer records are ingested and scored.
    EnableRealCalls {
        /// The tenant's id.
        tenant: String,
        /// The service agency id (`svc_agency_…`).
        agency_id: String,
        /// The agency dials through a third-party platform: its dialer's agent ids are never
        /// matched against `platformAgentId`.
        third_party_dialer: bool,
        /// How the agency's calls are graded.
        rubric: Rubric,
    },
    /// Switch an agency off for real calls: later records are dropped (`agency_not_enabled`).
    DisableRealCalls {
        /// The tenant's id.
        tenant: String,
        /// The service agency id (`svc_agency_…`).
        agency_id: String,
    },
    /// Ingest dialer records (a JSON array or JSON lines; `-` reads stdin): one result per
    /// record on stdout, in order, then a summary on stderr.
    IngestReal {
        /// The tenant's id.
        tenant: String,
        /// The records; relative recording paths are read from this file's directory (from
        /// the working directory with `-`).
        file: PathBuf,
        /// Move each record's `startedAt` into the last hours
        /// ([`relative_to_now`](crate::sandbox::relative_to_now)).
        relative_to_now: bool,
    },
    /// Change a scored real call's disposition and score it again (no webhook is sent);
    /// prints the old and the new score.
    Redisposition {
        /// The tenant's id.
        tenant: String,
        /// The real call (`svc_call_…`).
        call_id: String,
        /// The new disposition.
        disposition: Disposition,
    },
}

/// Runs an operator step on `target`'s database, printing its result on stdout as
/// `svc-service` does (JSON with [`OperatorTarget::json`]).
///
/// # Errors
/// [`Usage`](super::Usage) for a records file that cannot be used or an unknown tenant
/// (exit 2), [`Reported`](super::Reported) when records were invalid (their lines said why:
/// exit 1), [`Temporary`](super::Temporary) when the disk is full (exit 75), and otherwise a
/// database failure or an unknown agency or call.
pub async fn operate(target: &OperatorTarget, step: OperatorStep) -> anyhow::Result<()> {
    match step {
        OperatorStep::EnableRealCalls {
            tenant,
            agency_id,
            third_party_dialer,
            rubric,
        } => {
            let settings = Some((third_party_dialer, rubric));
            agency::set_real_calls(target, &tenant, &agency_id, settings).await
        }
        OperatorStep::DisableRealCalls { tenant, agency_id } => {
            agency::set_real_calls(target, &tenant, &agency_id, None).await
        }
        OperatorStep::IngestReal {
            tenant,
            file,
            relative_to_now,
        } => calls::ingest_real(target, &tenant, &file, relative_to_now).await,
        OperatorStep::Redisposition {
            tenant,
            call_id,
            disposition,
        } => calls::redisposition_call(target, &tenant, &call_id, disposition).await,
    }
}
