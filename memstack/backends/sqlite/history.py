"""The SQLite history: messages in append order (``seq``), each timestamp kept twice, as the ISO
text it was given (an exact round trip, offset included) and as UTC microseconds (``ts_us``) for
filters and time order. ``append`` inserts the messages and bumps the layers' job rows in one
transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Unpack

from ...stores import ANY, ReadOptions, check_last
from ...types import Message, Scope, ThreadInfo, ToolCall, utcnow
from ..rules.deletions import counted_as, tally
from ..rules.time import epoch_us, from_us
from ..sql.adapter_rows import delete_checkpoints
from ..sql.dialect import SQLITE
from ..sql.history import read_query
from .database import Database
from .deletions import record_deletion
from .migrations import THREAD_TABLES

KEY = SQLITE.key
USER = SQLITE.user


def _row_to_message(row: tuple) -> Message:
    seq, id_, role, content, parts, name, tool_calls, tool_call_id, ts, metadata = row
    return Message(
        role=role,
        content=tuple(json.loads(content)) if parts else content,
        name=name,
        tool_calls=tuple(ToolCall(**tc) for tc in json.loads(tool_calls)) if tool_calls else (),
        tool_call_id=tool_call_id,
        id=id_,
        timestamp=datetime.fromisoformat(ts),
        metadata=json.loads(metadata) if metadata else {},
        seq=seq,
    )


def _message_row(scope: Scope, m: Message) -> tuple:
    parts = not isinstance(m.content, str)
    return (
        *scope.key,
        m.id,
        m.role,
        json.dumps([dict(p) for p in m.content], ensure_ascii=False) if parts else m.content,
        int(parts),
        m.name,
        json.dumps([{"id": t.id, "name": t.name, "arguments": t.arguments} for t in m.tool_calls], ensure_ascii=False)
        if m.tool_calls
        else None,
        m.tool_call_id,
        m.timestamp.isoformat(),
        epoch_us(m.timestamp),
        json.dumps(dict(m.metadata), ensure_ascii=False) if m.metadata else None,
    )


MESSAGE_COLUMNS = "seq, id, role, content, parts, name, tool_calls, tool_call_id, ts, metadata"


class SQLiteHistory:
    """The HistoryStore of a SQLiteStore; ``delete_thread`` clears every table keyed to the thread."""

    def __init__(self, db: Database) -> None:
        self._s = db

    def append(
        self, scope: Scope, messages: Sequence[Message], *, enqueue: Sequence[str] = (), expect_last: int | None | object = ANY
    ) -> list[Message]:
        key = scope.require_thread().key
        rows = [_message_row(scope, m) for m in messages]
        stored: list[Message] = []
        with self._s.write() as db:
            if expect_last is not ANY:  # under the write lock: nobody appends in between
                check_last(expect_last, db.execute(f"SELECT max(seq) FROM messages WHERE {KEY}", key).fetchone()[0])
            for m, row in zip(messages, rows, strict=True):
                cur = db.execute(
                    "INSERT INTO messages (tenant, user_id, agent_id, thread_id, id, role, content, parts, name, tool_calls, tool_call_id, ts, ts_us, metadata) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                    row,
                )
                if cur.rowcount:
                    stored.append(replace(m, seq=cur.lastrowid))
            now = epoch_us(utcnow())
            for layer in enqueue:
                db.execute(
                    "INSERT INTO jobs (tenant, user_id, agent_id, thread_id, layer, requested, pending_since_us) VALUES (?,?,?,?,?,1,?) "
                    "ON CONFLICT DO UPDATE SET pending_since_us = CASE WHEN requested > done THEN pending_since_us ELSE excluded.pending_since_us END, "
                    "requested = requested + 1",
                    (*key, layer, now),
                )
        return stored

    def read(self, scope: Scope, **options: Unpack[ReadOptions]) -> list[Message]:
        select = read_query(SQLITE, MESSAGE_COLUMNS, scope.require_thread().key, options)
        if select is None:
            return []
        return [_row_to_message(r) for r in select.in_order(self._s.query(select.sql, select.params))]

    def threads(self, scope: Scope) -> list[ThreadInfo]:
        sql = f"SELECT thread_id, agent_id, count(*), min(ts_us), max(ts_us) FROM messages WHERE {USER}"
        params: list[Any] = [scope.tenant, scope.user_id]
        if scope.agent_id is not None:
            sql += " AND agent_id = ?"
            params.append(scope.agent_id)
        sql += " GROUP BY agent_id, thread_id ORDER BY max(ts_us) DESC, thread_id DESC"
        return [ThreadInfo(t, a or None, n, from_us(lo), from_us(hi)) for t, a, n, lo, hi in self._s.query(sql, params)]

    def users(self, tenant: str) -> list[str]:
        return [row[0] for row in self._s.query("SELECT DISTINCT user_id FROM messages WHERE tenant = ? ORDER BY user_id", (tenant,))]

    def delete_thread(self, scope: Scope, *, layer: str = "library") -> int:
        key = scope.require_thread().key
        with self._s.write() as db:
            n = db.execute(f"DELETE FROM messages WHERE {KEY}", key).rowcount
            counts = [("messages", n)] + [(counted_as(t), db.execute(f"DELETE FROM {t} WHERE {KEY}", key).rowcount) for t in THREAD_TABLES]
            counts.append(("other", delete_checkpoints(db.execute, SQLITE, scope, thread_id=scope.thread_id)))
            record_deletion(db, scope, "thread", tally(counts), layer=layer)
        return n
