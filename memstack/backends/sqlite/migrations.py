"""The SQLite schema: ONE ordered list of migrations, each applied once, in its own transaction.

Append-only: an entry is never edited, renamed or reordered, since its name is recorded in the
``_migrations`` table of every database it was applied to; a change to the schema is a new entry at
the end. ``apply_migrations`` applies what a database lacks and refuses one that holds a name this
list does not know (a newer memstack made it).

The tables, by migration: ``001_core`` messages, state, checkpoints, jobs; ``002_units`` the unit
store and its postings (kept by triggers: see ``units``); ``003_vectors`` vectors, their versions
(bumped by a trigger) and the embedding cache; ``004_records`` record versions, the audit trail and
model usage; ``005_deletions`` the deletion notes, ``008_deletion_key`` their key and
``009_deletion_notes`` their kind, target, counts and layer (see ``rules.deletions``);
``006_job_waiting`` a job done but waiting for more; ``007_profiles`` a tenant's memory profile.
Table names are SQLite's own (``messages``; PostgreSQL's are ``memstack_messages``) and stay so.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from ...errors import SchemaError
from ...types import utcnow
from ..rules.deletions import keyed
from .deletions import deletion_secret

Migration = tuple[str, Callable[[sqlite3.Connection], None]]


def _statements(db: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated DDL inside the caller's transaction (executescript would commit it)."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _m001_core(db: sqlite3.Connection) -> None:
    _statements(
        db,
        """
        CREATE TABLE messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, parts INTEGER NOT NULL,
            name TEXT, tool_calls TEXT, tool_call_id TEXT,
            ts TEXT NOT NULL, ts_us INTEGER NOT NULL, metadata TEXT,
            UNIQUE (tenant, user_id, agent_id, thread_id, id)
        );
        CREATE INDEX messages_thread ON messages (tenant, user_id, agent_id, thread_id, seq);
        CREATE TABLE state (
            tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            name TEXT NOT NULL, value TEXT NOT NULL, updated_us INTEGER NOT NULL,
            PRIMARY KEY (tenant, user_id, agent_id, thread_id, name)
        );
        CREATE TABLE checkpoints (
            n INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            id TEXT NOT NULL UNIQUE, created TEXT NOT NULL, data TEXT NOT NULL
        );
        CREATE INDEX checkpoints_thread ON checkpoints (tenant, user_id, agent_id, thread_id, n);
        CREATE TABLE jobs (
            tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            layer TEXT NOT NULL,
            requested INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0,
            cursor INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,
            owner TEXT, lease_us INTEGER, not_before_us INTEGER, last_error TEXT,
            pending_since_us INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, user_id, agent_id, thread_id, layer)
        );
        CREATE INDEX jobs_open ON jobs (pending_since_us) WHERE requested > done;
        """,
    )


_UNITS = (
    """CREATE TABLE unit_owners (
        owner INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL,
        units INTEGER NOT NULL DEFAULT 0, tokens INTEGER NOT NULL DEFAULT 0,
        UNIQUE (tenant, user_id, agent_id)
    )""",
    """CREATE TABLE units (
        n INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
        id TEXT NOT NULL, text TEXT NOT NULL, ts TEXT NOT NULL, ts_us INTEGER NOT NULL,
        kind TEXT NOT NULL, round INTEGER, category TEXT, source_ids TEXT NOT NULL, metadata TEXT NOT NULL,
        owner INTEGER NOT NULL, terms TEXT NOT NULL, length INTEGER NOT NULL,
        UNIQUE (tenant, user_id, agent_id, id)
    )""",
    "CREATE INDEX units_thread ON units (tenant, user_id, agent_id, thread_id)",
    "CREATE INDEX units_owner ON units (owner, n)",
    """CREATE TABLE unit_terms (
        owner INTEGER NOT NULL, term TEXT NOT NULL, n INTEGER NOT NULL, tf INTEGER NOT NULL, length INTEGER NOT NULL,
        PRIMARY KEY (owner, term, n)
    ) WITHOUT ROWID""",
    """CREATE TRIGGER units_indexed AFTER INSERT ON units BEGIN
        INSERT INTO unit_terms SELECT NEW.owner, key, NEW.n, value, NEW.length FROM json_each(NEW.terms);
        UPDATE unit_owners SET units = units + 1, tokens = tokens + NEW.length WHERE owner = NEW.owner;
    END""",
    """CREATE TRIGGER units_unindexed AFTER DELETE ON units BEGIN
        DELETE FROM unit_terms WHERE owner = OLD.owner AND term IN (SELECT key FROM json_each(OLD.terms)) AND n = OLD.n;
        UPDATE unit_owners SET units = units - 1, tokens = tokens - OLD.length WHERE owner = OLD.owner;
        DELETE FROM unit_owners WHERE owner = OLD.owner AND units = 0;
    END""",
)


def _m002_units(db: sqlite3.Connection) -> None:
    for statement in _UNITS:
        db.execute(statement)


_VECTORS = [
    """CREATE TABLE vectors (
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
        unit_id TEXT NOT NULL, kind TEXT NOT NULL, category TEXT, ts_us INTEGER NOT NULL,
        vector BLOB NOT NULL,  -- float32, length 1
        PRIMARY KEY (tenant, user_id, agent_id, unit_id)
    )""",
    "CREATE INDEX vectors_thread ON vectors (tenant, user_id, agent_id, thread_id)",
    """CREATE TABLE vector_meta (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        model TEXT, dimension INTEGER,  -- NULL while the index is empty (after reset)
        generation INTEGER NOT NULL     -- the counter every version is drawn from
    )""",
    "INSERT INTO vector_meta VALUES (1, NULL, NULL, 0)",
    """CREATE TABLE vector_versions (
        tenant TEXT NOT NULL, user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '', thread_id TEXT NOT NULL DEFAULT '',  -- always '': per user
        version INTEGER NOT NULL,
        PRIMARY KEY (tenant, user_id)
    )""",
    """CREATE TRIGGER vectors_deleted AFTER DELETE ON vectors BEGIN
        UPDATE vector_meta SET generation = generation + 1;
        INSERT OR REPLACE INTO vector_versions (tenant, user_id, version)
            VALUES (old.tenant, old.user_id, (SELECT generation FROM vector_meta));
    END""",
    """CREATE TABLE embedding_cache (
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
        model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL,  -- float32, as given
        PRIMARY KEY (tenant, user_id, agent_id, thread_id, model, hash)
    )""",
]


def _m003_vectors(db: sqlite3.Connection) -> None:
    for statement in _VECTORS:  # statements one by one: the trigger's body holds semicolons
        db.execute(statement)


_RECORDS = (
    """CREATE TABLE records (
        n INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
        kind TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, id TEXT NOT NULL,
        value TEXT NOT NULL, source_ids TEXT NOT NULL,
        valid_from TEXT, invalid_at TEXT, created TEXT NOT NULL,
        UNIQUE (tenant, user_id, agent_id, thread_id, kind, key, version)
    )""",
    """CREATE UNIQUE INDEX records_current ON records (tenant, user_id, agent_id, thread_id, kind, key)
        WHERE invalid_at IS NULL""",
    """CREATE TABLE record_audit (
        n INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
        id TEXT NOT NULL, layer TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, action TEXT NOT NULL,
        before TEXT, after TEXT, source_ids TEXT NOT NULL, at TEXT NOT NULL
    )""",
    "CREATE INDEX record_audit_user ON record_audit (tenant, user_id, n)",
    """CREATE TABLE model_usage (
        n INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
        layer TEXT NOT NULL, model TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
        latency_ms REAL NOT NULL, ok INTEGER NOT NULL, error TEXT, at TEXT NOT NULL, at_us INTEGER NOT NULL
    )""",
    "CREATE INDEX model_usage_user ON model_usage (tenant, user_id, at_us)",
)

_DELETIONS = (
    """CREATE TABLE deletions (
        n INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL, user_hash TEXT NOT NULL, at TEXT NOT NULL, rows_deleted INTEGER NOT NULL
    )""",
    "CREATE INDEX deletions_tenant ON deletions (tenant, n)",
)


def _m004_records(db: sqlite3.Connection) -> None:
    for statement in _RECORDS:
        db.execute(statement)


def _m005_deletions(db: sqlite3.Connection) -> None:
    for statement in _DELETIONS:
        db.execute(statement)


def _m006_job_waiting(db: sqlite3.Connection) -> None:
    _statements(
        db,
        "ALTER TABLE jobs ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0; CREATE INDEX jobs_waiting ON jobs (pending_since_us) WHERE waiting = 1;",
    )


def _m007_profiles(db: sqlite3.Connection) -> None:
    _statements(db, "CREATE TABLE profiles (tenant TEXT PRIMARY KEY, value TEXT NOT NULL, updated_us INTEGER NOT NULL)")


def _m008_deletion_key(db: sqlite3.Connection) -> None:
    """The store's secret for the deletion notes' keyed hash; notes that held a bare sha256 are
    rehashed under it."""
    db.execute("CREATE TABLE deletion_key (id INTEGER PRIMARY KEY CHECK (id = 1), secret BLOB NOT NULL)")
    notes = db.execute("SELECT n, tenant, user_hash FROM deletions").fetchall()
    if notes:
        secret = deletion_secret(db)
        db.executemany(
            "UPDATE deletions SET user_hash = ? WHERE n = ?", [(keyed(secret, tenant, digest), n) for n, tenant, digest in notes]
        )


def _m009_deletion_notes(db: sqlite3.Connection) -> None:
    """Notes of threads and saved memories too, with counts and who deleted (older notes: a user's,
    counts unknown, by an unknown layer)."""
    for statement in (
        "ALTER TABLE deletions ADD COLUMN kind TEXT NOT NULL DEFAULT 'user'",
        "ALTER TABLE deletions ADD COLUMN target_hash TEXT",
        "ALTER TABLE deletions ADD COLUMN counts TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE deletions ADD COLUMN layer TEXT",
        "CREATE INDEX deletions_user ON deletions (tenant, user_hash, n)",
    ):
        db.execute(statement)


MIGRATIONS: list[Migration] = [
    ("001_core", _m001_core),
    ("002_units", _m002_units),
    ("003_vectors", _m003_vectors),
    ("004_records", _m004_records),
    ("005_deletions", _m005_deletions),
    ("006_job_waiting", _m006_job_waiting),
    ("007_profiles", _m007_profiles),
    ("008_deletion_key", _m008_deletion_key),
    ("009_deletion_notes", _m009_deletion_notes),
]

#: Tables with (tenant, user_id, agent_id, thread_id) columns: delete_user and delete_thread clear
#: them all in one transaction. Only ``units`` of the unit tables carries the key (its triggers
#: clear unit_terms and unit_owners); ``vector_versions`` comes last, since deleting a user's vectors
#: fires the trigger that writes it; a thread's audit trail goes with the thread. ``deletions`` is
#: in neither: it is the note that they went.
USER_TABLES: list[str] = [
    "messages",
    "state",
    "checkpoints",
    "jobs",
    "units",
    "vectors",
    "embedding_cache",
    "vector_versions",
    "records",
    "record_audit",
    "model_usage",
]
THREAD_TABLES: list[str] = USER_TABLES[1:]


def apply_migrations(db: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
    """Apply the migrations this database lacks, in order, each in its own ``BEGIN IMMEDIATE``
    transaction (the file's write lock): a process that finds a migration applied by another
    meanwhile skips it, so processes opening an old file at once migrate it once. A database
    with a migration this list does not know (a newer memstack made it) is refused with
    SchemaError before anything is written, and again inside each transaction (a newer memstack
    may migrate it meanwhile): never half-migrated."""
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    known = [name for name, _ in migrations]
    applied = _applied(db, known)
    done = []
    for name, migrate in migrations:
        if name in applied:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            if name not in _applied(db, known):
                migrate(db)
                db.execute("INSERT INTO _migrations VALUES (?, ?)", (name, utcnow().isoformat()))
                done.append(name)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return done


def _applied(db: sqlite3.Connection, known: Sequence[str]) -> list[str]:
    """The migrations applied to ``db``; SchemaError if one of them is not in ``known``."""
    applied = [row[0] for row in db.execute("SELECT name FROM _migrations ORDER BY rowid")]
    unknown = [name for name in applied if name not in known]
    if unknown:
        file = next((row[2] for row in db.execute("PRAGMA database_list") if row[1] == "main"), "") or "in memory"
        raise SchemaError(
            f"the SQLite database {file} was made by a newer memstack: it has migrations this version does not know "
            f"({', '.join(unknown)}); upgrade memstack (nothing was changed)"
        )
    return applied
