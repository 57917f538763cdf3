//! Tenants and their API keys: operator writes, and the per-request authentication read.

use ipnet::IpNet;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{Db, DbError};
use crate::credentials::SigningSecret;
use crate::faults::Faults;

/// A tenant to create, with the hash of its first API key.
#[derive(Debug)]
pub struct NewTenant {
    /// Tenant id (`ten_…`).
    pub id: String,
    /// Display name.
    pub name: String,
    /// Webhook URL, already validated.
    pub webhook_url: Option<String>,
    /// Signing secret.
    pub signing_secret: SigningSecret,
    /// IP allowlist (empty: any address).
    pub ip_allowlist: Vec<IpNet>,
    /// Monthly usage allowance in minutes (`None`: unlimited).
    pub monthly_allowance_minutes: Option<i64>,
    /// SHA-256 hex of the first API key.
    pub key_hash: String,
    /// Creation time, Unix milliseconds.
    pub now_ms: i64,
    /// Injected faults (none by default).
    pub faults: Faults,
}

impl NewTenant {
    /// A tenant named `name` with a fresh id and signing secret, no webhook endpoint, no IP
    /// allowlist, no usage limit, created at time 0; change fields with struct update syntax.
    pub fn new(name: impl Into<String>, key_hash: String) -> Self {
        Self {
            id: crate::ids::tenant_id(),
            name: name.into(),
            webhook_url: None,
            signing_secret: SigningSecret::generate(),
            ip_allowlist: Vec::new(),
            monthly_allowance_minutes: None,
            key_hash,
            now_ms: 0,
            faults: Faults::default(),
        }
    }
}

/// A stored tenant.
#[derive(Clone, Debug)]
pub struct TenantRecord {
    /// Tenant id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Whether the tenant may call the API.
    pub active: bool,
    /// Registered webhook URL.
    pub webhook_url: Option<String>,
    /// Webhook signing secret.
    pub signing_secret: SigningSecret,
    /// IP allowlist (empty: any address).
    pub ip_allowlist: Vec<IpNet>,
    /// Monthly usage allowance in minutes (`None`: unlimited).
    pub monthly_allowance_minutes: Option<i64>,
    /// Number of API keys not revoked.
    pub live_keys: i64,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: i64,
    /// Requests a second the tenant may make (`None`: no limit, the default).
    pub requests_per_second: Option<i64>,
    /// Injected faults (none by default).
    pub faults: Faults,
}

/// Whether a presented API key is usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiKeyStatus {
    /// Not revoked.
    Live,
    /// Revoked by the operator.
    Revoked,
}

/// What authentication needs to know about a presented key, read fresh on every request.
#[derive(Clone, Debug)]
pub struct AuthRecord {
    /// The key's tenant.
    pub tenant_id: String,
    /// The key's state.
    pub key_status: ApiKeyStatus,
    /// Whether the tenant is active.
    pub tenant_active: bool,
    /// The tenant's IP allowlist (empty: any address).
    pub ip_allowlist: Vec<IpNet>,
    /// The tenant's request rate limit (`None`: none).
    pub requests_per_second: Option<i64>,
    /// The tenant's injected faults.
    pub faults: Faults,
}

/// The key lookup every authenticated request runs.
const AUTHENTICATE: &str = "SELECT k.tenant_id, k.revoked_at IS NOT NULL, t.active, t.ip_allowlist,
        t.requests_per_second, t.faults
    FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.key_hash = ?1";

const TENANT_COLUMNS: &str = "t.id, t.name, t.active, t.webhook_url, t.signing_secret, \
     t.ip_allowlist, t.monthly_allowance_minutes, t.created_at, \
     (SELECT COUNT(*) FROM api_keys k WHERE k.tenant_id = t.id AND k.revoked_at IS NULL), \
     t.requests_per_second, t.faults";

fn tenant_from_row(row: &Row<'_>) -> rusqlite::Result<(TenantRecord, String)> {
    Ok((
        TenantRecord {
            id: row.get(0)?,
            name: row.get(1)?,
            active: row.get(2)?,
            webhook_url: row.get(3)?,
            signing_secret: SigningSecret::from_stored(row.get(4)?),
            ip_allowlist: Vec::new(),
            monthly_allowance_minutes: row.get(6)?,
            created_at_ms: row.get(7)?,
            live_keys: row.get(8)?,
            requests_per_second: row.get(9)?,
            faults: decode_faults(row.get::<_, Option<String>>(10)?.as_deref()),
        },
        row.get(5)?,
    ))
}

fn decode_allowlist(text: &str) -> Result<Vec<IpNet>, DbError> {
    let entries: Vec<String> =
        serde_json::from_str(text).map_err(|e| DbError::Corrupt(format!("ip_allowlist: {e}")))?;
    entries
        .iter()
        .map(|entry| {
            entry
                .parse::<IpNet>()
                .map_err(|e| DbError::Corrupt(format!("ip_allowlist entry {entry:?}: {e}")))
        })
        .collect()
}

/// Reads stored faults; none when unset (or unreadable: faults are never active by accident).
pub(super) fn decode_faults(text: Option<&str>) -> Faults {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

fn encode_faults(faults: &Faults) -> Option<String> {
    (!faults.is_off())
        .then(|| serde_json::to_string(faults).ok())
        .flatten()
}

fn encode_allowlist(nets: &[IpNet]) -> String {
    let entries: Vec<String> = nets.iter().map(ToString::to_string).collect();
    serde_json::Value::from(entries).to_string()
}

fn finish(pair: (TenantRecord, String)) -> Result<TenantRecord, DbError> {
    let (mut record, allowlist) = pair;
    record.ip_allowlist = decode_allowlist(&allowlist)?;
    Ok(record)
}

fn load_tenant(conn: &Connection, tenant_id: &str) -> Result<Option<TenantRecord>, DbError> {
    let sql = format!("SELECT {TENANT_COLUMNS} FROM tenants t WHERE t.id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([tenant_id], tenant_from_row)
        .optional()?
        .map(finish)
        .transpose()
}

impl Db {
    /// Creates a tenant with its first API key.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn create_tenant(&self, tenant: NewTenant) -> Result<(), DbError> {
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO tenants (id, name, active, webhook_url, signing_secret, ip_allowlist,
                     monthly_allowance_minutes, created_at, faults)
                 VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    tenant.id,
                    tenant.name,
                    tenant.webhook_url,
                    tenant.signing_secret.expose(),
                    encode_allowlist(&tenant.ip_allowlist),
                    tenant.monthly_allowance_minutes,
                    tenant.now_ms,
                    encode_faults(&tenant.faults)
                ],
            )?;
            tx.execute(
                "INSERT INTO api_keys (key_hash, tenant_id, created_at) VALUES (?1, ?2, ?3)",
                params![tenant.key_hash, tenant.id, tenant.now_ms],
            )?;
            Ok(())
        })
        .await
    }

    /// Every tenant, oldest first.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn list_tenants(&self) -> Result<Vec<TenantRecord>, DbError> {
        self.read(|conn| {
            let sql = format!("SELECT {TENANT_COLUMNS} FROM tenants t ORDER BY t.created_at, t.id");
            let mut stmt = conn.prepare(&sql)?;
            let rows = stmt.query_map([], tenant_from_row)?;
            let mut tenants = Vec::new();
            for row in rows {
                tenants.push(finish(row?)?);
            }
            Ok(tenants)
        })
        .await
    }

    /// One tenant, read fresh.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn tenant(&self, tenant_id: &str) -> Result<Option<TenantRecord>, DbError> {
        let tenant_id = tenant_id.to_owned();
        self.read(move |conn| load_tenant(conn, &tenant_id)).await
    }

    /// Looks a presented key up by its hash, with its tenant's state.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn authenticate(&self, key_hash: String) -> Result<Option<AuthRecord>, DbError> {
        self.read(move |conn| {
            let row = conn
                .prepare_cached(AUTHENTICATE)?
                .query_row([key_hash], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, bool>(1)?,
                        row.get::<_, bool>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, Option<i64>>(4)?,
                        row.get::<_, Option<String>>(5)?,
                    ))
                })
                .optional()?;
            row.map(
                |(tenant_id, revoked, tenant_active, allowlist, requests_per_second, faults)| {
                    Ok(AuthRecord {
                        tenant_id,
                        key_status: if revoked {
                            ApiKeyStatus::Revoked
                        } else {
                            ApiKeyStatus::Live
                        },
                        tenant_active,
                        ip_allowlist: decode_allowlist(&allowlist)?,
                        requests_per_second,
                        faults: decode_faults(faults.as_deref()),
                    })
                },
            )
            .transpose()
        })
        .await
    }

    /// Adds an API key to a tenant. Returns `false` for an unknown tenant.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn add_api_key(
        &self,
        tenant_id: &str,
        key_hash: String,
        now_ms: i64,
    ) -> Result<bool, DbError> {
        let tenant_id = tenant_id.to_owned();
        self.write(move |tx| {
            if load_tenant(tx, &tenant_id)?.is_none() {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO api_keys (key_hash, tenant_id, created_at) VALUES (?1, ?2, ?3)",
                params![key_hash, tenant_id, now_ms],
            )?;
            Ok(true)
        })
        .await
    }

    /// Revokes every live key of a tenant; returns how many, or `None` for an unknown tenant.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn revoke_api_keys(
        &self,
        tenant_id: &str,
        now_ms: i64,
    ) -> Result<Option<usize>, DbError> {
        let tenant_id = tenant_id.to_owned();
        self.write(move |tx| {
            if load_tenant(tx, &tenant_id)?.is_none() {
                return Ok(None);
            }
            let revoked = tx.execute(
                "UPDATE api_keys SET revoked_at = ?2 WHERE tenant_id = ?1 AND revoked_at IS NULL",
                params![tenant_id, now_ms],
            )?;
            void_tokens(tx, &tenant_id, now_ms)?;
            Ok(Some(revoked))
        })
        .await
    }

    /// Applies `change` to one tenant and returns the updated record, or `None` when the
    /// tenant is unknown.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn update_tenant(
        &self,
        tenant_id: &str,
        change: TenantChange,
    ) -> Result<Option<TenantRecord>, DbError> {
        let tenant_id = tenant_id.to_owned();
        self.write(move |tx| {
            let changed = match change {
                TenantChange::Active(active) => {
                    if !active {
                        let now = chrono::Utc::now().timestamp_millis();
                        void_tokens(tx, &tenant_id, now)?;
                    }
                    tx.execute(
                        "UPDATE tenants SET active = ?2 WHERE id = ?1",
                        params![tenant_id, active],
                    )?
                }
                TenantChange::WebhookUrl(url) => tx.execute(
                    "UPDATE tenants SET webhook_url = ?2 WHERE id = ?1",
                    params![tenant_id, url],
                )?,
                TenantChange::SigningSecret(secret) => tx.execute(
                    "UPDATE tenants SET signing_secret = ?2 WHERE id = ?1",
                    params![tenant_id, secret.expose()],
                )?,
                TenantChange::IpAllowlist(nets) => tx.execute(
                    "UPDATE tenants SET ip_allowlist = ?2 WHERE id = ?1",
                    params![tenant_id, encode_allowlist(&nets)],
                )?,
                TenantChange::MonthlyAllowanceMinutes(minutes) => tx.execute(
                    "UPDATE tenants SET monthly_allowance_minutes = ?2 WHERE id = ?1",
                    params![tenant_id, minutes],
                )?,
                TenantChange::RequestsPerSecond(limit) => tx.execute(
                    "UPDATE tenants SET requests_per_second = ?2 WHERE id = ?1",
                    params![tenant_id, limit],
                )?,
                TenantChange::Faults(faults) => tx.execute(
                    "UPDATE tenants SET faults = ?2 WHERE id = ?1",
                    params![tenant_id, encode_faults(&faults)],
                )?,
            };
            if changed == 0 {
                return Ok(None);
            }
            load_tenant(tx, &tenant_id)
        })
        .await
    }
}

/// Voids the tenant's unspent session tokens: minted before its keys were revoked or it was
/// deactivated, they must not start a call afterwards (redeem answers `INVALID_TOKEN`).
fn void_tokens(tx: &Connection, tenant_id: &str, now_ms: i64) -> rusqlite::Result<usize> {
    tx.execute(
        "UPDATE session_tokens SET voided_at = ?2
         WHERE tenant_id = ?1 AND spent_at IS NULL AND voided_at IS NULL",
        params![tenant_id, now_ms],
    )
}

/// One operator change to a tenant.
#[derive(Debug)]
pub enum TenantChange {
    /// Activate or deactivate.
    Active(bool),
    /// Set or clear the webhook URL (already validated).
    WebhookUrl(Option<String>),
    /// Replace the signing secret.
    SigningSecret(SigningSecret),
    /// Replace the IP allowlist (empty: any address).
    IpAllowlist(Vec<IpNet>),
    /// Set or clear the monthly allowance.
    MonthlyAllowanceMinutes(Option<i64>),
    /// Set or clear the request rate limit (requests a second).
    RequestsPerSecond(Option<i64>),
    /// Replace the injected faults (all zero: none).
    Faults(Faults),
}

#[cfg(test)]
mod tests {
    use rusqlite::StatementStatus;

    use super::{AUTHENTICATE, Db};
    use crate::credentials::ApiKey;
    use crate::db::NewTenant;

    /// Each request looks its key up; the cached statement must run as compiled, not be parsed
    /// and planned again because a new key hash was bound (what SQLite does for a statement
    /// whose plan may depend on bound values, unless the planner's stability guarantee is on).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_key_lookup_is_compiled_once_per_connection() {
        let dir = tempfile::tempdir().expect("dir");
        let db = Db::open(dir.path().join("auth.db")).await.expect("open");
        let key = ApiKey::generate();
        db.create_tenant(NewTenant::new("t", key.hash()))
            .await
            .expect("tenant");
        for _ in 0..3 {
            let found = db.authenticate(key.hash()).await.expect("lookup");
            assert!(found.is_some());
            let other = ApiKey::generate();
            assert!(db.authenticate(other.hash()).await.expect("lookup").is_none());
        }
        let recompiled = db
            .read(|conn| Ok(conn.prepare_cached(AUTHENTICATE)?.get_status(StatementStatus::RePrepare)))
            .await
            .expect("status");
        assert_eq!(recompiled, 0, "the key lookup was recompiled on a new binding");
    }
}
