"""PostgreSQL backend: the four stores as tables in one database, shared through a connection pool.

Semantics follow ``memstack.backends.memory``; the differences: data is durable, timestamps
come back in UTC (the same instants), values PostgreSQL cannot store (NUL characters, NaN,
non-JSON metadata) are InvalidInput, and ``claim`` takes the job that has waited longest.
Every call is one transaction, so ``append`` stores messages and requests their jobs atomically.
psycopg errors are translated once, at the boundary (``translate_errors``): data PostgreSQL
rejects becomes InvalidInput, everything else StoreError.

The schema is built by append-only named ``MIGRATIONS``, applied in order under an advisory lock
and recorded in ``memstack_migrations``; a database with a migration this code does not know is
newer than this code and raises SchemaError. Leases use the database clock (``now()``) only.

Appends to one thread are serialised by a per-thread advisory lock, so message ``seq`` numbers
of a thread become visible in increasing order: a layer that consumed messages up to seq N never
later finds a committed message of that thread with a smaller seq.
"""

from __future__ import annotations

import json
import math
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput, SchemaError, StoreError, require
from ..stores import ANY, check_last
from ..types import Checkpoint, Deletion, Job, Message, Scope, ThreadInfo, ToolCall, aware, by_time
from .adapter_rows import delete_checkpoints, postgres_runner
from .deletions import counted_as, tally
from .pg_steps import Sql, Steps, run

if TYPE_CHECKING:
    from psycopg import Connection, Cursor

    from .pg_async import AsyncPostgresHistory

Key = tuple[str, str, str, str]
Migration = str | Callable[["Cursor[Any]"], None]

KEY_COLUMNS = "tenant, user_id, agent_id, thread_id"
KEY_MATCH = "tenant = %s AND user_id = %s AND agent_id = %s AND thread_id = %s"
USER_MATCH = "tenant = %s AND user_id = %s"
MAX_IDENTIFIER_BYTES = 63  # PostgreSQL silently truncates longer names (NAMEDATALEN - 1)

MIGRATIONS: list[tuple[str, Migration]] = [
    (
        "0001_initial",
        """
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
        """,
    ),
]


#: Tables with (tenant, user_id, agent_id, thread_id) columns: delete_user and delete_thread
#: clear them in one transaction. Modules that add tables extend these lists.
USER_TABLES: list[str] = ["memstack_messages", "memstack_state", "memstack_checkpoints", "memstack_jobs"]
THREAD_TABLES: list[str] = ["memstack_state", "memstack_checkpoints", "memstack_jobs"]


# ---- connection, errors and schema ----------------------------------------------------------


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


def to_json(value: Any, *, field: str) -> str:
    """``value`` as JSON text for a jsonb column; NaN and infinities are not JSON and are refused."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field} is not JSON-serialisable: {exc}", field=field) from exc


def thread_lock_key(schema: str, key: Key) -> str:
    """Text naming one thread for its advisory lock (ids cannot hold control characters)."""
    return "\x1f".join(("memstack.thread", schema, *key))


def lock_thread(cur: Cursor[Any], schema: str, key: Key) -> None:
    """Hold the thread's lock until the transaction ends (serialises appends to one thread)."""
    cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (thread_lock_key(schema, key),))


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
            f"the memstack tables in schema {schema!r} have migrations this version of memstack does not know "
            f"({', '.join(unknown)}); they were made by a newer memstack: upgrade memstack"
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


# ---- rows <-> values -------------------------------------------------------------------------


def scope_from_key(tenant: str, user_id: str, agent_id: str, thread_id: str) -> Scope:
    return Scope(tenant=tenant, user_id=user_id, agent_id=agent_id or None, thread_id=thread_id or None)


def message_params(key: Key, m: Message) -> tuple[Any, ...]:
    content = m.content if isinstance(m.content, str) else [dict(p) for p in m.content]
    return (
        *key,
        m.id,
        m.role,
        to_json(content, field="content"),
        m.name,
        to_json([tc.to_openai() for tc in m.tool_calls], field="tool_calls"),
        m.tool_call_id,
        m.timestamp,
        to_json(dict(m.metadata), field="metadata"),
    )


def read_ts(column: str) -> str:
    """``column`` kept within what a Python datetime holds: one stored before timestamps were kept
    to years 1900..9000 (9999-12-31T23:59:59-14:00 is year 10000 in UTC) reads as the last
    datetime instead of failing every read of its user."""
    return f"LEAST(GREATEST({column}, '0001-01-01 00:00:00+00'::timestamptz), '9999-12-31 23:59:59.999999+00'::timestamptz)"


MESSAGE_COLUMNS = f"seq, id, role, content, name, tool_calls, tool_call_id, {read_ts('ts')}, metadata"


def message_from_row(row: Sequence[Any]) -> Message:
    seq, id_, role, content, name, tool_calls, tool_call_id, ts, metadata = row
    return Message(
        role=role,
        content=content if isinstance(content, str) else tuple(content),
        name=name,
        tool_calls=tuple(ToolCall.from_openai(tc) for tc in tool_calls),
        tool_call_id=tool_call_id,
        id=id_,
        timestamp=ts,
        metadata=metadata,
        seq=seq,
    )


def checkpoint_from_row(row: Sequence[Any]) -> Checkpoint:
    tenant, user_id, agent_id, thread_id, id_, created_at, data = row
    return Checkpoint(id_, scope_from_key(tenant, user_id, agent_id, thread_id), created_at, data)


# ---- the store -------------------------------------------------------------------------------


class _Database:
    """The pool, the schema name and one-transaction-per-call access with translated errors."""

    def __init__(self, psycopg: ModuleType, pool: Any, schema: str) -> None:
        self.psycopg = psycopg
        self.pool = pool
        self.schema = schema

    @contextmanager
    def transaction(self, doing: str) -> Iterator[Cursor[Any]]:
        with translate_errors(self.psycopg, doing), self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur


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
        self._db = _Database(psycopg, pool, schema)
        self._pool_options = {
            "connect_kwargs": connect_kwargs,
            "min_size": min_size,
            "max_size": max_size,
            "open_timeout": connect_timeout,
            "pool_timeout": pool_timeout,
        }
        self.history = _History(self._db)
        self.state = _State(self._db)
        self.profiles = _Profiles(self._db)
        self.checkpoints = _Checkpoints(self._db)
        self.jobs = _Jobs(self._db)
        self.units = PostgresUnits(self._db)
        self.vectors = PgVectorIndex(self._db)
        self.embeddings = PgEmbeddingCache(self._db)
        self.records = PostgresRecords(self._db)
        self.usage = PostgresUsage(self._db)

    def delete_user(self, scope: Scope, *, layer: str = "library") -> int:
        with self._db.transaction("deleting a user") as cur:
            counts = []
            for table in USER_TABLES:
                cur.execute(f"DELETE FROM {table} WHERE {USER_MATCH}", (scope.tenant, scope.user_id))
                counts.append((counted_as(table), cur.rowcount))
            counts.append(("other", delete_checkpoints(postgres_runner(cur), "postgresql", scope)))  # the LangGraph saver's, if any
            return record_deletion(cur, scope.user(), "user", tally(counts), layer=layer).rows

    def note_deletion(self, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None) -> Deletion:
        """Note a deletion made outside delete_user and delete_thread (a saved memory's)."""
        with self._db.transaction("noting a deletion") as cur:
            return record_deletion(cur, scope, kind, counts, layer=layer, name=name)

    def async_history(self) -> AsyncPostgresHistory:
        """The history's request-path calls on psycopg's async pool (``stores.AsyncHistory``):
        the same database, schema, statements and pool sizes as this store, opened on first use."""
        from .pg_async import AsyncPostgresHistory

        return AsyncPostgresHistory(self.url, self._db.schema, **self._pool_options)

    def deletions(self, tenant: str, *, user_id: str | None = None) -> list[Deletion]:
        """The tenant's deletion notes (of one user: ``user_id``), oldest first."""
        return read_deletions(self._db, tenant, user_id)

    def close(self) -> None:
        self._db.pool.close()

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self._db.schema!r})"


class _History:
    def __init__(self, db: _Database) -> None:
        self._db = db

    def append(
        self, scope: Scope, messages: Sequence[Message], *, enqueue: Sequence[str] = (), expect_last: int | None | object = ANY
    ) -> list[Message]:
        with self._db.transaction("appending messages") as cur:
            return run(cur, append_steps(self._db.schema, scope, messages, enqueue, expect_last))

    def read(
        self,
        scope: Scope,
        *,
        after: int | None = None,
        until: datetime | None = None,
        last: int | None = None,
        roles: Sequence[str] | None = None,
        order: str = "append",
    ) -> list[Message]:
        with self._db.transaction("reading messages") as cur:
            return run(cur, read_steps(scope, after=after, until=until, last=last, roles=roles, order=order))

    def users(self, tenant: str) -> list[str]:
        with self._db.transaction("listing users") as cur:
            cur.execute("SELECT DISTINCT user_id FROM memstack_messages WHERE tenant = %s ORDER BY user_id", (tenant,))
            return [row[0] for row in cur.fetchall()]

    def threads(self, scope: Scope) -> list[ThreadInfo]:
        with self._db.transaction("listing threads") as cur:
            return run(cur, threads_steps(scope))

    def delete_thread(self, scope: Scope, *, layer: str = "library") -> int:
        key = scope.require_thread().key
        with self._db.transaction("deleting a thread") as cur:
            lock_thread(cur, self._db.schema, key)
            cur.execute(f"DELETE FROM memstack_messages WHERE {KEY_MATCH}", key)
            deleted = cur.rowcount
            counts = [("messages", deleted)]
            for table in THREAD_TABLES:
                cur.execute(f"DELETE FROM {table} WHERE {KEY_MATCH}", key)
                counts.append((counted_as(table), cur.rowcount))
            counts.append(("other", delete_checkpoints(postgres_runner(cur), "postgresql", scope, thread_id=scope.thread_id)))
            record_deletion(cur, scope, "thread", tally(counts), layer=layer)
            return deleted


# ---- the history's statements, as steps (``pg_steps``): the same SQL for PostgresStore and the async path


def append_steps(
    schema: str, scope: Scope, messages: Sequence[Message], enqueue: Sequence[str], expect_last: int | None | object
) -> Steps[list[Message]]:
    """``HistoryStore.append``: under the thread's lock, check the tail, insert, request the jobs."""
    key = scope.require_thread().key
    params = [message_params(key, m) for m in messages]
    yield Sql("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (thread_lock_key(schema, key),))
    if expect_last is not ANY:  # the thread's lock is held: nobody appends in between
        row = yield Sql(f"SELECT max(seq) FROM memstack_messages WHERE {KEY_MATCH}", key, fetch="one")
        check_last(expect_last, row[0])
    seqs: list[int | None] = []
    if params:  # in order; the seq of each stored message, None for an id the thread holds
        seqs = yield Sql(
            f"""INSERT INTO memstack_messages ({KEY_COLUMNS}, id, role, content, name, tool_calls, tool_call_id, ts, metadata)
                VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s::jsonb, %s, %s, %s::jsonb)
                ON CONFLICT (tenant, user_id, agent_id, thread_id, id) DO NOTHING
                RETURNING seq""",
            params,
            many=True,
            fetch="each",
        )
    yield from request_jobs_steps(key, enqueue)
    return [replace(m, seq=seq) for m, seq in zip(messages, seqs, strict=True) if seq is not None]


def read_steps(
    scope: Scope,
    *,
    after: int | None = None,
    until: datetime | None = None,
    last: int | None = None,
    roles: Sequence[str] | None = None,
    order: str = "append",
) -> Steps[list[Message]]:
    """``HistoryStore.read``."""
    key = scope.require_thread().key
    if until is not None:
        until = aware(until, field_name="until")
    if last is not None and last <= 0:
        return []
    conditions, params = [KEY_MATCH], list(key)
    if after is not None:
        conditions.append("seq > %s")
        params.append(after)
    if until is not None:
        conditions.append("ts <= %s")
        params.append(until)
    if roles is not None:
        conditions.append("role = ANY(%s)")
        params.append(list(roles))
    query = f"SELECT {MESSAGE_COLUMNS} FROM memstack_messages WHERE {' AND '.join(conditions)}"
    if by_time(order):  # newest first, so that LIMIT keeps the last n; returned oldest first
        query += " ORDER BY ts DESC, seq DESC" + (" LIMIT %s" if last is not None else "")
        rows = yield Sql(query, [*params, last] if last is not None else params, fetch="all")
        return [message_from_row(row) for row in reversed(rows)]
    if last is None:
        query += " ORDER BY seq"
    else:
        query = f"SELECT * FROM ({query} ORDER BY seq DESC LIMIT %s) AS tail ORDER BY seq"
        params.append(last)
    rows = yield Sql(query, params, fetch="all")
    return [message_from_row(row) for row in rows]


def threads_steps(scope: Scope) -> Steps[list[ThreadInfo]]:
    """``HistoryStore.threads``: most recent activity first."""
    conditions, params = USER_MATCH, [scope.tenant, scope.user_id]
    if scope.agent_id is not None:
        conditions += " AND agent_id = %s"
        params.append(scope.agent_id)
    rows = yield Sql(
        f"""SELECT thread_id, agent_id, count(*), {read_ts("min(ts)")}, {read_ts("max(ts)")} FROM memstack_messages WHERE {conditions}
            GROUP BY agent_id, thread_id ORDER BY max(ts) DESC, thread_id DESC, agent_id DESC""",
        params,
        fetch="all",
    )
    return [ThreadInfo(thread_id, agent_id or None, n, first, last) for thread_id, agent_id, n, first, last in rows]


def pending_steps(scope: Scope | None) -> Steps[int]:
    """``JobQueue.pending``: jobs with work not yet done, the user's or the whole store's."""
    user_filter, params = ("", []) if scope is None else (f"AND {USER_MATCH}", [scope.tenant, scope.user_id])
    row = yield Sql(f"SELECT count(*) FROM memstack_jobs WHERE requested > done {user_filter}", params, fetch="one")
    return row[0] if row else 0


def request_jobs_steps(key: Key, layers: Sequence[str]) -> Steps[None]:
    """Count one more request per layer name (a name given twice counts twice)."""
    counts = Counter(layers)
    if not counts:
        return
    yield Sql(
        f"""INSERT INTO memstack_jobs ({KEY_COLUMNS}, layer, requested) VALUES (%s, %s, %s, %s, %s, %s)
            ON CONFLICT (tenant, user_id, agent_id, thread_id, layer) DO UPDATE SET
                requested = memstack_jobs.requested + excluded.requested,
                pending_since = CASE WHEN memstack_jobs.requested > memstack_jobs.done
                                     THEN memstack_jobs.pending_since ELSE now() END""",
        [(*key, layer, n) for layer, n in counts.items()],
        many=True,
    )


class _State:
    def __init__(self, db: _Database) -> None:
        self._db = db

    def get(self, scope: Scope, name: str = "state") -> dict[str, Any] | None:
        with self._db.transaction("reading state") as cur:
            cur.execute(f"SELECT value FROM memstack_state WHERE {KEY_MATCH} AND name = %s", (*scope.key, name))
            row = cur.fetchone()
            return row[0] if row else None

    def put(self, scope: Scope, value: Mapping[str, Any], name: str = "state") -> None:
        data = to_json(value, field="value")
        with self._db.transaction("writing state") as cur:
            cur.execute(
                f"""INSERT INTO memstack_state ({KEY_COLUMNS}, name, value) VALUES (%s, %s, %s, %s, %s, %s::jsonb)
                    ON CONFLICT (tenant, user_id, agent_id, thread_id, name) DO UPDATE SET value = excluded.value, updated_at = now()""",
                (*scope.key, name, data),
            )

    def delete(self, scope: Scope, name: str = "state") -> bool:
        with self._db.transaction("deleting state") as cur:
            cur.execute(f"DELETE FROM memstack_state WHERE {KEY_MATCH} AND name = %s", (*scope.key, name))
            return cur.rowcount > 0

    def swap(self, scope: Scope, value: Mapping[str, Any] | None, *, expect: Mapping[str, Any] | None, name: str = "state") -> bool:
        data = None if value is None else to_json(value, field="value")
        with self._db.transaction("swapping state") as cur:
            if expect is None:  # absent: the insert itself is the check (a concurrent one conflicts)
                if data is None:
                    cur.execute(f"SELECT 1 FROM memstack_state WHERE {KEY_MATCH} AND name = %s", (*scope.key, name))
                    return cur.fetchone() is None
                cur.execute(
                    f"""INSERT INTO memstack_state ({KEY_COLUMNS}, name, value) VALUES (%s, %s, %s, %s, %s, %s::jsonb)
                        ON CONFLICT (tenant, user_id, agent_id, thread_id, name) DO NOTHING""",
                    (*scope.key, name, data),
                )
                return cur.rowcount > 0
            wanted = to_json(expect, field="expect")
            if data is None:
                cur.execute(f"DELETE FROM memstack_state WHERE {KEY_MATCH} AND name = %s AND value = %s::jsonb", (*scope.key, name, wanted))
            else:
                cur.execute(
                    f"UPDATE memstack_state SET value = %s::jsonb, updated_at = now() WHERE {KEY_MATCH} AND name = %s AND value = %s::jsonb",
                    (data, *scope.key, name, wanted),
                )
            return cur.rowcount > 0


class _Profiles:
    def __init__(self, db: _Database) -> None:
        self._db = db

    def get(self, tenant: str) -> dict[str, Any] | None:
        with self._db.transaction("reading the memory profile") as cur:
            cur.execute("SELECT value FROM memstack_profiles WHERE tenant = %s", (tenant,))
            row = cur.fetchone()
            return row[0] if row else None

    def put(self, tenant: str, value: Mapping[str, Any], *, replace: bool = False) -> dict[str, Any]:
        data = to_json(value, field="profile")
        conflict = "DO UPDATE SET value = excluded.value, updated_at = now()" if replace else "DO NOTHING"
        with self._db.transaction("writing the memory profile") as cur:
            cur.execute(
                f"INSERT INTO memstack_profiles (tenant, value) VALUES (%s, %s::jsonb) ON CONFLICT (tenant) {conflict}", (tenant, data)
            )
            cur.execute("SELECT value FROM memstack_profiles WHERE tenant = %s", (tenant,))
            return cur.fetchone()[0]


CHECKPOINT_COLUMNS = f"{KEY_COLUMNS}, id, created_at, data"


class _Checkpoints:
    def __init__(self, db: _Database) -> None:
        self._db = db

    def save(self, scope: Scope, data: Mapping[str, Any], *, keep: int = 10, at: datetime | None = None) -> Checkpoint:
        if keep < 1:
            raise InvalidInput("keep must be at least 1", field="keep")
        key = scope.require_thread().key
        created_at = aware(at) if at else None
        payload = to_json(data, field="data")
        with self._db.transaction("saving a checkpoint") as cur:
            lock_thread(cur, self._db.schema, key)
            cur.execute(
                f"""INSERT INTO memstack_checkpoints ({CHECKPOINT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, coalesce(%s, now()), %s::jsonb)
                    RETURNING {CHECKPOINT_COLUMNS}""",
                (*key, uuid.uuid4().hex, created_at, payload),
            )
            saved = checkpoint_from_row(cur.fetchone())
            cur.execute(
                f"""DELETE FROM memstack_checkpoints WHERE {KEY_MATCH} AND n NOT IN
                    (SELECT n FROM memstack_checkpoints WHERE {KEY_MATCH} ORDER BY n DESC LIMIT %s)""",
                (*key, *key, keep),
            )
        return saved

    def latest(self, scope: Scope) -> Checkpoint | None:
        found = self._newest(scope, limit=1)
        return found[0] if found else None

    def list(self, scope: Scope) -> list[Checkpoint]:
        return self._newest(scope, limit=None)

    def _newest(self, scope: Scope, *, limit: int | None) -> list[Checkpoint]:
        key = scope.require_thread().key
        with self._db.transaction("reading checkpoints") as cur:
            cur.execute(f"SELECT {CHECKPOINT_COLUMNS} FROM memstack_checkpoints WHERE {KEY_MATCH} ORDER BY n DESC LIMIT %s", (*key, limit))
            return [checkpoint_from_row(row) for row in cur.fetchall()]


class _Jobs:
    def __init__(self, db: _Database) -> None:
        self._db = db

    def claim(self, *, worker: str, lease_seconds: float = 300.0, scope: Scope | None = None, waiting: bool = False) -> Job | None:
        """Lease the longest-waiting claimable job (in the scope's user, if given) to ``worker``."""
        user_filter, params = ("", []) if scope is None else (f"AND {USER_MATCH}", [scope.tenant, scope.user_id])
        with self._db.transaction("claiming a job") as cur:
            cur.execute(
                f"""WITH picked AS (
                        SELECT {KEY_COLUMNS}, layer FROM memstack_jobs
                        WHERE (lease_until IS NULL OR lease_until <= now())
                          AND (not_before IS NULL OR not_before <= now())
                          AND (requested > done OR (%s AND waiting)) {user_filter}
                        ORDER BY pending_since LIMIT 1 FOR UPDATE SKIP LOCKED)
                    UPDATE memstack_jobs AS j SET owner = %s, lease_until = now() + make_interval(secs => %s)
                    FROM picked
                    WHERE (j.tenant, j.user_id, j.agent_id, j.thread_id, j.layer)
                        = (picked.tenant, picked.user_id, picked.agent_id, picked.thread_id, picked.layer)
                    RETURNING j.tenant, j.user_id, j.agent_id, j.thread_id, j.layer, j.requested, j.cursor, j.attempts, j.last_error""",
                (waiting, *params, worker, lease_seconds),
            )
            row = cur.fetchone()
        if row is None:
            return None
        tenant, user_id, agent_id, thread_id, layer, requested, cursor, attempts, last_error = row
        return Job(scope_from_key(tenant, user_id, agent_id, thread_id), layer, requested, cursor, attempts, worker, last_error)

    def complete(self, job: Job, *, cursor: int, waiting: bool = False) -> bool:
        """Record the version done and the cursor, if the job is still this worker's; a row
        deleted meanwhile is left deleted."""
        with self._db.transaction("completing a job") as cur:
            cur.execute(
                f"""UPDATE memstack_jobs SET done = greatest(done, %s), cursor = greatest(cursor, %s),
                        attempts = 0, last_error = NULL, not_before = NULL, waiting = %s, lease_until = NULL, owner = NULL
                    WHERE {KEY_MATCH} AND layer = %s AND owner = %s""",
                (job.version, cursor, waiting, *job.scope.key, job.layer, job.worker),
            )
            return cur.rowcount == 1

    def renew(self, job: Job, *, lease_seconds: float) -> bool:
        """Extend the lease from now (database clock), if the job is still this worker's."""
        with self._db.transaction("renewing a job's lease") as cur:
            cur.execute(
                f"UPDATE memstack_jobs SET lease_until = now() + make_interval(secs => %s) WHERE {KEY_MATCH} AND layer = %s AND owner = %s",
                (lease_seconds, *job.scope.key, job.layer, job.worker),
            )
            return cur.rowcount == 1

    def fail(self, job: Job, error: str, *, retry_in: float) -> None:
        """Count the attempt and keep the job until ``retry_in`` seconds from now (database clock)."""
        with self._db.transaction("failing a job") as cur:
            cur.execute(
                f"""UPDATE memstack_jobs SET attempts = attempts + 1, last_error = %s,
                        not_before = now() + make_interval(secs => %s), lease_until = NULL, owner = NULL
                    WHERE {KEY_MATCH} AND layer = %s AND (owner IS NULL OR owner = %s)""",
                (error, retry_in, *job.scope.key, job.layer, job.worker),
            )

    def pending(self, scope: Scope | None = None) -> int:
        with self._db.transaction("counting pending jobs") as cur:
            return run(cur, pending_steps(scope))


# Retrieval and record storage live in their own modules; their migrations follow the core's.
from .pg_records import (  # noqa: E402
    DELETION_KEY_MIGRATION,
    DELETION_NOTES_MIGRATION,
    RECORD_MIGRATIONS,
    RECORD_TABLES,
    PostgresRecords,
    PostgresUsage,
    read_deletions,
    record_deletion,
)
from .pg_units import UNIT_MIGRATIONS, UNIT_TABLES, PostgresUnits  # noqa: E402
from .pg_vectors import VECTOR_MIGRATIONS, VECTOR_TABLES, PgEmbeddingCache, PgVectorIndex  # noqa: E402

MIGRATIONS += (
    UNIT_MIGRATIONS
    + VECTOR_MIGRATIONS
    + RECORD_MIGRATIONS
    + [
        (
            "0006_job_waiting",
            "ALTER TABLE memstack_jobs ADD COLUMN waiting boolean NOT NULL DEFAULT false; CREATE INDEX memstack_jobs_waiting ON memstack_jobs (pending_since) WHERE waiting",
        ),
        (
            "0007_profiles",
            "CREATE TABLE memstack_profiles (tenant TEXT PRIMARY KEY, value JSONB NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        ),
        DELETION_KEY_MIGRATION,
        DELETION_NOTES_MIGRATION,
    ]
)
USER_TABLES += UNIT_TABLES + VECTOR_TABLES + RECORD_TABLES
THREAD_TABLES += UNIT_TABLES + VECTOR_TABLES + RECORD_TABLES
