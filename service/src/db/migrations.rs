//! Versioned schema migrations, applied in order and recorded in `PRAGMA user_version`.
//!
//! Later issues append new entries to [`MIGRATIONS`]; an applied entry is never edited.

use rusqlite::Connection;

use super::DbError;

/// The schema, one entry per version (entry `i` brings the database to version `i + 1`).
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: tenants, API keys, service secrets, agencies, agents.
    r#"
    CREATE TABLE service_secrets (
        name  TEXT PRIMARY KEY,
        value BLOB NOT NULL
    ) STRICT;

    CREATE TABLE tenants (
        id                        TEXT PRIMARY KEY,
        name                      TEXT NOT NULL,
        active                    INTEGER NOT NULL DEFAULT 1,
        webhook_url               TEXT,
        signing_secret            TEXT NOT NULL,
        ip_allowlist              TEXT NOT NULL DEFAULT '[]',
        monthly_allowance_minutes INTEGER,
        created_at                INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE api_keys (
        key_hash   TEXT PRIMARY KEY,
        tenant_id  TEXT NOT NULL REFERENCES tenants(id),
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
    ) STRICT;
    CREATE INDEX api_keys_by_tenant ON api_keys(tenant_id);

    CREATE TABLE agencies (
        seq                INTEGER PRIMARY KEY AUTOINCREMENT,
        id                 TEXT NOT NULL UNIQUE,
        tenant_id          TEXT NOT NULL REFERENCES tenants(id),
        platform_agency_id TEXT NOT NULL,
        name               TEXT NOT NULL,
        created_at         INTEGER NOT NULL,
        updated_at         INTEGER NOT NULL
    ) STRICT;
    CREATE UNIQUE INDEX agencies_platform_id ON agencies(tenant_id, platform_agency_id);

    CREATE TABLE agents (
        seq               INTEGER PRIMARY KEY AUTOINCREMENT,
        id                TEXT NOT NULL UNIQUE,
        tenant_id         TEXT NOT NULL REFERENCES tenants(id),
        agency_id         TEXT NOT NULL REFERENCES agencies(id),
        first_name        TEXT NOT NULL,
        last_name         TEXT NOT NULL,
        email             TEXT,
        email_lower       TEXT,
        npn               TEXT,
        platform_agent_id TEXT,
        created_at        INTEGER NOT NULL
    ) STRICT;
    CREATE UNIQUE INDEX agents_platform_id ON agents(tenant_id, platform_agent_id);
    CREATE UNIQUE INDEX agents_npn ON agents(tenant_id, npn);
    CREATE UNIQUE INDEX agents_email ON agents(tenant_id, email_lower);
    CREATE INDEX agents_by_tenant ON agents(tenant_id, seq);
    CREATE INDEX agents_by_agency ON agents(tenant_id, agency_id, seq);
    "#,
    // 2: practice calls, session tokens and the webhook outbox.
    r#"
    CREATE TABLE session_tokens (
        jti TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        spent_at INTEGER
    );
    CREATE TABLE calls (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        tenant_id TEXT NOT NULL,
        source TEXT NOT NULL,
        state TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        agency_id TEXT NOT NULL,
        platform_agent_id TEXT,
        platform_agency_id TEXT,
        external_user_id TEXT,
        external_agency_id TEXT,
        drill_key TEXT,
        difficulty TEXT,
        persona_name TEXT,
        persona_seed INTEGER,
        session_id TEXT UNIQUE,
        ticket_hash TEXT,
        ticket_used_at INTEGER,
        started_at INTEGER,
        ended_at INTEGER,
        duration_sec INTEGER NOT NULL DEFAULT 0,
        list_at INTEGER,
        scored_at INTEGER,
        transcript TEXT,
        score TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX calls_listing ON calls (tenant_id, source, list_at DESC, id DESC) WHERE state = 'scored';
    CREATE INDEX calls_by_agent ON calls (tenant_id, agent_id, list_at DESC, id DESC) WHERE state = 'scored';
    CREATE INDEX calls_usage ON calls (tenant_id, ended_at);
    CREATE INDEX calls_pending ON calls (state) WHERE state IN ('live', 'ended', 'scoring');

    CREATE TABLE webhook_deliveries (
        id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        body TEXT NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER,
        lease_until INTEGER,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX webhook_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
    CREATE TABLE webhook_attempts (
        delivery_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        attempted_at INTEGER NOT NULL,
        url TEXT,
        status INTEGER,
        latency_ms INTEGER NOT NULL,
        error TEXT,
        PRIMARY KEY (delivery_id, attempt)
    );
    "#,
    // 3: real calls from a dialer: the agencies switched on for them, the dialer's call id,
    // disposition and product line of each real call, and its archived recording.
    r#"
    ALTER TABLE agencies ADD COLUMN real_calls INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE agencies ADD COLUMN third_party_dialer INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE agencies ADD COLUMN rubric TEXT NOT NULL DEFAULT 'default';
    ALTER TABLE calls ADD COLUMN dialer_call_id TEXT;
    ALTER TABLE calls ADD COLUMN disposition TEXT;
    ALTER TABLE calls ADD COLUMN product_line TEXT;
    ALTER TABLE calls ADD COLUMN audio_file TEXT;
    ALTER TABLE calls ADD COLUMN audio_archived_at INTEGER;
    CREATE UNIQUE INDEX calls_by_dialer_id ON calls (agency_id, dialer_call_id)
        WHERE dialer_call_id IS NOT NULL;
    CREATE INDEX calls_archived_audio ON calls (audio_archived_at) WHERE audio_file IS NOT NULL;
    "#,
    // 4: fair webhook delivery: when each tenant's delivery was last taken up, for round-robin.
    r#"
    CREATE TABLE webhook_turns (
        tenant_id       TEXT PRIMARY KEY,
        last_claimed_at INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX webhook_leased ON webhook_deliveries (tenant_id, lease_until) WHERE state = 'pending';
    "#,
    // 5: session tokens voided when their tenant is deactivated or its keys revoked, and the
    // optional per-tenant request rate limit.
    r#"
    ALTER TABLE session_tokens ADD COLUMN voided_at INTEGER;
    ALTER TABLE tenants ADD COLUMN requests_per_second INTEGER;
    CREATE INDEX session_tokens_outstanding ON session_tokens (tenant_id, expires_at)
        WHERE spent_at IS NULL AND voided_at IS NULL;
    "#,
    // 6: fault injection per tenant (JSON of `crate::faults::Faults`; NULL: none).
    r#"
    ALTER TABLE tenants ADD COLUMN faults TEXT;
    "#,
    // 7: the faults applied to each webhook attempt (`crate::faults::AppliedFault` names,
    // comma-separated; NULL: none), for the sandbox's listing of what it sent.
    r#"
    ALTER TABLE webhook_attempts ADD COLUMN faults TEXT;
    "#,
    // 8: resends the operator asks for (`svc-cli sandbox resend`): queued here for the running
    // service's outbox worker, each made once as its own attempt, marked in the attempt log.
    r#"
    ALTER TABLE webhook_attempts ADD COLUMN resend INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE webhook_resends (
        seq          INTEGER PRIMARY KEY AUTOINCREMENT,
        delivery_id  TEXT NOT NULL,
        tenant_id    TEXT NOT NULL,
        with_faults  INTEGER NOT NULL,
        requested_at INTEGER NOT NULL,
        lease_until  INTEGER,
        attempt      INTEGER
    ) STRICT;
    CREATE INDEX webhook_resends_due ON webhook_resends (requested_at) WHERE attempt IS NULL;
    "#,
    // 9: the W3C trace context of the span that queued each delivery (`00-<trace>-<span>-<flags>`;
    // NULL: not traced), so that every attempt, a retry after a restart included, joins the
    // trace of the call's scoring.
    r#"
    ALTER TABLE webhook_deliveries ADD COLUMN traceparent TEXT;
    "#,
];

/// Brings `conn` up to the latest schema version inside one transaction.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), DbError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let current: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    let current = usize::try_from(current).map_err(|_| DbError::SchemaTooNew(current))?;
    if current > MIGRATIONS.len() {
        return Err(DbError::SchemaTooNew(current as i64));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (index + 1) as i64)?;
    }
    tx.commit()?;
    Ok(())
}
