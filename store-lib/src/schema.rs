//! The store's schema as a list of migrations. The store records the number of migrations
//! applied (`store_meta.schema_version`); opening applies the missing ones in one transaction
//! and refuses a store with more than this build knows. Append a migration, never edit one.

/// What `store_meta.format` says in every store, so that another SQLite file is recognised.
pub(super) const FORMAT: &str = "svc-cli-store";

/// The table that marks a file as a store; created with the first migration.
pub(super) const META: &str = "
CREATE TABLE IF NOT EXISTS store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);";

/// Every migration, in order; the schema version is how many have been applied.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: calls, the webhook ledger, the change log, sync state and runs.
    "
    -- One row per scored call: the list row and the detail as the service sent them, and
    -- the columns the store is queried by. Times are as the service wrote them; *_ms are
    -- unix milliseconds. listed_ms is the time GET /calls windows the call by (endedAt for
    -- practice calls, startedAt for real calls). delivery says how the call reached the
    -- store: its webhook was received ('webhook'), reconcile stored it and its webhook may
    -- still come ('awaiting'), reconcile stored it and its webhook never came ('recovered'),
    -- or a first run stored it from history ('backfill').
    CREATE TABLE calls (
        id                 TEXT PRIMARY KEY,
        source             TEXT NOT NULL,
        agent_id           TEXT,
        agency_id          TEXT,
        platform_agent_id  TEXT,
        platform_agency_id TEXT,
        started_at         TEXT,
        ended_at           TEXT,
        scored_at          TEXT,
        updated_at         TEXT,
        scored_ms          INTEGER,
        listed_ms          INTEGER,
        overall_score      REAL,
        score_json         TEXT NOT NULL,
        row_json           TEXT,
        detail_json        TEXT NOT NULL,
        delivery           TEXT NOT NULL
                           CHECK (delivery IN ('webhook', 'awaiting', 'recovered', 'backfill')),
        recovered_run      INTEGER,
        recovered_at       TEXT,
        first_seen_at      TEXT NOT NULL,
        first_seen_by      TEXT NOT NULL,
        first_seen_run     INTEGER,
        refreshed_at       TEXT NOT NULL
    );
    CREATE INDEX calls_by_listing ON calls (source, listed_ms);
    CREATE INDEX calls_by_agent ON calls (agent_id);
    CREATE INDEX calls_by_agency ON calls (agency_id);
    CREATE INDEX calls_awaiting ON calls (scored_ms) WHERE delivery = 'awaiting';

    -- Every verified webhook delivery received by `webhook serve`, once per webhook id.
    CREATE TABLE deliveries (
        webhook_id     TEXT PRIMARY KEY,
        call_id        TEXT NOT NULL,
        source         TEXT NOT NULL,
        success        INTEGER NOT NULL,
        reason         TEXT,
        reason_message TEXT,
        occurred_at    TEXT,
        verified_at    TEXT NOT NULL,
        body           TEXT NOT NULL
    );
    CREATE INDEX deliveries_by_call ON deliveries (call_id);

    -- Each change of a stored call's score, scoredAt or updatedAt that a run found.
    CREATE TABLE score_changes (
        id          INTEGER PRIMARY KEY,
        call_id     TEXT NOT NULL,
        run_id      INTEGER,
        found_at    TEXT NOT NULL,
        before_json TEXT NOT NULL,
        after_json  TEXT NOT NULL
    );
    CREATE INDEX score_changes_by_call ON score_changes (call_id);

    -- Per source: every call listed up to the watermark is stored.
    CREATE TABLE sync_state (
        source          TEXT PRIMARY KEY,
        watermark       TEXT,
        last_run_id     INTEGER,
        last_run_at     TEXT,
        last_outcome    TEXT,
        last_success_at TEXT
    );

    -- One row per reconcile run, with its report.
    CREATE TABLE runs (
        id          INTEGER PRIMARY KEY,
        started_at  TEXT NOT NULL,
        finished_at TEXT,
        pid         INTEGER NOT NULL,
        options     TEXT NOT NULL,
        outcome     TEXT NOT NULL CHECK (outcome IN ('running', 'ok', 'failed', 'interrupted')),
        exit_code   INTEGER,
        report      TEXT
    );
    ",
    // 2: listed calls whose detail could not be stored, retried by later runs.
    "
    CREATE TABLE call_failures (
        call_id         TEXT PRIMARY KEY,
        source          TEXT NOT NULL,
        row_json        TEXT NOT NULL,
        error           TEXT NOT NULL,
        http_status     INTEGER,
        attempts        INTEGER NOT NULL,
        first_failed_at TEXT NOT NULL,
        last_failed_at  TEXT NOT NULL,
        last_run_id     INTEGER
    );
    ",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;
