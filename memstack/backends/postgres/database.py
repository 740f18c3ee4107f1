"""The PostgreSQL connection: the driver, the pool, one transaction per call, errors translated.

psycopg is imported when a store opens (``load_driver``), so ``import memstack`` never needs it.
psycopg errors are translated once, at the boundary (``translate_errors``): data PostgreSQL
rejects becomes InvalidInput, everything else StoreError. Every connection searches the store's
schema only and reads timestamps in UTC (``session_setup``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ...errors import InvalidInput, StoreError, require
from ..sql.dialect import Fetch

if TYPE_CHECKING:
    from psycopg import Connection, Cursor

Key = tuple[str, str, str, str]

KEY_COLUMNS = "tenant, user_id, agent_id, thread_id"
MAX_IDENTIFIER_BYTES = 63  # PostgreSQL silently truncates longer names (NAMEDATALEN - 1)


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def check_schema_name(schema: str) -> str:
    if not isinstance(schema, str) or not schema or "\x00" in schema:
        raise InvalidInput("schema must be a non-empty string without NUL characters", field="schema")
    if len(schema.encode()) > MAX_IDENTIFIER_BYTES:
        raise InvalidInput(f"schema name is longer than {MAX_IDENTIFIER_BYTES} bytes", field="schema")
    return schema


def load_driver() -> tuple[ModuleType, ModuleType]:
    """psycopg and psycopg_pool, or MissingDependency naming the ``postgres`` extra."""
    psycopg = require("psycopg", extra="postgres", package="psycopg")
    pool = require("psycopg_pool", extra="postgres", package="psycopg-pool")
    return psycopg, pool


@contextmanager
def translate_errors(psycopg: ModuleType, doing: str) -> Iterator[None]:
    """Turn psycopg errors into memstack's: rejected data is InvalidInput, the rest StoreError."""
    try:
        yield
    except psycopg.DataError as exc:  # SQLSTATE class 22, or a NUL byte refused by the driver
        raise InvalidInput(f"PostgreSQL rejected the data while {doing}: {exc}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"PostgreSQL failed while {doing}: {exc}") from exc


def to_json(value: Any, *, field: str, what: str | None = None) -> str:
    """``value`` as JSON text for a jsonb column; NaN and infinities are not JSON and are refused
    (InvalidInput naming ``what`` the value is, by default its ``field``)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what or field} is not JSON-serialisable: {exc}", field=field) from exc


def thread_lock_key(schema: str, key: Key) -> str:
    """Text naming one thread for its advisory lock (ids cannot hold control characters)."""
    return "\x1f".join(("memstack.thread", schema, *key))


def lock_thread(cur: Cursor[Any], schema: str, key: Key) -> None:
    """Hold the thread's lock until the transaction ends (serialises appends to one thread)."""
    cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (thread_lock_key(schema, key),))


def session_setup(schema: str) -> Callable[[Connection[Any]], None]:
    """The pool's configure callback: the store's schema first, timestamps in UTC."""

    def configure(conn: Connection[Any]) -> None:
        conn.execute("SELECT set_config('search_path', %s, false), set_config('TimeZone', 'UTC', false)", (quote_identifier(schema),))

    return configure


def open_pool(
    pool_module: ModuleType,
    conninfo: str,
    schema: str,
    connect_kwargs: dict[str, Any],
    *,
    size: tuple[int, int],
    open_timeout: float,
    pool_timeout: float,
) -> Any:
    """A started ConnectionPool whose connections use ``schema`` and UTC and are checked on checkout."""
    pool = pool_module.ConnectionPool(
        conninfo,
        min_size=size[0],
        max_size=size[1],
        kwargs=connect_kwargs,
        configure=session_setup(schema),
        check=pool_module.ConnectionPool.check_connection,
        timeout=pool_timeout,
        name=f"memstack:{schema}",
        open=False,
    )
    try:
        pool.open(wait=True, timeout=open_timeout)
    except BaseException:
        pool.close()
        raise
    return pool


def extension_schema(cur: Cursor[Any]) -> str:
    """The schema pgvector is installed in (installing it in ``public`` if the server has it)."""
    cur.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'")
    row = cur.fetchone()
    if row is not None:
        return row[0]
    cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    if cur.fetchone() is None:
        raise StoreError(
            "this PostgreSQL server lacks the pgvector extension; install it (e.g. apt install postgresql-15-pgvector) and retry"
        )
    cur.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    return "public"


class Database:
    """The pool, the schema name and one-transaction-per-call access with translated errors."""

    def __init__(self, psycopg: ModuleType, pool: Any, schema: str) -> None:
        self.psycopg = psycopg
        self.pool = pool
        self.schema = schema

    @contextmanager
    def transaction(self, doing: str) -> Iterator[Cursor[Any]]:
        with translate_errors(self.psycopg, doing), self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    def fetch(self, doing: str, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Every row of one statement, in a transaction of its own."""
        with self.transaction(doing) as cur:
            cur.execute(sql, params)
            return cur.fetchall()


def fetch_with(cur: Cursor[Any]) -> Fetch:
    """The ``sql.dialect.Fetch`` of an open cursor: every row of one statement, in its transaction."""

    def fetch(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        cur.execute(sql, params)
        return cur.fetchall()

    return fetch
