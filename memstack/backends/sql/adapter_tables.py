"""The LangGraph adapters' ``lg_*`` tables as the backends know them: their schema (``MIGRATIONS``,
``migrate``: applied by ``integrations.tables`` when an adapter opens them, and by a copy into a
store that lacks them) and their rows as a copy reads and writes them (``memstack.transfer``).

The core never imports the adapters (nor langgraph): the rows travel as they are stored, values
in LangGraph's own serialisation, so a copy needs no langgraph and changes no byte of them.

Which rows are a user's (as ``adapter_rows`` deletes them): the threads with a checkpoint tagged
with the user. A whole tenant is every row of it: its threads, tagged or not, and the items of
LangGraph's key-value store (``lg_items``, ``lg_item_vectors``), which name no user.

SQL is written once in the adapters' spelling (``?`` placeholders, run through a ``Query`` that
gives PostgreSQL ``%s``); PostgreSQL gets BYTEA for BLOB and byte-wise ("C") collation of text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import SchemaError
from ...types import utcnow

#: one statement in the adapters' SQL (``?`` placeholders) -> its rows ([] for none)
Query = Callable[[str, Sequence[Any]], list[tuple]]

#: Append-only: never edit or reorder an entry; add a new one at the end.
MIGRATIONS: list[tuple[str, str]] = [
    (
        "lg_001_checkpoints",
        """
        CREATE TABLE lg_checkpoints (
            tenant TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
            parent_id TEXT, type TEXT NOT NULL, checkpoint BLOB NOT NULL, metadata_type TEXT NOT NULL, metadata BLOB NOT NULL,
            run_id TEXT, user_id TEXT,
            PRIMARY KEY (tenant, thread_id, checkpoint_ns, checkpoint_id)
        );
        CREATE INDEX lg_checkpoints_run ON lg_checkpoints (tenant, run_id) WHERE run_id IS NOT NULL;
        CREATE INDEX lg_checkpoints_user ON lg_checkpoints (tenant, user_id) WHERE user_id IS NOT NULL;
        CREATE TABLE lg_blobs (
            tenant TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, channel TEXT NOT NULL, version TEXT NOT NULL,
            type TEXT NOT NULL, blob BLOB NOT NULL,
            PRIMARY KEY (tenant, thread_id, checkpoint_ns, channel, version)
        );
        CREATE TABLE lg_writes (
            tenant TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
            task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL, type TEXT NOT NULL, value BLOB NOT NULL,
            task_path TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (tenant, thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )
        """,
    ),
    (
        "lg_002_store",
        """
        CREATE TABLE lg_items (
            tenant TEXT NOT NULL, prefix TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            PRIMARY KEY (tenant, prefix, key)
        );
        CREATE TABLE lg_item_vectors (
            tenant TEXT NOT NULL, prefix TEXT NOT NULL, key TEXT NOT NULL, field TEXT NOT NULL,
            model TEXT NOT NULL, vector BLOB NOT NULL,
            PRIMARY KEY (tenant, prefix, key, field)
        )
        """,
    ),
]


#: every table's columns, the primary key's first; the thread tables first, the store's after
COLUMNS: dict[str, tuple[str, ...]] = {
    "lg_checkpoints": (
        "tenant",
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_id",
        "type",
        "checkpoint",
        "metadata_type",
        "metadata",
        "run_id",
        "user_id",
    ),
    "lg_blobs": ("tenant", "thread_id", "checkpoint_ns", "channel", "version", "type", "blob"),
    "lg_writes": ("tenant", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type", "value", "task_path"),
    "lg_items": ("tenant", "prefix", "key", "value", "created_at", "updated_at"),
    "lg_item_vectors": ("tenant", "prefix", "key", "field", "model", "vector"),
}
KEYS: dict[str, tuple[str, ...]] = {
    "lg_checkpoints": ("tenant", "thread_id", "checkpoint_ns", "checkpoint_id"),
    "lg_blobs": ("tenant", "thread_id", "checkpoint_ns", "channel", "version"),
    "lg_writes": ("tenant", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
    "lg_items": ("tenant", "prefix", "key"),
    "lg_item_vectors": ("tenant", "prefix", "key", "field"),
}
#: the columns that hold bytes (LangGraph's serialised values, a vector's float32)
BLOBS: dict[str, tuple[str, ...]] = {
    "lg_checkpoints": ("checkpoint", "metadata"),
    "lg_blobs": ("blob",),
    "lg_writes": ("value",),
    "lg_items": (),
    "lg_item_vectors": ("vector",),
}
THREAD_TABLES = ("lg_checkpoints", "lg_blobs", "lg_writes")
ITEM_TABLES = ("lg_items", "lg_item_vectors")


def ddl(statement: str, dialect: str) -> str:
    """PostgreSQL's spelling of a CREATE statement: BYTEA for BLOB, text ordered byte-wise."""
    if dialect != "postgresql":
        return statement
    return re.sub(r"\bTEXT\b", 'TEXT COLLATE "C"', re.sub(r"\bBLOB\b", "BYTEA", statement))


def migrate(query: Query, dialect: str) -> list[str]:
    """Apply the ``lg_*`` migrations the database lacks, in the caller's transaction (serialised
    across processes by SQLite's write lock or a PostgreSQL advisory lock); the names applied."""
    known = [name for name, _ in MIGRATIONS]
    if dialect == "postgresql":
        query("SELECT pg_advisory_xact_lock(hashtextextended(CAST(? AS TEXT), 0))", ("memstack.lg_migrate",))
    query("CREATE TABLE IF NOT EXISTS lg_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)", ())
    applied = [row[0] for row in query("SELECT name FROM lg_migrations", ())]
    unknown = sorted(name for name in applied if name not in known)
    if unknown:
        raise SchemaError(
            f"database has LangGraph adapter migrations unknown to this memstack version: {', '.join(unknown)}; upgrade memstack"
        )
    done = []
    for name, script in MIGRATIONS:
        if name not in applied:
            for statement in script.split(";"):
                if statement.strip():
                    query(ddl(statement, dialect), ())
            query("INSERT INTO lg_migrations VALUES (?, ?)", (name, utcnow().isoformat()))
            done.append(name)
    return done


def present(query: Query, dialect: str) -> bool:
    """Whether the database has the adapters' tables (an adapter ever opened them)."""
    sql = (
        "SELECT 1 WHERE to_regclass(CAST(? AS TEXT)) IS NOT NULL"
        if dialect == "postgresql"
        else ("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
    )
    return bool(query(sql, ("lg_migrations",)))


def tenants(query: Query) -> list[str]:
    """The tenants with a row in any of the tables, sorted."""
    union = " UNION ".join(f"SELECT tenant FROM {t}" for t in COLUMNS)
    return sorted(row[0] for row in query(f"SELECT DISTINCT tenant FROM ({union}) AS t", ()))


def threads(query: Query, tenant: str, users: Sequence[str] | None) -> list[str]:
    """The tenant's thread ids (None: all of them, tagged or not), or those of ``users`` (a thread
    with a checkpoint tagged with one of them), sorted."""
    if users is None:
        union = " UNION ".join(f"SELECT thread_id FROM {t} WHERE tenant = ?" for t in THREAD_TABLES)
        return sorted(row[0] for row in query(f"SELECT DISTINCT thread_id FROM ({union}) AS t", (tenant,) * len(THREAD_TABLES)))
    found: set[str] = set()
    for user in users:
        found.update(
            row[0] for row in query("SELECT DISTINCT thread_id FROM lg_checkpoints WHERE tenant = ? AND user_id = ?", (tenant, user))
        )
    return sorted(found)


def thread_rows(query: Query, tenant: str, thread_id: str) -> dict[str, list[tuple]]:
    """A thread's rows, per table, in key order."""
    return {
        t: query(
            f"SELECT {', '.join(COLUMNS[t])} FROM {t} WHERE tenant = ? AND thread_id = ? ORDER BY {', '.join(KEYS[t])}", (tenant, thread_id)
        )
        for t in THREAD_TABLES
    }


def item_rows(query: Query, tenant: str) -> dict[str, list[tuple]]:
    """The tenant's items of LangGraph's key-value store (and their vectors), per table, in key order."""
    return {
        t: query(f"SELECT {', '.join(COLUMNS[t])} FROM {t} WHERE tenant = ? ORDER BY {', '.join(KEYS[t])}", (tenant,)) for t in ITEM_TABLES
    }


def insert(query: Query, table: str, rows: Sequence[Sequence[Any]]) -> int:
    """Insert the rows a table lacks (by its key: a row held already is left as it is, so a rerun
    stores nothing twice); returns the rows inserted."""
    columns = COLUMNS[table]
    sql = (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
        f"ON CONFLICT ({', '.join(KEYS[table])}) DO NOTHING RETURNING 1"
    )
    return sum(len(query(sql, tuple(row))) for row in rows)
