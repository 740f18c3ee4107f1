"""The PostgreSQL history: messages, their statements written once as steps (``steps``) for the
blocking store and the async path (``aio``), and the job requests an append makes.

Appends to one thread are serialised by a per-thread advisory lock, so message ``seq`` numbers
of a thread become visible in increasing order: a layer that consumed messages up to seq N never
later finds a committed message of that thread with a smaller seq. Timestamps come back in UTC
(the same instants).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Unpack

from ...stores import ANY, ReadOptions, check_last
from ...types import Message, Scope, ThreadInfo, ToolCall
from ..rules.deletions import counted_as, tally
from ..sql.adapter_rows import delete_checkpoints
from ..sql.dialect import POSTGRES
from ..sql.history import read_query
from .database import KEY_COLUMNS, Database, Key, lock_thread, thread_lock_key, to_json
from .deletions import record_deletion
from .migrations import THREAD_TABLES
from .steps import Sql, Steps, run

KEY_MATCH = POSTGRES.key
USER_MATCH = POSTGRES.user


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


def read_steps(scope: Scope, options: ReadOptions) -> Steps[list[Message]]:
    """``HistoryStore.read``."""
    select = read_query(POSTGRES, MESSAGE_COLUMNS, scope.require_thread().key, options)
    if select is None:
        return []
    rows = yield Sql(select.sql, select.params, fetch="all")
    return [message_from_row(row) for row in select.in_order(rows)]


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


class PostgresHistory:
    """The HistoryStore of a PostgresStore; appends to one thread take turns (``lock_thread``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def append(
        self, scope: Scope, messages: Sequence[Message], *, enqueue: Sequence[str] = (), expect_last: int | None | object = ANY
    ) -> list[Message]:
        with self._db.transaction("appending messages") as cur:
            return run(cur, append_steps(self._db.schema, scope, messages, enqueue, expect_last))

    def read(self, scope: Scope, **options: Unpack[ReadOptions]) -> list[Message]:
        with self._db.transaction("reading messages") as cur:
            return run(cur, read_steps(scope, options))

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
            counts.append(("other", delete_checkpoints(cur.execute, POSTGRES, scope, thread_id=scope.thread_id)))
            record_deletion(cur, scope, "thread", tally(counts), layer=layer)
            return deleted
