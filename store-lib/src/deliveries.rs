//! The ledger of verified webhook deliveries that `webhook serve` received: one row per
//! `X-Service-Webhook-Id`, with the raw body. Reconcile reads it to tell a call whose webhook
//! arrived from one it had to recover.

use svc_contract::CallScored;

use svc_client::RawCallDetail;

use super::calls::{Writer, store_call};
use super::sql::{Sql, params};
use super::{Store, StoreError};
use svc_reconcile::Stored;

/// A verified delivery to record.
#[derive(Debug, Clone)]
pub struct NewDelivery<'a> {
    /// `X-Service-Webhook-Id`.
    pub webhook_id: &'a str,
    /// The decoded body.
    pub event: &'a CallScored,
    /// The raw body, exactly as received and verified.
    pub body: &'a [u8],
    /// When it was verified (contract timestamp form).
    pub verified_at: &'a str,
}

impl Store {
    /// Records a verified delivery once per webhook id; returns false for an id already
    /// recorded. A successful event marks its call, if stored and awaiting it, as delivered.
    ///
    /// # Errors
    /// A database error.
    pub fn record_delivery(&self, delivery: &NewDelivery<'_>) -> Result<bool, StoreError> {
        self.write(|db| insert_delivery(db, delivery))
    }

    /// Records a verified delivery (as [`Store::record_delivery`]) and stores its call's
    /// detail, read after it, in one transaction: what `svc_reconcile::webhook::SinkHandler`
    /// does through [`svc_reconcile::Sink::store_delivered`].
    ///
    /// # Errors
    /// A database error (neither is stored).
    pub fn record_delivered_call(
        &self,
        delivery: &NewDelivery<'_>,
        detail: &RawCallDetail,
        writer: &Writer,
    ) -> Result<Stored, StoreError> {
        self.write(|db| {
            insert_delivery(db, delivery)?;
            store_call(db, None, detail, writer)
        })
    }

    /// Records that a receiver writes to this store from `at` on (only the first time): calls
    /// scored since then are expected to have their webhook in the ledger.
    ///
    /// # Errors
    /// A database error.
    pub fn mark_ledger_open(&self, at: &str) -> Result<(), StoreError> {
        self.write(|db| {
            db.execute(
                "INSERT INTO store_meta (key, value) VALUES ('ledger_since', $1)
                 ON CONFLICT DO NOTHING",
                params![at],
            )
            .map(drop)
        })
    }

    /// Since when a receiver writes to this store (unix ms): set when `webhook serve` first
    /// started on it, or at its first delivery. Calls scored before then were not expected to
    /// have their webhook in the ledger.
    ///
    /// # Errors
    /// A database error.
    pub fn ledger_since_ms(&self) -> Result<Option<i64>, StoreError> {
        let since = self.read(|db| {
            db.query_opt(
                "SELECT value FROM store_meta WHERE key = 'ledger_since'",
                &[],
            )?
            .map(|row| row.text(0))
            .transpose()
        })?;
        Ok(svc_reconcile::time::ms(since.as_deref()))
    }

    /// How many deliveries are recorded under `webhook_id` (0 or 1).
    ///
    /// # Errors
    /// A database error.
    pub fn delivery_count(&self, webhook_id: &str) -> Result<u64, StoreError> {
        self.read(|db| {
            db.query_one(
                "SELECT COUNT(*) FROM deliveries WHERE webhook_id = $1",
                params![webhook_id],
            )?
            .count(0)
        })
    }
}

/// Inserts a delivery into the ledger (once per webhook id); true when it was new.
fn insert_delivery(db: &mut dyn Sql, delivery: &NewDelivery<'_>) -> Result<bool, StoreError> {
    let event = delivery.event;
    let inserted = db.execute(
        "INSERT INTO deliveries (webhook_id, call_id, source, success, reason,
            reason_message, occurred_at, verified_at, body)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
        params![
            delivery.webhook_id,
            &event.call_id,
            event.source.as_str(),
            i64::from(event.success),
            event.reason.as_ref().map(|r| r.as_str().to_owned()),
            &event.reason_message,
            &event.occurred_at,
            delivery.verified_at,
            String::from_utf8_lossy(delivery.body).into_owned(),
        ],
    )? > 0;
    if inserted {
        db.execute(
            "INSERT INTO store_meta (key, value) VALUES ('ledger_since', $1)
             ON CONFLICT DO NOTHING",
            params![delivery.verified_at],
        )?;
    }
    if inserted && event.success {
        db.execute(
            "UPDATE calls SET delivery = 'webhook' WHERE id = $1 AND delivery = 'awaiting'",
            params![&event.call_id],
        )?;
    }
    Ok(inserted)
}
