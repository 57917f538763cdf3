//! The crate's tables and functions in PostgreSQL: `svc_receiver_schema` records the version
//! applied; opening creates what is missing in one transaction under an advisory lock, so
//! replicas starting at once create it exactly once, and refuses a database migrated by a
//! newer build. Append the next migrations, never edit a released one.
//!
//! Nothing here trusts the environment the crate runs in:
//! - every object is named with the crate's schema, in the migration and in every statement
//!   the crate sends later, so a table or function of the same name elsewhere in a
//!   connection's `search_path` (a schema named after the receiver's role, planted by another
//!   role, is first in the default path) is never taken for the crate's;
//! - the crate's functions run with `search_path` pinned to `pg_catalog`, the crate's schema
//!   and `pg_temp`, in that order, and name the built-ins they call with `pg_catalog` (an
//!   overload planted in a schema of the caller's path, such as `hashtextextended(text, int4)`
//!   against a `0` literal, would otherwise win: PostgreSQL weighs overloads of different
//!   argument types equally whatever their schema);
//! - before it uses or creates anything, opening checks who owns the schema, the tables and
//!   the functions of the crate's names already there: each must belong to a role the
//!   connecting role is a member of (itself, usually), to a superuser, or to the database's
//!   owner. Another role's object (a version table saying "up to date", a function every
//!   accept would run as the receiver's role) is refused with an error naming it and its owner.

use std::future::Future;

/// The advisory lock key migrations are applied under ("svc_rcv1").
const MIGRATION_LOCK: i64 = 0x7376_635f_7263_7631;

/// The crate's tables, as the ownership check looks for them.
const TABLES: &[&str] = &[
    "svc_receiver_schema",
    "webhook_claims",
    "webhook_claim_signatures",
    "webhook_inbox",
    "webhook_inbox_signatures",
    "webhook_recorded",
];

/// Every migration, in order; the schema version is how many are applied. `{s}` stands for
/// the crate's schema, quoted as an identifier.
const MIGRATIONS: &[&str] = &[
    // 1: the dedup store's claims and signatures, the inbox and its signatures, the ids
    // recorded in tenants' transactions, and the functions that claim, complete and accept
    // a batch in one round trip (the accept keeping each delivery's trace context).
    r#"
    -- One row per remembered webhook id, and one per verified signature (every attempt's),
    -- each kept for the retention from when it was first seen.
    CREATE TABLE {s}.webhook_claims (
        id          TEXT PRIMARY KEY,
        state       TEXT NOT NULL CHECK (state IN ('in_flight', 'released', 'done')),
        lease_until BIGINT NOT NULL,
        claimed_at  BIGINT NOT NULL
    );
    CREATE INDEX webhook_claims_claimed_at ON {s}.webhook_claims (claimed_at);
    CREATE TABLE {s}.webhook_claim_signatures (
        signature BYTEA PRIMARY KEY,
        id        TEXT NOT NULL,
        seen_at   BIGINT NOT NULL
    );
    CREATE INDEX webhook_claim_signatures_seen_at ON {s}.webhook_claim_signatures (seen_at);

    -- The inbox: one row per stored delivery, handed out in due order.
    CREATE TABLE {s}.webhook_inbox (
        seq         BIGINT GENERATED ALWAYS AS IDENTITY,
        id          TEXT PRIMARY KEY,
        body        BYTEA NOT NULL,
        received_at BIGINT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('pending', 'done', 'dead')),
        attempts    INTEGER NOT NULL DEFAULT 0,
        due_at      BIGINT NOT NULL,
        last_error  TEXT,
        -- The sender's W3C trace context the delivery arrived with (NULL: none), so that the
        -- worker's span continues the sender's trace.
        traceparent TEXT
    );
    CREATE INDEX webhook_inbox_due ON {s}.webhook_inbox (due_at, seq) WHERE state = 'pending';
    CREATE INDEX webhook_inbox_done ON {s}.webhook_inbox (received_at) WHERE state = 'done';
    CREATE INDEX webhook_inbox_dead ON {s}.webhook_inbox (seq) WHERE state = 'dead';
    -- Every signature of a stored delivery (the sender signs each attempt afresh). The one
    -- it was stored with (first) is kept as long as the delivery; later attempts' for the
    -- retention.
    CREATE TABLE {s}.webhook_inbox_signatures (
        signature BYTEA PRIMARY KEY,
        id        TEXT NOT NULL,
        seen_at   BIGINT NOT NULL,
        first     BOOLEAN NOT NULL
    );
    CREATE INDEX webhook_inbox_signatures_seen_at ON {s}.webhook_inbox_signatures (seen_at);

    -- One row per delivery a tenant's transaction recorded (`PgRecorder`), keyed by webhook
    -- id, with the verified signature of its attempt when the integration knew it (direct
    -- mode): concurrent transactions recording one id, or one signature (a replay under
    -- another id: the id is not signed), wait on the unique keys. Timed by the database's
    -- clock (the transaction's start), the one clock every replica shares.
    CREATE TABLE {s}.webhook_recorded (
        id          TEXT PRIMARY KEY,
        signature   BYTEA UNIQUE,
        recorded_at TIMESTAMPTZ NOT NULL DEFAULT pg_catalog.now()
    );
    CREATE INDEX webhook_recorded_at ON {s}.webhook_recorded (recorded_at);

    -- Claims p_id with p_signature: 'replayed', 'new', 'duplicate' or 'in_flight'. The
    -- signature's row is locked first, then the id's, so concurrent claims never deadlock, and
    -- of concurrent claims of one id exactly one inserts its row (the others wait for it).
    CREATE FUNCTION {s}.svc_receiver_claim(
        p_id TEXT, p_signature BYTEA, p_now BIGINT, p_cutoff BIGINT, p_lease_until BIGINT
    ) RETURNS TEXT LANGUAGE plpgsql SET search_path = pg_catalog, {s}, pg_temp AS $$
    DECLARE
        owner TEXT;
        claim {s}.webhook_claims%ROWTYPE;
    BEGIN
        -- A signature remembered under another id is a replay, whatever this id's state; a
        -- new one is remembered under this id, whatever the answer.
        INSERT INTO {s}.webhook_claim_signatures AS s (signature, id, seen_at)
        VALUES (p_signature, p_id, p_now)
        ON CONFLICT (signature) DO UPDATE SET
            id = CASE WHEN s.seen_at <= p_cutoff THEN EXCLUDED.id ELSE s.id END,
            seen_at = CASE WHEN s.seen_at <= p_cutoff THEN EXCLUDED.seen_at ELSE s.seen_at END
        RETURNING s.id INTO owner;
        IF owner <> p_id THEN
            RETURN 'replayed';
        END IF;
        LOOP
            INSERT INTO {s}.webhook_claims (id, state, lease_until, claimed_at)
            VALUES (p_id, 'in_flight', p_lease_until, p_now)
            ON CONFLICT (id) DO NOTHING;
            IF FOUND THEN
                RETURN 'new';
            END IF;
            SELECT * INTO claim FROM {s}.webhook_claims WHERE id = p_id FOR UPDATE;
            EXIT WHEN FOUND;
        END LOOP;
        IF claim.claimed_at <= p_cutoff THEN
            UPDATE {s}.webhook_claims
            SET state = 'in_flight', lease_until = p_lease_until, claimed_at = p_now
            WHERE id = p_id;
            RETURN 'new';
        ELSIF claim.state = 'done' THEN
            RETURN 'duplicate';
        ELSIF claim.state = 'in_flight' AND claim.lease_until > p_now THEN
            RETURN 'in_flight';
        END IF;
        UPDATE {s}.webhook_claims SET state = 'in_flight', lease_until = p_lease_until
        WHERE id = p_id;
        RETURN 'new';
    END
    $$;

    -- Stores a verified delivery: 'stored', 'duplicate' or 'replayed'. Of concurrent accepts
    -- of one id (or one signature) exactly one inserts; the others wait for its commit.
    CREATE FUNCTION {s}.svc_receiver_inbox_accept(
        p_id TEXT, p_signature BYTEA, p_body BYTEA, p_now BIGINT
    ) RETURNS TEXT LANGUAGE plpgsql SET search_path = pg_catalog, {s}, pg_temp AS $$
    DECLARE
        owner TEXT;
    BEGIN
        IF EXISTS (SELECT 1 FROM {s}.webhook_inbox WHERE id = p_id) THEN
            -- Another attempt of a stored delivery: remember its signature too.
            INSERT INTO {s}.webhook_inbox_signatures (signature, id, seen_at, first)
            VALUES (p_signature, p_id, p_now, false) ON CONFLICT (signature) DO NOTHING;
            RETURN 'duplicate';
        END IF;
        INSERT INTO {s}.webhook_inbox_signatures (signature, id, seen_at, first)
        VALUES (p_signature, p_id, p_now, true) ON CONFLICT (signature) DO NOTHING;
        IF NOT FOUND THEN
            SELECT id INTO owner FROM {s}.webhook_inbox_signatures WHERE signature = p_signature;
            IF owner IS NOT NULL AND owner <> p_id THEN
                RETURN 'replayed';
            END IF;
        END IF;
        INSERT INTO {s}.webhook_inbox (id, body, received_at, state, due_at)
        VALUES (p_id, p_body, p_now, 'pending', p_now)
        ON CONFLICT (id) DO NOTHING;
        IF FOUND THEN
            RETURN 'stored';
        END IF;
        RETURN 'duplicate';
    END
    $$;

    -- One global lock order for a batch. Each row locks its signature's row, then its id's; a
    -- second copy of an id in one batch would thus lock a signature row after the id row,
    -- while another replica's first copy with that signature took them the other way: a
    -- deadlock. A batch first takes a transaction-level advisory lock per distinct key (each
    -- id and each signature, hashed to 64 bits) in ascending order, before it touches any
    -- row, in one statement: the keys sorted, then locked by an aggregate that reads them in
    -- that order (a subquery with ORDER BY is never merged into the query around it). Two
    -- batches that share a row share its key and take their common keys in the same order,
    -- so they never wait for each other in a cycle; a hash collision only makes two unrelated
    -- rows wait for each other, in that same order.
    CREATE FUNCTION {s}.svc_receiver_lock_keys(p_ids TEXT[], p_signatures BYTEA[])
    RETURNS VOID LANGUAGE plpgsql SET search_path = pg_catalog, {s}, pg_temp AS $$
    BEGIN
        PERFORM pg_catalog.count(pg_catalog.pg_advisory_xact_lock(key)) FROM (
            SELECT key FROM (
                SELECT pg_catalog.hashtextextended(id, 0::BIGINT) AS key
                FROM pg_catalog.unnest(p_ids) AS id
                UNION
                SELECT pg_catalog.hashtextextended(pg_catalog.encode(signature, 'hex'), 1::BIGINT)
                FROM pg_catalog.unnest(p_signatures) AS signature WHERE signature IS NOT NULL
            ) AS keys
            ORDER BY key
        ) AS ordered;
    END
    $$;

    -- Accepts every row (ids, signatures, bodies and times in step), in array order, each as
    -- svc_receiver_inbox_accept does, in one transaction: client-side group commit.
    CREATE FUNCTION {s}.svc_receiver_inbox_accept_many(
        p_ids TEXT[], p_signatures BYTEA[], p_bodies BYTEA[], p_nows BIGINT[]
    ) RETURNS TEXT[] LANGUAGE plpgsql SET search_path = pg_catalog, {s}, pg_temp AS $$
    DECLARE
        n INTEGER := coalesce(pg_catalog.cardinality(p_ids), 0);
        answers TEXT[] := '{}';
    BEGIN
        IF coalesce(pg_catalog.cardinality(p_signatures), 0) <> n
           OR coalesce(pg_catalog.cardinality(p_bodies), 0) <> n
           OR coalesce(pg_catalog.cardinality(p_nows), 0) <> n THEN
            RAISE EXCEPTION 'svc_receiver_inbox_accept_many: arrays of different lengths';
        END IF;
        PERFORM {s}.svc_receiver_lock_keys(p_ids, p_signatures);
        FOR i IN 1 .. n LOOP
            answers := pg_catalog.array_append(answers, {s}.svc_receiver_inbox_accept(
                p_ids[i], p_signatures[i], p_bodies[i], p_nows[i]));
        END LOOP;
        RETURN answers;
    END
    $$;

    -- Applies every operation of the dedup store in order: 'claim' (answered as
    -- svc_receiver_claim does, with the row's signature, time, cutoff and lease) or
    -- 'complete' (answered 'done').
    CREATE FUNCTION {s}.svc_receiver_dedup_many(
        p_ops TEXT[], p_ids TEXT[], p_signatures BYTEA[], p_nows BIGINT[], p_cutoffs BIGINT[],
        p_lease_untils BIGINT[]
    ) RETURNS TEXT[] LANGUAGE plpgsql SET search_path = pg_catalog, {s}, pg_temp AS $$
    DECLARE
        n INTEGER := coalesce(pg_catalog.cardinality(p_ids), 0);
        answers TEXT[] := '{}';
    BEGIN
        IF coalesce(pg_catalog.cardinality(p_ops), 0) <> n
           OR coalesce(pg_catalog.cardinality(p_signatures), 0) <> n
           OR coalesce(pg_catalog.cardinality(p_nows), 0) <> n
           OR coalesce(pg_catalog.cardinality(p_cutoffs), 0) <> n
           OR coalesce(pg_catalog.cardinality(p_lease_untils), 0) <> n THEN
            RAISE EXCEPTION 'svc_receiver_dedup_many: arrays of different lengths';
        END IF;
        -- A completion's signature is not one of its row's locks.
        PERFORM {s}.svc_receiver_lock_keys(p_ids, ARRAY(
            SELECT p_signatures[i] FROM pg_catalog.generate_subscripts(p_ops, 1) AS i
            WHERE p_ops[i] = 'claim'));
        FOR i IN 1 .. n LOOP
            IF p_ops[i] = 'claim' THEN
                answers := pg_catalog.array_append(answers, {s}.svc_receiver_claim(
                    p_ids[i], p_signatures[i], p_nows[i], p_cutoffs[i], p_lease_untils[i]));
            ELSIF p_ops[i] = 'complete' THEN
                UPDATE {s}.webhook_claims SET state = 'done' WHERE id = p_ids[i];
                answers := pg_catalog.array_append(answers, 'done'::TEXT);
            ELSE
                RAISE EXCEPTION 'svc_receiver_dedup_many: unknown operation %', p_ops[i];
            END IF;
        END LOOP;
        RETURN answers;
    END
    $$;

    -- Accepts every row as svc_receiver_inbox_accept_many does, then keeps the trace context
    -- (p_traceparents, in step with the other arrays; NULL: none) of each row it stored, in
    -- the same transaction.
    CREATE FUNCTION {s}.svc_receiver_inbox_accept_traced_many(
        p_ids TEXT[], p_signatures BYTEA[], p_bodies BYTEA[], p_nows BIGINT[],
        p_traceparents TEXT[]
    ) RETURNS TEXT[] LANGUAGE plpgsql SET search_path = pg_catalog, {s}, pg_temp AS $$
    DECLARE
        answers TEXT[];
    BEGIN
        IF coalesce(pg_catalog.cardinality(p_traceparents), 0)
           <> coalesce(pg_catalog.cardinality(p_ids), 0) THEN
            RAISE EXCEPTION 'svc_receiver_inbox_accept_traced_many: arrays of different lengths';
        END IF;
        answers := {s}.svc_receiver_inbox_accept_many(p_ids, p_signatures, p_bodies, p_nows);
        UPDATE {s}.webhook_inbox AS i SET traceparent = t.traceparent
        FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_traceparents),
                        pg_catalog.unnest(answers)) AS t (id, traceparent, answer)
        WHERE t.answer = 'stored' AND t.traceparent IS NOT NULL AND i.id = t.id;
        RETURN answers;
    END
    $$;
    "#,
];

/// The schema version this build writes (how many migrations it knows).
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Why the crate's tables could not be brought up to date.
#[derive(Debug)]
pub(super) enum MigrateError {
    /// The server failed a statement, or the connection did: its text, and whether the
    /// database could not be had for now (a server starting or shutting down, refused
    /// connections), so that trying again later may succeed.
    Driver {
        /// What the driver said, with the server's SQLSTATE.
        text: String,
        /// Whether it is worth trying again.
        unavailable: bool,
    },
    /// The database is not one the crate may use as it is: the text says why.
    Refused(String),
}

impl std::fmt::Display for MigrateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Driver { text, .. } | Self::Refused(text) => f.write_str(text),
        }
    }
}

impl From<tokio_postgres::Error> for MigrateError {
    fn from(err: tokio_postgres::Error) -> Self {
        Self::Driver {
            text: svc_postgres::describe_error(&err),
            unavailable: svc_postgres::is_unavailable(&err)
                && !err.code().is_some_and(|code| code.code().starts_with("28")),
        }
    }
}

#[cfg(feature = "sqlx-postgres")]
impl From<sqlx::Error> for MigrateError {
    fn from(err: sqlx::Error) -> Self {
        let code = err
            .as_database_error()
            .and_then(sqlx::error::DatabaseError::code)
            .map(|code| code.into_owned());
        let unavailable = match &code {
            Some(code) => {
                code.starts_with("08")
                    || matches!(code.as_str(), "57P01" | "57P02" | "57P03" | "53300")
            }
            None => matches!(err, sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut),
        };
        Self::Driver {
            text: err.to_string(),
            unavailable,
        }
    }
}

/// A connection the migration runs on, through either driver: statements sent as text (the
/// simple query protocol), and rows read as text.
pub(super) trait Session: Send {
    /// Runs `sql` (one or more statements).
    fn batch(&mut self, sql: &str) -> impl Future<Output = Result<(), MigrateError>> + Send;

    /// Runs one query whose columns are all text, answering its rows.
    fn texts(
        &mut self,
        sql: &str,
    ) -> impl Future<Output = Result<Vec<Vec<Option<String>>>, MigrateError>> + Send;
}

impl Session for tokio_postgres::Client {
    async fn batch(&mut self, sql: &str) -> Result<(), MigrateError> {
        Ok(self.batch_execute(sql).await?)
    }

    async fn texts(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, MigrateError> {
        use tokio_postgres::SimpleQueryMessage;
        Ok(self
            .simple_query(sql)
            .await?
            .iter()
            .filter_map(|message| match message {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_owned))
                        .collect(),
                ),
                _ => None,
            })
            .collect())
    }
}

#[cfg(feature = "sqlx-postgres")]
impl Session for sqlx::PgConnection {
    async fn batch(&mut self, sql: &str) -> Result<(), MigrateError> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut *self)
            .await?;
        Ok(())
    }

    async fn texts(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, MigrateError> {
        use sqlx::Row;
        let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_all(&mut *self)
            .await?;
        let mut texts = Vec::with_capacity(rows.len());
        for row in rows {
            let mut values = Vec::with_capacity(row.len());
            for i in 0..row.len() {
                values.push(row.try_get::<Option<String>, _>(i)?);
            }
            texts.push(values);
        }
        Ok(texts)
    }
}

/// `text` as a SQL string literal, dollar-quoted: whatever it holds (quotes, backslashes), it is
/// read back as it is, with any `standard_conforming_strings`.
fn literal(text: &str) -> Result<String, MigrateError> {
    if text.contains("$svc$") {
        return Err(MigrateError::Refused(format!(
            "{text:?} is not a name this crate uses"
        )));
    }
    Ok(format!("$svc${text}$svc$"))
}

/// The first column of the first row of `sql`'s answer.
async fn one_text(session: &mut impl Session, sql: &str) -> Result<Option<String>, MigrateError> {
    Ok(session
        .texts(sql)
        .await?
        .into_iter()
        .next()
        .and_then(|row| row.into_iter().next())
        .flatten())
}

/// Brings the database up to [`SCHEMA_VERSION`] and answers the schema the crate's tables are
/// in, quoted as an identifier. With a `schema` (a validated identifier, the only schema in
/// the connection's `search_path`), creates it first when missing; without, the schema is the
/// `search_path`'s first that exists (`public`, usually). One transaction, rolled back on any
/// error.
///
/// The transaction is `READ COMMITTED` whatever the database's default: each statement after
/// the lock then sees what a replica that migrated first committed while this one waited for
/// the lock (under `REPEATABLE READ` the snapshot would be the lock statement's own, taken
/// before the wait, and the tables created meanwhile would be created again).
pub(super) async fn run(
    session: &mut impl Session,
    schema: Option<&str>,
) -> Result<String, MigrateError> {
    session
        .batch("BEGIN ISOLATION LEVEL READ COMMITTED")
        .await?;
    match migrate(session, schema).await {
        Ok(quoted) => {
            session.batch("COMMIT").await?;
            Ok(quoted)
        }
        Err(err) => {
            // The connection goes back to its pool: leave no transaction open on it.
            let _ = session.batch("ROLLBACK").await;
            Err(err)
        }
    }
}

/// [`run`]'s work, inside its transaction.
async fn migrate(session: &mut impl Session, schema: Option<&str>) -> Result<String, MigrateError> {
    session
        .batch(&format!(
            "SELECT pg_catalog.pg_advisory_xact_lock({MIGRATION_LOCK})"
        ))
        .await?;
    let current = match schema {
        Some(schema) => {
            session
                .batch(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .await?;
            Some(schema.to_owned())
        }
        None => one_text(session, "SELECT pg_catalog.current_schema()::TEXT").await?,
    };
    let Some(current) = current else {
        return Err(MigrateError::Refused(
            "no schema of the search_path exists to hold the crate's tables: \
             create one, or open the database with a schema of the crate's own"
                .to_owned(),
        ));
    };
    refuse_untrusted_owners(session, &current).await?;
    let quoted = one_text(
        session,
        &format!("SELECT pg_catalog.quote_ident({})", literal(&current)?),
    )
    .await?
    .unwrap_or_default();
    session
        .batch(&format!(
            "CREATE TABLE IF NOT EXISTS {quoted}.svc_receiver_schema (version INTEGER NOT NULL)"
        ))
        .await?;
    let applied = one_text(
        session,
        &format!("SELECT pg_catalog.max(version)::TEXT FROM {quoted}.svc_receiver_schema"),
    )
    .await?
    .and_then(|version| version.parse::<u32>().ok())
    .unwrap_or(0);
    if applied > SCHEMA_VERSION {
        return Err(MigrateError::Refused(format!(
            "the database has svc-receiver schema version {applied} in schema {quoted}, \
             which this build ({SCHEMA_VERSION}) does not know: a newer build made it (upgrade \
             to use it), or a pre-release one whose migrations were squashed into version 1 \
             (drop the crate's tables and let it create them)"
        )));
    }
    for (version, migration) in (1_u32..).zip(MIGRATIONS).skip(applied as usize) {
        session.batch(&migration.replace("{s}", &quoted)).await?;
        session
            .batch(&format!(
                "INSERT INTO {quoted}.svc_receiver_schema (version) VALUES ({version})"
            ))
            .await?;
    }
    Ok(quoted)
}

/// Refuses the schema `schema` (unquoted), or a table or function of the crate's names in it,
/// that belongs to a role the crate does not trust: not one the connecting role is a member
/// of, not a superuser, not the database's owner. The error names the object and its owner.
async fn refuse_untrusted_owners(
    session: &mut impl Session,
    schema: &str,
) -> Result<(), MigrateError> {
    let name = literal(schema)?;
    let tables = TABLES
        .iter()
        .map(|table| format!("'{table}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let rows = session
        .texts(&format!(
            "WITH objects (kind, name, owner) AS (
                 SELECT 'schema', n.nspname::TEXT, n.nspowner
                 FROM pg_catalog.pg_namespace n WHERE n.nspname = {name}
                 UNION ALL
                 SELECT 'table', c.relname::TEXT, c.relowner
                 FROM pg_catalog.pg_class c
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = {name} AND c.relname::TEXT IN ({tables})
                 UNION ALL
                 SELECT 'function', p.oid::pg_catalog.regprocedure::TEXT, p.proowner
                 FROM pg_catalog.pg_proc p
                 JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
                 WHERE n.nspname = {name} AND p.proname::TEXT LIKE 'svc\\_receiver\\_%'
             )
             SELECT o.kind::TEXT, o.name::TEXT, r.rolname::TEXT, CURRENT_USER::TEXT
             FROM objects o JOIN pg_catalog.pg_roles r ON r.oid = o.owner
             WHERE NOT (pg_catalog.pg_has_role(o.owner, 'MEMBER')
                        OR r.rolsuper
                        OR r.rolname = 'pg_database_owner'
                        OR o.owner = (SELECT d.datdba FROM pg_catalog.pg_database d
                                      WHERE d.datname = pg_catalog.current_database()))
             ORDER BY o.kind <> 'schema', o.name"
        ))
        .await?;
    let Some(row) = rows.first() else {
        return Ok(());
    };
    let field = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
    let (kind, name, owner, user) = (field(0), field(1), field(2), field(3));
    let what = if kind == "schema" {
        format!("the schema {name:?}")
    } else {
        format!("the {kind} {name:?} in schema {schema:?}")
    };
    Err(MigrateError::Refused(format!(
        "{what} belongs to role {owner:?}, which the receiver (connected as {user:?}) does not \
         trust: the crate uses only a schema, tables and functions of its own role (or a role \
         it is a member of, a superuser or the database's owner), never one another role made. \
         Drop it, or have its owner hand it over, or open the crate's tables in a schema of \
         their own (PgDatabase::connect_in_schema){}",
        if rows.len() > 1 {
            format!(" ({} such objects in all)", rows.len())
        } else {
            String::new()
        }
    )))
}
