//! The crate's tables in PostgreSQL, as versioned migrations: `svc_receiver_schema` records
//! which are applied; opening applies the missing ones in one transaction under an advisory
//! lock, so replicas starting at once apply each exactly once, and refuses a database migrated
//! by a newer build. Append a migration, never edit one.

use tokio_postgres::{Client, IsolationLevel};

use svc_postgres::describe_error;

/// The advisory lock key migrations are applied under ("svc_rcv1").
const MIGRATION_LOCK: i64 = 0x7376_635f_7263_7631;

/// Every migration, in order; the schema version is how many are applied.
const MIGRATIONS: &[&str] = &[
    // 1: the dedup store's claims and signatures, the inbox and its signatures, and the two
    // functions that claim and accept in one round trip.
    r#"
    -- One row per remembered webhook id, and one per verified signature (every attempt's),
    -- each kept for the retention from when it was first seen.
    CREATE TABLE webhook_claims (
        id          TEXT PRIMARY KEY,
        state       TEXT NOT NULL CHECK (state IN ('in_flight', 'released', 'done')),
        lease_until BIGINT NOT NULL,
        claimed_at  BIGINT NOT NULL
    );
    CREATE INDEX webhook_claims_claimed_at ON webhook_claims (claimed_at);
    CREATE TABLE webhook_claim_signatures (
        signature BYTEA PRIMARY KEY,
        id        TEXT NOT NULL,
        seen_at   BIGINT NOT NULL
    );
    CREATE INDEX webhook_claim_signatures_seen_at ON webhook_claim_signatures (seen_at);

    -- Claims p_id with p_signature: 'replayed', 'new', 'duplicate' or 'in_flight'. The
    -- signature's row is locked first, then the id's, so concurrent claims never deadlock, and
    -- of concurrent claims of one id exactly one inserts its row (the others wait for it).
    CREATE FUNCTION svc_receiver_claim(
        p_id TEXT, p_signature BYTEA, p_now BIGINT, p_cutoff BIGINT, p_lease_until BIGINT
    ) RETURNS TEXT LANGUAGE plpgsql AS $$
    DECLARE
        owner TEXT;
        claim webhook_claims%ROWTYPE;
    BEGIN
        -- A signature remembered under another id is a replay, whatever this id's state; a
        -- new one is remembered under this id, whatever the answer.
        INSERT INTO webhook_claim_signatures AS s (signature, id, seen_at)
        VALUES (p_signature, p_id, p_now)
        ON CONFLICT (signature) DO UPDATE SET
            id = CASE WHEN s.seen_at <= p_cutoff THEN EXCLUDED.id ELSE s.id END,
            seen_at = CASE WHEN s.seen_at <= p_cutoff THEN EXCLUDED.seen_at ELSE s.seen_at END
        RETURNING s.id INTO owner;
        IF owner <> p_id THEN
            RETURN 'replayed';
        END IF;
        LOOP
            INSERT INTO webhook_claims (id, state, lease_until, claimed_at)
            VALUES (p_id, 'in_flight', p_lease_until, p_now)
            ON CONFLICT (id) DO NOTHING;
            IF FOUND THEN
                RETURN 'new';
            END IF;
            SELECT * INTO claim FROM webhook_claims WHERE id = p_id FOR UPDATE;
            EXIT WHEN FOUND;
        END LOOP;
        IF claim.claimed_at <= p_cutoff THEN
            UPDATE webhook_claims
            SET state = 'in_flight', lease_until = p_lease_until, claimed_at = p_now
            WHERE id = p_id;
            RETURN 'new';
        ELSIF claim.state = 'done' THEN
            RETURN 'duplicate';
        ELSIF claim.state = 'in_flight' AND claim.lease_until > p_now THEN
            RETURN 'in_flight';
        END IF;
        UPDATE webhook_claims SET state = 'in_flight', lease_until = p_lease_until
        WHERE id = p_id;
        RETURN 'new';
    END
    $$;

    -- The inbox: one row per stored delivery, handed out in due order.
    CREATE TABLE webhook_inbox (
        seq         BIGINT GENERATED ALWAYS AS IDENTITY,
        id          TEXT PRIMARY KEY,
        body        BYTEA NOT NULL,
        received_at BIGINT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('pending', 'done', 'dead')),
        attempts    INTEGER NOT NULL DEFAULT 0,
        due_at      BIGINT NOT NULL,
        last_error  TEXT
    );
    CREATE INDEX webhook_inbox_due ON webhook_inbox (due_at, seq) WHERE state = 'pending';
    CREATE INDEX webhook_inbox_done ON webhook_inbox (received_at) WHERE state = 'done';
    CREATE INDEX webhook_inbox_dead ON webhook_inbox (seq) WHERE state = 'dead';
    -- Every signature of a stored delivery (the sender signs each attempt afresh). The one
    -- it was stored with (first) is kept as long as the delivery; later attempts' for the
    -- retention.
    CREATE TABLE webhook_inbox_signatures (
        signature BYTEA PRIMARY KEY,
        id        TEXT NOT NULL,
        seen_at   BIGINT NOT NULL,
        first     BOOLEAN NOT NULL
    );
    CREATE INDEX webhook_inbox_signatures_seen_at ON webhook_inbox_signatures (seen_at);

    -- Stores a verified delivery: 'stored', 'duplicate' or 'replayed'. Of concurrent accepts
    -- of one id (or one signature) exactly one inserts; the others wait for its commit.
    CREATE FUNCTION svc_receiver_inbox_accept(
        p_id TEXT, p_signature BYTEA, p_body BYTEA, p_now BIGINT
    ) RETURNS TEXT LANGUAGE plpgsql AS $$
    DECLARE
        owner TEXT;
    BEGIN
        IF EXISTS (SELECT 1 FROM webhook_inbox WHERE id = p_id) THEN
            -- Another attempt of a stored delivery: remember its signature too.
            INSERT INTO webhook_inbox_signatures (signature, id, seen_at, first)
            VALUES (p_signature, p_id, p_now, false) ON CONFLICT (signature) DO NOTHING;
            RETURN 'duplicate';
        END IF;
        INSERT INTO webhook_inbox_signatures (signature, id, seen_at, first)
        VALUES (p_signature, p_id, p_now, true) ON CONFLICT (signature) DO NOTHING;
        IF NOT FOUND THEN
            SELECT id INTO owner FROM webhook_inbox_signatures WHERE signature = p_signature;
            IF owner IS NOT NULL AND owner <> p_id THEN
                RETURN 'replayed';
            END IF;
        END IF;
        INSERT INTO webhook_inbox (id, body, received_at, state, due_at)
        VALUES (p_id, p_body, p_now, 'pending', p_now)
        ON CONFLICT (id) DO NOTHING;
        IF FOUND THEN
            RETURN 'stored';
        END IF;
        RETURN 'duplicate';
    END
    $$;
    "#,
    // 2: the set-based forms of the accept and of the claim and completion, for client-side
    // group commit: one call applies a batch of rows in array order, each with the per-row
    // logic above, in one transaction (so two rows of one id, or one signature under two ids,
    // behave in a batch as they do one after the other).
    r#"
    -- Accepts every row (ids, signatures, bodies and times in step); answers each as
    -- svc_receiver_inbox_accept does, in order.
    CREATE FUNCTION svc_receiver_inbox_accept_many(
        p_ids TEXT[], p_signatures BYTEA[], p_bodies BYTEA[], p_nows BIGINT[]
    ) RETURNS TEXT[] LANGUAGE plpgsql AS $$
    DECLARE
        n INTEGER := coalesce(cardinality(p_ids), 0);
        answers TEXT[] := '{}';
    BEGIN
        IF coalesce(cardinality(p_signatures), 0) <> n OR coalesce(cardinality(p_bodies), 0) <> n
           OR coalesce(cardinality(p_nows), 0) <> n THEN
            RAISE EXCEPTION 'svc_receiver_inbox_accept_many: arrays of different lengths';
        END IF;
        FOR i IN 1 .. n LOOP
            answers := array_append(answers, svc_receiver_inbox_accept(
                p_ids[i], p_signatures[i], p_bodies[i], p_nows[i]));
        END LOOP;
        RETURN answers;
    END
    $$;

    -- Applies every operation of the dedup store in order: 'claim' (answered as
    -- svc_receiver_claim does, with the row's signature, time, cutoff and lease) or
    -- 'complete' (answered 'done').
    CREATE FUNCTION svc_receiver_dedup_many(
        p_ops TEXT[], p_ids TEXT[], p_signatures BYTEA[], p_nows BIGINT[], p_cutoffs BIGINT[],
        p_lease_untils BIGINT[]
    ) RETURNS TEXT[] LANGUAGE plpgsql AS $$
    DECLARE
        n INTEGER := coalesce(cardinality(p_ids), 0);
        answers TEXT[] := '{}';
    BEGIN
        IF coalesce(cardinality(p_ops), 0) <> n OR coalesce(cardinality(p_signatures), 0) <> n
           OR coalesce(cardinality(p_nows), 0) <> n OR coalesce(cardinality(p_cutoffs), 0) <> n
           OR coalesce(cardinality(p_lease_untils), 0) <> n THEN
            RAISE EXCEPTION 'svc_receiver_dedup_many: arrays of different lengths';
        END IF;
        FOR i IN 1 .. n LOOP
            IF p_ops[i] = 'claim' THEN
                answers := array_append(answers, svc_receiver_claim(
                    p_ids[i], p_signatures[i], p_nows[i], p_cutoffs[i], p_lease_untils[i]));
            ELSIF p_ops[i] = 'complete' THEN
                UPDATE webhook_claims SET state = 'done' WHERE id = p_ids[i];
                answers := array_append(answers, 'done'::TEXT);
            ELSE
                RAISE EXCEPTION 'svc_receiver_dedup_many: unknown operation %', p_ops[i];
            END IF;
        END LOOP;
        RETURN answers;
    END
    $$;
    "#,
    // 3: one global lock order for a batch. Each row locks its signature's
    // row, then its id's; a second copy of an id in one batch thus locked a signature row after
    // the id row, while another replica's first copy with that signature took them the other
    // way: a deadlock. A batch now first takes a transaction-level advisory lock per distinct
    // key (each id and each signature, hashed to 64 bits) in ascending order, before it touches
    // any row. Two batches that share a row share its key and take their common keys in the
    // same order, so they never wait for each other in a cycle; a hash collision only makes
    // two unrelated rows wait for each other, in that same order.
    r#"
    CREATE FUNCTION svc_receiver_lock_keys(p_ids TEXT[], p_signatures BYTEA[])
    RETURNS VOID LANGUAGE plpgsql AS $$
    DECLARE
        k BIGINT;
    BEGIN
        FOR k IN
            SELECT key FROM (
                SELECT hashtextextended(id, 0) AS key FROM unnest(p_ids) AS id
                UNION
                SELECT hashtextextended(encode(signature, 'hex'), 1)
                FROM unnest(p_signatures) AS signature WHERE signature IS NOT NULL
            ) AS keys
            ORDER BY key
        LOOP
            PERFORM pg_advisory_xact_lock(k);
        END LOOP;
    END
    $$;

    CREATE OR REPLACE FUNCTION svc_receiver_inbox_accept_many(
        p_ids TEXT[], p_signatures BYTEA[], p_bodies BYTEA[], p_nows BIGINT[]
    ) RETURNS TEXT[] LANGUAGE plpgsql AS $$
    DECLARE
        n INTEGER := coalesce(cardinality(p_ids), 0);
        answers TEXT[] := '{}';
    BEGIN
        IF coalesce(cardinality(p_signatures), 0) <> n OR coalesce(cardinality(p_bodies), 0) <> n
           OR coalesce(cardinality(p_nows), 0) <> n THEN
            RAISE EXCEPTION 'svc_receiver_inbox_accept_many: arrays of different lengths';
        END IF;
        PERFORM svc_receiver_lock_keys(p_ids, p_signatures);
        FOR i IN 1 .. n LOOP
            answers := array_append(answers, svc_receiver_inbox_accept(
                p_ids[i], p_signatures[i], p_bodies[i], p_nows[i]));
        END LOOP;
        RETURN answers;
    END
    $$;

    CREATE OR REPLACE FUNCTION svc_receiver_dedup_many(
        p_ops TEXT[], p_ids TEXT[], p_signatures BYTEA[], p_nows BIGINT[], p_cutoffs BIGINT[],
        p_lease_untils BIGINT[]
    ) RETURNS TEXT[] LANGUAGE plpgsql AS $$
    DECLARE
        n INTEGER := coalesce(cardinality(p_ids), 0);
        answers TEXT[] := '{}';
    BEGIN
        IF coalesce(cardinality(p_ops), 0) <> n OR coalesce(cardinality(p_signatures), 0) <> n
           OR coalesce(cardinality(p_nows), 0) <> n OR coalesce(cardinality(p_cutoffs), 0) <> n
           OR coalesce(cardinality(p_lease_untils), 0) <> n THEN
            RAISE EXCEPTION 'svc_receiver_dedup_many: arrays of different lengths';
        END IF;
        -- A completion's signature is not one of its row's locks.
        PERFORM svc_receiver_lock_keys(p_ids, ARRAY(
            SELECT p_signatures[i] FROM generate_subscripts(p_ops, 1) AS i
            WHERE p_ops[i] = 'claim'));
        FOR i IN 1 .. n LOOP
            IF p_ops[i] = 'claim' THEN
                answers := array_append(answers, svc_receiver_claim(
                    p_ids[i], p_signatures[i], p_nows[i], p_cutoffs[i], p_lease_untils[i]));
            ELSIF p_ops[i] = 'complete' THEN
                UPDATE webhook_claims SET state = 'done' WHERE id = p_ids[i];
                answers := array_append(answers, 'done'::TEXT);
            ELSE
                RAISE EXCEPTION 'svc_receiver_dedup_many: unknown operation %', p_ops[i];
            END IF;
        END LOOP;
        RETURN answers;
    END
    $$;
    "#,
    // 4: an exactly-once direct-mode batch's locks and what is recorded of its deliveries in
    // one statement: the advisory locks of migration 3, then, read
    // after them (each statement of a VOLATILE function takes a snapshot of its own, under
    // READ COMMITTED after the locks were granted), per delivery in order whether its id is
    // recorded and the id its signature is remembered under. One plain statement could not
    // do both: its one snapshot would be taken before it waited for the locks. Scalar
    // subqueries, so that each is a primary-key lookup whatever the plan (an EXISTS may be
    // planned as a hashed subplan that reads the whole table). It is called on the tenant's
    // connections, whose `search_path` is the tenant's: `SET search_path FROM CURRENT` keeps
    // the schema the migration ran in (the crate's).
    r#"
    CREATE FUNCTION svc_receiver_lock_and_classify(p_ids TEXT[], p_signatures BYTEA[])
    RETURNS TABLE (stored BOOLEAN, owner TEXT) LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
        PERFORM svc_receiver_lock_keys(p_ids, p_signatures);
        RETURN QUERY
            SELECT (SELECT TRUE FROM webhook_inbox i WHERE i.id = d.id) IS NOT NULL,
                   (SELECT s.id FROM webhook_inbox_signatures s WHERE s.signature = d.signature)
            FROM unnest(p_ids, p_signatures) WITH ORDINALITY AS d (id, signature, n)
            ORDER BY d.n;
    END
    $$;
    "#,
    // 5: migration 3's advisory locks in one statement instead of a loop with a statement per
    // key: the keys sorted, then locked by an aggregate that reads them
    // in that order (a subquery with ORDER BY is never merged into the query around it, so
    // the sort comes first). The same keys in the same ascending order, so batches of
    // replicas on either version never wait for each other in a cycle; one statement per
    // batch costs the server a fraction of a statement per key (BENCHMARKS.md, svc-receiver).
    r#"
    CREATE OR REPLACE FUNCTION svc_receiver_lock_keys(p_ids TEXT[], p_signatures BYTEA[])
    RETURNS VOID LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM count(pg_advisory_xact_lock(key)) FROM (
            SELECT key FROM (
                SELECT hashtextextended(id, 0) AS key FROM unnest(p_ids) AS id
                UNION
                SELECT hashtextextended(encode(signature, 'hex'), 1)
                FROM unnest(p_signatures) AS signature WHERE signature IS NOT NULL
            ) AS keys
            ORDER BY key
        ) AS ordered;
    END
    $$;
    "#,
    // 6: exactly once in the tenant's own transaction. `webhook_recorded` holds one
    // row per delivery a tenant's transaction recorded (`PgRecorder`), keyed by webhook id:
    // concurrent transactions recording one id wait on its unique key. The direct-mode batch's
    // function of migration 4 is gone with the batches. And the crate's functions no longer
    // resolve names through the caller's `search_path`: every built-in they call is named with
    // `pg_catalog` (an overload planted in a schema of the path, such as
    // `hashtextextended(text, int4)` against a `0` literal, would otherwise win: PostgreSQL
    // weighs overloads of different argument types equally whatever their schema), and each
    // runs with `search_path` pinned to `pg_catalog`, the crate's schema and `pg_temp`, in that
    // order. A later migration that replaces one of them must pin it again.
    r#"
    CREATE TABLE webhook_recorded (
        id          TEXT PRIMARY KEY,
        recorded_at BIGINT NOT NULL
    );
    CREATE INDEX webhook_recorded_at ON webhook_recorded (recorded_at);

    DROP FUNCTION svc_receiver_lock_and_classify(TEXT[], BYTEA[]);

    CREATE OR REPLACE FUNCTION svc_receiver_lock_keys(p_ids TEXT[], p_signatures BYTEA[])
    RETURNS VOID LANGUAGE plpgsql AS $$
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

    CREATE OR REPLACE FUNCTION svc_receiver_inbox_accept_many(
        p_ids TEXT[], p_signatures BYTEA[], p_bodies BYTEA[], p_nows BIGINT[]
    ) RETURNS TEXT[] LANGUAGE plpgsql AS $$
    DECLARE
        n INTEGER := coalesce(pg_catalog.cardinality(p_ids), 0);
        answers TEXT[] := '{}';
    BEGIN
        IF coalesce(pg_catalog.cardinality(p_signatures), 0) <> n
           OR coalesce(pg_catalog.cardinality(p_bodies), 0) <> n
           OR coalesce(pg_catalog.cardinality(p_nows), 0) <> n THEN
            RAISE EXCEPTION 'svc_receiver_inbox_accept_many: arrays of different lengths';
        END IF;
        PERFORM svc_receiver_lock_keys(p_ids, p_signatures);
        FOR i IN 1 .. n LOOP
            answers := pg_catalog.array_append(answers, svc_receiver_inbox_accept(
                p_ids[i], p_signatures[i], p_bodies[i], p_nows[i]));
        END LOOP;
        RETURN answers;
    END
    $$;

    CREATE OR REPLACE FUNCTION svc_receiver_dedup_many(
        p_ops TEXT[], p_ids TEXT[], p_signatures BYTEA[], p_nows BIGINT[], p_cutoffs BIGINT[],
        p_lease_untils BIGINT[]
    ) RETURNS TEXT[] LANGUAGE plpgsql AS $$
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
        PERFORM svc_receiver_lock_keys(p_ids, ARRAY(
            SELECT p_signatures[i] FROM pg_catalog.generate_subscripts(p_ops, 1) AS i
            WHERE p_ops[i] = 'claim'));
        FOR i IN 1 .. n LOOP
            IF p_ops[i] = 'claim' THEN
                answers := pg_catalog.array_append(answers, svc_receiver_claim(
                    p_ids[i], p_signatures[i], p_nows[i], p_cutoffs[i], p_lease_untils[i]));
            ELSIF p_ops[i] = 'complete' THEN
                UPDATE webhook_claims SET state = 'done' WHERE id = p_ids[i];
                answers := pg_catalog.array_append(answers, 'done'::TEXT);
            ELSE
                RAISE EXCEPTION 'svc_receiver_dedup_many: unknown operation %', p_ops[i];
            END IF;
        END LOOP;
        RETURN answers;
    END
    $$;

    DO $$
    DECLARE
        schema TEXT := pg_catalog.current_schema();
        f TEXT;
    BEGIN
        FOREACH f IN ARRAY ARRAY[
            'svc_receiver_claim(TEXT, BYTEA, BIGINT, BIGINT, BIGINT)',
            'svc_receiver_inbox_accept(TEXT, BYTEA, BYTEA, BIGINT)',
            'svc_receiver_inbox_accept_many(TEXT[], BYTEA[], BYTEA[], BIGINT[])',
            'svc_receiver_dedup_many(TEXT[], TEXT[], BYTEA[], BIGINT[], BIGINT[], BIGINT[])',
            'svc_receiver_lock_keys(TEXT[], BYTEA[])'
        ] LOOP
            EXECUTE pg_catalog.format(
                'ALTER FUNCTION %I.%s SET search_path = pg_catalog, %I, pg_temp', schema, f, schema);
        END LOOP;
    END
    $$;
    "#,
];

/// The schema version this build writes (how many migrations it knows).
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Brings the database up to [`SCHEMA_VERSION`] and answers the schema the crate's tables are
/// in, quoted as an identifier; errors are the server's text. With a `schema` (a validated
/// identifier, the only schema in the connection's `search_path`), creates it first when
/// missing.
///
/// The transaction is `READ COMMITTED` whatever the database's default: each statement after
/// the lock then sees what a replica that migrated first committed while this one waited for
/// the lock (under `REPEATABLE READ` the snapshot would be the lock statement's own, taken
/// before the wait, and the tables created meanwhile would be created again).
pub(super) async fn run(client: &mut Client, schema: Option<&str>) -> Result<String, String> {
    let error = |err: tokio_postgres::Error| describe_error(&err);
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await
        .map_err(error)?;
    tx.execute(
        "SELECT pg_catalog.pg_advisory_xact_lock($1)",
        &[&MIGRATION_LOCK],
    )
    .await
    .map_err(error)?;
    if let Some(schema) = schema {
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .await
            .map_err(error)?;
    }
    let current: Option<String> = tx
        .query_one(
            "SELECT pg_catalog.quote_ident(pg_catalog.current_schema())",
            &[],
        )
        .await
        .map_err(error)?
        .get(0);
    let Some(current) = current else {
        return Err(
            "no schema of the search_path exists to hold the crate's tables: \
                    create one, or open the database with a schema of the crate's own"
                .to_owned(),
        );
    };
    tx.batch_execute("CREATE TABLE IF NOT EXISTS svc_receiver_schema (version INTEGER NOT NULL)")
        .await
        .map_err(error)?;
    let applied: Option<i32> = tx
        .query_one("SELECT max(version) FROM svc_receiver_schema", &[])
        .await
        .map_err(error)?
        .get(0);
    let applied = u32::try_from(applied.unwrap_or(0)).unwrap_or(0);
    if applied > SCHEMA_VERSION {
        return Err(format!(
            "the database has svc-receiver schema version {applied}, newer than this build \
             knows ({SCHEMA_VERSION}): upgrade to use it"
        ));
    }
    for (version, migration) in (1_i32..).zip(MIGRATIONS).skip(applied as usize) {
        tx.batch_execute(migration).await.map_err(error)?;
        tx.execute(
            "INSERT INTO svc_receiver_schema (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(error)?;
    }
    tx.commit().await.map_err(error)?;
    Ok(current)
}
