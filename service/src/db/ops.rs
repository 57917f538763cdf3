//! SQL of the operations gauges (`GET /metrics` on `--metrics-listen`): per tenant, the
//! webhook deliveries still pending and the practice calls live now.

use super::{Db, DbError};

/// The gauges of one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantGauges {
    /// The tenant.
    pub tenant_id: String,
    /// Deliveries waiting for their first attempt or their retry.
    pub outbox_pending: i64,
    /// Practice calls live now.
    pub live_calls: i64,
}

impl Db {
    /// The gauges of every tenant (zeros included, so a gauge falls back to 0).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn ops_gauges(&self) -> Result<Vec<TenantGauges>, DbError> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT t.id,
                    (SELECT COUNT(*) FROM webhook_deliveries d
                     WHERE d.tenant_id = t.id AND d.state = 'pending'),
                    (SELECT COUNT(*) FROM calls c WHERE c.tenant_id = t.id AND c.state = 'live')
                 FROM tenants t ORDER BY t.id",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(TenantGauges {
                    tenant_id: r.get(0)?,
                    outbox_pending: r.get(1)?,
                    live_calls: r.get(2)?,
                })
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
    }
}
