"""The PostgreSQL schema: ONE ordered list of migrations, applied in one transaction under an
advisory lock and recorded in ``memstack_migrations``.

Append-only: an entry is never edited, renamed or reordered, since its name is recorded in every
schema it was applied to; a change to the schema is a new entry at the end. A schema with a
migration this list does not know was made by a newer memstack and raises SchemaError.

The tables, by migration: ``0001_initial`` messages, state, checkpoints, jobs; ``0002_units`` the
unit store with its postings and the statement-level triggers that keep them (see ``units``);
``0003_vectors`` vectors in hash partitions, the held model and the embedding cache (see
``vectors``); ``0004_records`` record versions, the audit trail and model usage;
``0005_deletions`` the deletion notes, ``0008_deletion_key`` their key and
``0009_deletion_notes`` their kind, target, counts and layer; ``0006_job_waiting`` a job done but
waiting for more; ``0007_profiles`` a tenant's memory profile. Every table name starts with
``memstack_`` (the schema may be shared with the application's own tables).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import SchemaError
from ..rules.deletions import keyed
from .database import extension_schema, quote_identifier
from .deletions import deletion_secret

if TYPE_CHECKING:
    from psycopg import Connection, Cursor

Migration = str | Callable[["Cursor[Any]"], None]

PARTITIONS = 32  # hash partitions of memstack_vectors by (tenant, user_id), each with its own HNSW graph (see ``vectors``)

INITIAL = """
        CREATE TABLE memstack_messages (
            seq          BIGSERIAL PRIMARY KEY,
            tenant       TEXT NOT NULL,
            user_id      TEXT NOT NULL,
            agent_id     TEXT NOT NULL,
            thread_id    TEXT NOT NULL,
            id           TEXT NOT NULL,
            role         TEXT NOT NULL,
            content      JSONB NOT NULL,  -- a JSON string, or an array of content parts
            name         TEXT,
            tool_calls   JSONB NOT NULL DEFAULT '[]',
            tool_call_id TEXT,
            ts           TIMESTAMPTZ NOT NULL,
            metadata     JSONB NOT NULL DEFAULT '{}',
            UNIQUE (tenant, user_id, agent_id, thread_id, id)
        );
        CREATE INDEX memstack_messages_thread_seq ON memstack_messages (tenant, user_id, agent_id, thread_id, seq);

        CREATE TABLE memstack_state (
            tenant     TEXT NOT NULL,
            user_id    TEXT NOT NULL,
            agent_id   TEXT NOT NULL,
            thread_id  TEXT NOT NULL,
            name       TEXT NOT NULL,
            value      JSONB NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant, user_id, agent_id, thread_id, name)
        );

        CREATE TABLE memstack_checkpoints (
            n          BIGSERIAL PRIMARY KEY,  -- save order: newest has the largest n
            tenant     TEXT NOT NULL,
            user_id    TEXT NOT NULL,
            agent_id   TEXT NOT NULL,
            thread_id  TEXT NOT NULL,
            id         TEXT NOT NULL UNIQUE,
            created_at TIMESTAMPTZ NOT NULL,
            data       JSONB NOT NULL
        );
        CREATE INDEX memstack_checkpoints_thread_n ON memstack_checkpoints (tenant, user_id, agent_id, thread_id, n);

        CREATE TABLE memstack_jobs (
            tenant       TEXT NOT NULL,
            user_id      TEXT NOT NULL,
            agent_id     TEXT NOT NULL,
            thread_id    TEXT NOT NULL,
            layer        TEXT NOT NULL,
            requested    BIGINT NOT NULL DEFAULT 0,
            done         BIGINT NOT NULL DEFAULT 0,
            cursor       BIGINT NOT NULL DEFAULT 0,
            attempts     INTEGER NOT NULL DEFAULT 0,
            owner        TEXT,
            lease_until  TIMESTAMPTZ,
            not_before   TIMESTAMPTZ,
            last_error   TEXT,
            pending_since TIMESTAMPTZ NOT NULL DEFAULT now(),  -- when undone work last appeared
            PRIMARY KEY (tenant, user_id, agent_id, thread_id, layer)
        );
        CREATE INDEX memstack_jobs_claimable ON memstack_jobs (pending_since) WHERE requested > done;
        """

UNIT_SCHEMA = """
CREATE TABLE memstack_unit_owners (
    owner    BIGSERIAL PRIMARY KEY,
    tenant   TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    units    BIGINT NOT NULL DEFAULT 0,
    tokens   BIGINT NOT NULL DEFAULT 0,
    UNIQUE (tenant, user_id, agent_id)
);

CREATE TABLE memstack_units (
    n          BIGSERIAL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    thread_id  TEXT NOT NULL,
    id         TEXT NOT NULL,
    text       TEXT NOT NULL,
    ts         TIMESTAMPTZ NOT NULL,
    ts_offset  INTEGER NOT NULL,  -- seconds east of UTC the timestamp was given in
    kind       TEXT NOT NULL,
    round      INTEGER,
    category   TEXT,
    source_ids JSONB NOT NULL,
    metadata   JSONB NOT NULL,
    owner      BIGINT NOT NULL,
    terms      JSONB NOT NULL,    -- {term: frequency}
    length     INTEGER NOT NULL,  -- the sum of the frequencies
    UNIQUE (tenant, user_id, agent_id, id)
);
CREATE INDEX memstack_units_thread ON memstack_units (tenant, user_id, agent_id, thread_id);
CREATE INDEX memstack_units_owner_n ON memstack_units (owner, n);

CREATE TABLE memstack_unit_terms (
    owner  BIGINT NOT NULL,
    term   TEXT NOT NULL,
    n      BIGINT NOT NULL,
    tf     INTEGER NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (owner, term, n) INCLUDE (tf, length)  -- a query reads the index only
);

CREATE FUNCTION memstack_units_indexed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO memstack_unit_terms (owner, term, n, tf, length)
        SELECT u.owner, t.key, u.n, t.value::integer, u.length FROM added u, jsonb_each_text(u.terms) t;
    UPDATE memstack_unit_owners o SET units = o.units + c.units, tokens = o.tokens + c.tokens
        FROM (SELECT owner, count(*) AS units, sum(length) AS tokens FROM added GROUP BY owner) c
        WHERE o.owner = c.owner;
    RETURN NULL;
END $$;
CREATE TRIGGER memstack_units_indexed AFTER INSERT ON memstack_units
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION memstack_units_indexed();

CREATE FUNCTION memstack_units_unindexed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM memstack_unit_terms t USING removed u, jsonb_object_keys(u.terms) k(term)
        WHERE t.owner = u.owner AND t.term = k.term AND t.n = u.n;
    UPDATE memstack_unit_owners o SET units = o.units - c.units, tokens = o.tokens - c.tokens
        FROM (SELECT owner, count(*) AS units, sum(length) AS tokens FROM removed GROUP BY owner) c
        WHERE o.owner = c.owner;
    DELETE FROM memstack_unit_owners WHERE units = 0 AND owner IN (SELECT owner FROM removed);
    RETURN NULL;
END $$;
CREATE TRIGGER memstack_units_unindexed AFTER DELETE ON memstack_units
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION memstack_units_unindexed();
"""


def _m0003_vectors(cur: Cursor[Any]) -> None:
    ext = extension_schema(cur)
    cur.execute(
        f"""
        CREATE TABLE memstack_vectors (
            tenant    TEXT NOT NULL,
            user_id   TEXT NOT NULL,
            agent_id  TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            unit_id   TEXT NOT NULL,
            kind      TEXT NOT NULL,
            category  TEXT,
            ts        TIMESTAMPTZ NOT NULL,
            embedding {ext}.vector NOT NULL,  -- vector(d) once the first upsert fixed d
            PRIMARY KEY (tenant, user_id, agent_id, unit_id)
        ) PARTITION BY HASH (tenant, user_id);
        {" ".join(f"CREATE TABLE memstack_vectors_p{i:02d} PARTITION OF memstack_vectors FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {i});" for i in range(PARTITIONS))}
        -- covers every filter, so counting a user's matching rows reads the index only; thread
        -- before agent, so a thread filter seeks even when the search names no agent
        CREATE INDEX memstack_vectors_scope ON memstack_vectors (tenant, user_id, thread_id, agent_id) INCLUDE (kind, category, ts);

        CREATE TABLE memstack_vector_meta (
            singleton BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
            model     TEXT NOT NULL,
            dimension INTEGER NOT NULL
        );

        CREATE TABLE memstack_embedding_cache (
            tenant    TEXT NOT NULL,
            user_id   TEXT NOT NULL,
            agent_id  TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            model     TEXT NOT NULL,
            hash      TEXT NOT NULL,
            vector    BYTEA NOT NULL,  -- float32 little-endian, as given
            PRIMARY KEY (tenant, user_id, agent_id, thread_id, model, hash)
        );
        """
    )


RECORD_SCHEMA = """
CREATE TABLE memstack_records (
    n          BIGSERIAL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    thread_id  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    key        TEXT NOT NULL,
    version    INTEGER NOT NULL,
    id         TEXT NOT NULL,
    value      JSONB NOT NULL,
    source_ids JSONB NOT NULL,
    valid_from TIMESTAMPTZ,           -- when it became true (the source messages' time), if known
    invalid_at TIMESTAMPTZ,           -- when it stopped being current; NULL while current
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (tenant, user_id, agent_id, thread_id, kind, key, version)
);
CREATE UNIQUE INDEX memstack_records_current ON memstack_records (tenant, user_id, agent_id, thread_id, kind, key COLLATE "C")
    WHERE invalid_at IS NULL;

CREATE TABLE memstack_record_audit (
    n          BIGSERIAL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    thread_id  TEXT NOT NULL,
    id         TEXT NOT NULL,
    layer      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    key        TEXT NOT NULL,
    action     TEXT NOT NULL,         -- add, supersede or delete
    before     JSONB,
    after      JSONB,
    source_ids JSONB NOT NULL,
    at         TIMESTAMPTZ NOT NULL   -- when it was recorded
);
CREATE INDEX memstack_record_audit_user ON memstack_record_audit (tenant, user_id, n);

CREATE TABLE memstack_model_usage (
    n                 BIGSERIAL PRIMARY KEY,
    tenant            TEXT NOT NULL,
    user_id           TEXT NOT NULL,
    agent_id          TEXT NOT NULL,
    thread_id         TEXT NOT NULL,
    layer             TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_ms        DOUBLE PRECISION NOT NULL,
    ok                BOOLEAN NOT NULL,
    error             TEXT,
    at                TIMESTAMPTZ NOT NULL
);
CREATE INDEX memstack_model_usage_user ON memstack_model_usage (tenant, user_id, at, n);
"""

DELETIONS_SCHEMA = """
CREATE TABLE memstack_deletions (
    n            BIGSERIAL PRIMARY KEY,
    tenant       TEXT NOT NULL,
    user_hash    TEXT NOT NULL,
    at           TIMESTAMPTZ NOT NULL,
    rows_deleted BIGINT NOT NULL
);
CREATE INDEX memstack_deletions_tenant ON memstack_deletions (tenant, n);
"""


def _m0008_deletion_key(cur: Cursor[Any]) -> None:
    """The store's secret for the deletion notes' keyed hash; notes that held a bare sha256 are
    rehashed under it."""
    cur.execute("CREATE TABLE memstack_deletion_key (id INTEGER PRIMARY KEY CHECK (id = 1), secret BYTEA NOT NULL)")
    cur.execute("SELECT n, tenant, user_hash FROM memstack_deletions")
    notes = cur.fetchall()
    if notes:
        secret = deletion_secret(cur)
        cur.executemany(
            "UPDATE memstack_deletions SET user_hash = %s WHERE n = %s", [(keyed(secret, tenant, digest), n) for n, tenant, digest in notes]
        )


MIGRATIONS: list[tuple[str, Migration]] = [
    ("0001_initial", INITIAL),
    ("0002_units", UNIT_SCHEMA),
    ("0003_vectors", _m0003_vectors),
    ("0004_records", RECORD_SCHEMA),
    ("0005_deletions", DELETIONS_SCHEMA),
    (
        "0006_job_waiting",
        "ALTER TABLE memstack_jobs ADD COLUMN waiting boolean NOT NULL DEFAULT false; CREATE INDEX memstack_jobs_waiting ON memstack_jobs (pending_since) WHERE waiting",
    ),
    (
        "0007_profiles",
        "CREATE TABLE memstack_profiles (tenant TEXT PRIMARY KEY, value JSONB NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    ),
    ("0008_deletion_key", _m0008_deletion_key),
    # notes of threads and saved memories too, with counts and who deleted (older notes: a user's,
    # counts unknown, by an unknown layer)
    (
        "0009_deletion_notes",
        """ALTER TABLE memstack_deletions ADD COLUMN kind TEXT NOT NULL DEFAULT 'user', ADD COLUMN target_hash TEXT,
        ADD COLUMN counts JSONB NOT NULL DEFAULT '{}', ADD COLUMN layer TEXT;
    CREATE INDEX memstack_deletions_user ON memstack_deletions (tenant, user_hash, n)""",
    ),
]

#: Tables with (tenant, user_id, agent_id, thread_id) columns: delete_user and delete_thread clear
#: them in one transaction. Only memstack_units of the unit tables carries the key (its triggers
#: clear the postings and owner rows); a thread's audit trail goes with the thread;
#: memstack_deletions is in neither: it is the note that they went.
USER_TABLES: list[str] = [
    "memstack_messages",
    "memstack_state",
    "memstack_checkpoints",
    "memstack_jobs",
    "memstack_units",
    "memstack_vectors",
    "memstack_embedding_cache",
    "memstack_records",
    "memstack_record_audit",
    "memstack_model_usage",
]
THREAD_TABLES: list[str] = USER_TABLES[1:]


def ensure_schema_exists(cur: Cursor[Any], schema: str) -> None:
    cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
    if cur.fetchone() is None:
        cur.execute(f"CREATE SCHEMA {quote_identifier(schema)}")


def applied_migrations(cur: Cursor[Any]) -> list[str]:
    cur.execute("SELECT to_regclass('memstack_migrations')")
    row = cur.fetchone()
    if row is None or row[0] is None:
        cur.execute("CREATE TABLE memstack_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        return []
    cur.execute("SELECT name FROM memstack_migrations ORDER BY name")
    return [name for (name,) in cur.fetchall()]


def refuse_unknown_migrations(applied: Sequence[str], schema: str) -> None:
    known = {name for name, _ in MIGRATIONS}
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise SchemaError(
            f"the memstack tables in schema {schema!r} were made by a newer memstack: they have migrations this version "
            f"does not know ({', '.join(unknown)}); upgrade memstack (nothing was changed)"
        )


def run_migration(cur: Cursor[Any], name: str, step: Migration) -> None:
    if callable(step):
        step(cur)
    else:
        cur.execute(step)
    cur.execute("INSERT INTO memstack_migrations (name) VALUES (%s)", (name,))


def migrate(conn: Connection[Any], schema: str) -> None:
    """Bring ``schema`` up to date in one transaction, serialised across processes."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("memstack.migrate\x1f" + schema,))
        ensure_schema_exists(cur, schema)
        applied = applied_migrations(cur)
        refuse_unknown_migrations(applied, schema)
        for name, step in MIGRATIONS:
            if name not in applied:
                run_migration(cur, name, step)
