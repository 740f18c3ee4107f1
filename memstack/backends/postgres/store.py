"""The PostgreSQL store: the four stores as tables in one schema, shared through a connection pool.

Semantics follow the in-memory store's (``memory``); the differences: data is durable, timestamps
come back in UTC (the same instants), values PostgreSQL cannot store (NUL characters, NaN,
non-JSON metadata) are InvalidInput, and ``claim`` takes the job that has waited longest.
Every call is one transaction, so ``append`` stores messages and requests their jobs atomically.
psycopg errors are translated once, at the boundary (``database.translate_errors``).

Each part is a module of its own over the store's ``Database``: ``history`` (and its async twin
``aio``), ``documents`` (state, profiles, checkpoints), ``jobs``, ``records``, ``units``,
``vectors``; the schema is made by ``migrations``, one ordered list. The store itself deletes a
user across all of their tables in one transaction and keeps the notes of deletions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial

from ...types import Deletion, Expiry, Scope
from ..rules.deletions import counted_as, tally
from ..sql.adapter_rows import delete_checkpoints
from ..sql.deletions import held_key, noted_tenants_query, restore_notes
from ..sql.dialect import POSTGRES
from ..sql.expiry import expire
from ..sql.records import SQLUsage
from ..sql.tenants import tenants_query
from .aio import AsyncPostgresHistory
from .database import Database, check_schema_name, load_driver, open_pool, session_setup, translate_errors
from .deletions import read_deletions, record_deletion
from .documents import PostgresCheckpoints, PostgresProfiles, PostgresState
from .history import PostgresHistory
from .jobs import PostgresJobs
from .migrations import USER_TABLES, migrate
from .records import PostgresRecords
from .units import PostgresUnits
from .vectors import PgEmbeddingCache, PgVectorIndex


class PostgresStore:
    """All four stores in one PostgreSQL schema (it satisfies each Protocol through its attributes).

    ``url_or_dsn`` is a ``postgresql://`` or ``postgres://`` URL or a libpq ``key=value`` string.
    Opening connects once (failing within ``connect_timeout`` seconds with StoreError), migrates
    the schema, then opens a pool of ``min_size`` to ``max_size`` connections; a call waits up
    to ``pool_timeout`` seconds for a free connection.
    """

    def __init__(
        self,
        url_or_dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str = "public",
        connect_timeout: float = 5.0,
        pool_timeout: float = 30.0,
    ) -> None:
        psycopg, pool_module = load_driver()
        schema = check_schema_name(schema)
        self.url = url_or_dsn
        connect_kwargs = {"connect_timeout": max(1, math.ceil(connect_timeout)), "autocommit": True}
        with translate_errors(psycopg, "connecting"):
            with psycopg.connect(url_or_dsn, **connect_kwargs) as conn:
                session_setup(schema)(conn)
                migrate(conn, schema)
            pool = open_pool(
                pool_module,
                url_or_dsn,
                schema,
                connect_kwargs,
                size=(min_size, max_size),
                open_timeout=connect_timeout,
                pool_timeout=pool_timeout,
            )
        self._db = Database(psycopg, pool, schema)
        self._pool_options = {
            "connect_kwargs": connect_kwargs,
            "min_size": min_size,
            "max_size": max_size,
            "open_timeout": connect_timeout,
            "pool_timeout": pool_timeout,
        }
        self.history = PostgresHistory(self._db)
        self.state = PostgresState(self._db)
        self.profiles = PostgresProfiles(self._db)
        self.checkpoints = PostgresCheckpoints(self._db)
        self.jobs = PostgresJobs(self._db)
        self.units = PostgresUnits(self._db)
        self.vectors = PgVectorIndex(self._db)
        self.embeddings = PgEmbeddingCache(self._db)
        self.records = PostgresRecords(self._db)
        self.usage = SQLUsage(POSTGRES, self._db.transaction, partial(self._db.fetch, "reading model usage"))

    def delete_user(self, scope: Scope, *, layer: str = "library") -> int:
        with self._db.transaction("deleting a user") as cur:
            counts = []
            for table in USER_TABLES:
                cur.execute(f"DELETE FROM {table} WHERE {POSTGRES.user}", (scope.tenant, scope.user_id))
                counts.append((counted_as(table), cur.rowcount))
            counts.append(("other", delete_checkpoints(cur.execute, POSTGRES, scope)))  # the LangGraph saver's, if any
            return record_deletion(cur, scope.user(), "user", tally(counts), layer=layer).rows

    def expire(self, tenant: str, expiry: Expiry, *, layer: str = "retention") -> list[Deletion]:
        """Delete what of the tenant ``expiry`` says is too old, one transaction and note per user."""
        return expire(self._db.transaction, POSTGRES, tenant, expiry, record_deletion, layer=layer)

    def note_deletion(self, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None) -> Deletion:
        """Note a deletion made outside delete_user and delete_thread (a saved memory's)."""
        with self._db.transaction("noting a deletion") as cur:
            return record_deletion(cur, scope, kind, counts, layer=layer, name=name)

    def async_history(self) -> AsyncPostgresHistory:
        """The history's request-path calls on psycopg's async pool (``stores.AsyncHistory``):
        the same database, schema, statements and pool sizes as this store, opened on first use."""
        return AsyncPostgresHistory(self.url, self._db.schema, **self._pool_options)

    def tenants(self) -> list[str]:
        with self._db.transaction("listing tenants") as cur:
            return [row[0] for row in cur.execute(tenants_query(POSTGRES)).fetchall()]

    def deletions(self, tenant: str, *, user_id: str | None = None) -> list[Deletion]:
        """The tenant's deletion notes (of one user: ``user_id``), oldest first."""
        return read_deletions(self._db, tenant, user_id)

    def noted_tenants(self) -> list[str]:
        with self._db.transaction("listing tenants with deletion notes") as cur:
            return [row[0] for row in cur.execute(noted_tenants_query(POSTGRES)).fetchall()]

    def deletion_key(self) -> bytes | None:
        """The key of the deletion notes' hashes (None: nothing deleted yet); a secret."""
        with self._db.transaction("reading the deletion key") as cur:
            return held_key(cur.execute, POSTGRES)

    def restore_deletions(self, key: bytes, notes: Sequence[Deletion]) -> int:
        """Store notes made under ``key`` verbatim, adopting it (``rules.deletions.adopts``), in one transaction."""
        with self._db.transaction("restoring deletion notes") as cur:
            cur.execute("LOCK TABLE memstack_deletion_key IN EXCLUSIVE MODE")
            return restore_notes(cur.execute, POSTGRES, key, notes)

    def close(self) -> None:
        self._db.pool.close()

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self._db.schema!r})"
