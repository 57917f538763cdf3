//! Agencies: create-or-rename under the tenant's own id, and lookups scoped to a tenant.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{Db, DbError, unique_violation};
use crate::ids;

/// A create-or-rename request, already validated.
#[derive(Clone, Debug)]
pub struct UpsertAgency {
    /// Owning tenant.
    pub tenant_id: String,
    /// The tenant's id for the agency (trimmed, not reserved).
    pub platform_agency_id: String,
    /// Display name (trimmed).
    pub name: String,
    /// Time of the request, Unix milliseconds.
    pub now_ms: i64,
}

/// A stored agency.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgencyRecord {
    /// Service agency id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// The tenant's id for the agency.
    pub platform_agency_id: String,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: i64,
}

const AGENCY_COLUMNS: &str = "id, name, platform_agency_id, created_at";

fn agency_from_row(row: &Row<'_>) -> rusqlite::Result<AgencyRecord> {
    Ok(AgencyRecord {
        id: row.get(0)?,
        name: row.get(1)?,
        platform_agency_id: row.get(2)?,
        created_at_ms: row.get(3)?,
    })
}

pub(super) fn agency_by_id(
    conn: &Connection,
    tenant_id: &str,
    agency_id: &str,
) -> Result<Option<AgencyRecord>, DbError> {
    let sql = format!("SELECT {AGENCY_COLUMNS} FROM agencies WHERE tenant_id = ?1 AND id = ?2");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([tenant_id, agency_id], agency_from_row)
        .optional()?)
}

pub(super) fn agency_by_platform_id(
    conn: &Connection,
    tenant_id: &str,
    platform_agency_id: &str,
) -> Result<Option<AgencyRecord>, DbError> {
    let sql = format!(
        "SELECT {AGENCY_COLUMNS} FROM agencies WHERE tenant_id = ?1 AND platform_agency_id = ?2"
    );
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([tenant_id, platform_agency_id], agency_from_row)
        .optional()?)
}

impl Db {
    /// Creates the agency, or renames the tenant's agency that already carries the
    /// `platformAgencyId`. Returns the agency and whether it was created. Writes are
    /// serialised, so concurrent first calls resolve to one agency and one `true`.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn upsert_agency(
        &self,
        request: UpsertAgency,
    ) -> Result<(AgencyRecord, bool), DbError> {
        self.write(move |tx| {
            if let Some(mut existing) =
                agency_by_platform_id(tx, &request.tenant_id, &request.platform_agency_id)?
            {
                if existing.name != request.name {
                    tx.execute(
                        "UPDATE agencies SET name = ?2, updated_at = ?3 WHERE id = ?1",
                        params![existing.id, request.name, request.now_ms],
                    )?;
                    existing.name = request.name;
                }
                return Ok((existing, false));
            }
            let record = AgencyRecord {
                id: ids::agency_id(),
                name: request.name,
                platform_agency_id: request.platform_agency_id,
                created_at_ms: request.now_ms,
            };
            tx.execute(
                "INSERT INTO agencies (id, tenant_id, platform_agency_id, name, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                params![
                    record.id,
                    request.tenant_id,
                    record.platform_agency_id,
                    record.name,
                    record.created_at_ms
                ],
            )
            .map_err(|error| match unique_violation(&error) {
                Some(key) => DbError::Unique(key),
                None => DbError::Sqlite(error),
            })?;
            Ok((record, true))
        })
        .await
    }

    /// The tenant's agency with this service id (another tenant's id is `None`).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn agency(
        &self,
        tenant_id: &str,
        agency_id: &str,
    ) -> Result<Option<AgencyRecord>, DbError> {
        let (tenant_id, agency_id) = (tenant_id.to_owned(), agency_id.to_owned());
        self.read(move |conn| agency_by_id(conn, &tenant_id, &agency_id))
            .await
    }
}
