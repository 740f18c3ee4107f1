"""SQLite record store and usage log: versioned records, their audit trail and model calls.

The rules (what a put or delete does, namespaces, what deleting removes) are ``rules.records``,
whose ``step`` decides every change here too. Tables (``migrations``):

- ``records``: every version of every key, unique on (key columns, kind, key, version), with a
  partial unique index on the current ones (``invalid_at IS NULL``): at most one current record
  per key, and ``current`` reads that index in key order;
- ``record_audit``: one row per event, read per user newest first through (tenant, user_id, n);
- ``model_usage``: one row per model call, read per user oldest first through (tenant, user_id, at_us);

Values are JSON text (``ensure_ascii=False``: Chinese is stored as is); times are ISO text in UTC,
with UTC microseconds beside the usage rows' time for ``since``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...types import AuditEvent, Change, Record, Scope, UsageRecord, utcnow
from ..rules.json_values import json_text
from ..rules.records import Step, check_kind, check_layer, check_limit, check_usage, prepare, scope_of_key, step
from ..rules.time import epoch_us, utc
from ..sql.dialect import SQLITE
from ..sql.where import user
from .database import Database, chunks

KEY = SQLITE.key
RECORD_COLUMNS = "tenant, user_id, agent_id, thread_id, id, kind, key, value, source_ids, valid_from, invalid_at, created, version"
AUDIT_COLUMNS = "tenant, user_id, agent_id, thread_id, id, layer, kind, key, action, before, after, source_ids, at"
USAGE_COLUMNS = "tenant, user_id, agent_id, thread_id, layer, model, prompt_tokens, completion_tokens, latency_ms, ok, error, at"


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _record(row: Sequence[Any]) -> Record:
    *key, id_, kind, name, value, source_ids, valid_from, invalid_at, created, version = row
    return Record(
        id=id_,
        scope=scope_of_key(key),
        kind=kind,
        key=name,
        value=json.loads(value),
        source_ids=tuple(json.loads(source_ids)),
        valid_from=_time(valid_from),
        invalid_at=_time(invalid_at),
        created_at=datetime.fromisoformat(created),
        version=version,
    )


def _event(row: Sequence[Any]) -> AuditEvent:
    *key, id_, layer, kind, name, action, before, after, source_ids, at = row
    return AuditEvent(
        id_,
        scope_of_key(key),
        layer,
        kind,
        name,
        action,
        _load(before),
        _load(after),
        tuple(json.loads(source_ids)),
        datetime.fromisoformat(at),
    )


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _usage(row: Sequence[Any]) -> UsageRecord:
    *key, layer, model, prompt, completion, latency, ok, error, at = row
    return UsageRecord(scope_of_key(key), layer, model, prompt, completion, latency, bool(ok), error, datetime.fromisoformat(at))


class SQLiteRecords:
    """The RecordStore of a SQLiteStore (its connection, lock and write transactions)."""

    def __init__(self, db: Database) -> None:
        self._s = db

    def current(self, scope: Scope, kind: str, keys: Sequence[str] | None = None) -> list[Record]:
        sql = f"SELECT {RECORD_COLUMNS} FROM records WHERE {KEY} AND kind = ? AND invalid_at IS NULL"
        params = [*scope.key, check_kind(kind)]
        if keys is None:
            return [_record(r) for r in self._s.query(sql + " ORDER BY key", params)]
        rows = [r for chunk in chunks(keys) for r in self._s.query(f"{sql} AND key IN ({','.join('?' * len(chunk))})", [*params, *chunk])]
        return sorted((_record(r) for r in rows), key=lambda r: r.key)

    def history(self, scope: Scope, kind: str, key: str) -> list[Record]:
        rows = self._s.query(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE {KEY} AND kind = ? AND key = ? ORDER BY version",
            [*scope.key, check_kind(kind), key],
        )
        return [_record(r) for r in rows]

    def apply(self, scope: Scope, changes: Sequence[Change], *, layer: str) -> list[AuditEvent]:
        check_layer(layer)
        prepared = prepare(changes)
        if not prepared:
            return []
        scope = scope_of_key(scope.key)
        now = utcnow()
        events = []
        with self._s.write() as db:
            for change in prepared:
                latest = db.execute(
                    f"SELECT {RECORD_COLUMNS}, n FROM records WHERE {KEY} AND kind = ? AND key = ? ORDER BY version DESC LIMIT 1",
                    (*scope.key, change.kind, change.key),
                ).fetchone()
                done = step(scope, change, _record(latest[:-1]) if latest else None, layer=layer, now=now)
                _write(db, done, latest[-1] if latest else None)
                if done.event is not None:
                    events.append(done.event)
        return events

    def audit(self, scope: Scope, *, kind: str | None = None, limit: int | None = None) -> list[AuditEvent]:
        check_limit(limit)
        where, params = user(SQLITE, scope, kind)
        rows = self._s.query(
            f"SELECT {AUDIT_COLUMNS} FROM record_audit WHERE {where} ORDER BY n DESC LIMIT ?", [*params, -1 if limit is None else limit]
        )
        return [_event(r) for r in rows]

    def users(self, tenant: str) -> list[str]:
        return [
            r[0]
            for r in self._s.query(
                "SELECT DISTINCT user_id FROM records WHERE tenant = ? AND invalid_at IS NULL ORDER BY user_id", (tenant,)
            )
        ]

    def delete(self, scope: Scope, kind: str | None = None) -> int:
        sql, params = f"DELETE FROM records WHERE {KEY}", list(scope.key)
        if kind is not None:
            sql += " AND kind = ?"
            params.append(check_kind(kind))
        with self._s.write() as db:
            return db.execute(sql, params).rowcount


def _write(db: sqlite3.Connection, done: Step, latest: int | None) -> None:
    """Carry out a ``step`` on the key whose latest version is row ``latest``."""
    if done.retire is not None:
        db.execute("UPDATE records SET invalid_at = ? WHERE n = ?", (_iso(done.retire), latest))
    if done.sources is not None:
        db.execute("UPDATE records SET source_ids = ? WHERE n = ?", (json_text(list(done.sources)), latest))
    if (r := done.insert) is not None:
        db.execute(
            f"INSERT INTO records ({RECORD_COLUMNS}) VALUES ({','.join('?' * 13)})",
            (
                *r.scope.key,
                r.id,
                r.kind,
                r.key,
                json_text(r.value),
                json_text(list(r.source_ids)),
                _iso(r.valid_from),
                None,
                _iso(r.created_at),
                r.version,
            ),
        )
    if (e := done.event) is not None:
        db.execute(
            f"INSERT INTO record_audit ({AUDIT_COLUMNS}) VALUES ({','.join('?' * 13)})",
            (
                *e.scope.key,
                e.id,
                e.layer,
                e.kind,
                e.key,
                e.action,
                json_text(e.before),
                json_text(e.after),
                json_text(list(e.source_ids)),
                _iso(e.at),
            ),
        )


class SQLiteUsage:
    """The UsageLog of a SQLiteStore."""

    def __init__(self, db: Database) -> None:
        self._s = db

    def record(self, rows: Sequence[UsageRecord]) -> None:
        checked = check_usage(rows)
        if not checked:
            return
        with self._s.write() as db:
            db.executemany(
                f"INSERT INTO model_usage ({USAGE_COLUMNS}, at_us) VALUES ({','.join('?' * 13)})",
                [
                    (
                        *r.scope.key,
                        r.layer,
                        r.model,
                        r.prompt_tokens,
                        r.completion_tokens,
                        r.latency_ms,
                        int(r.ok),
                        r.error,
                        _iso(r.at),
                        epoch_us(r.at),
                    )
                    for r in checked
                ],
            )

    def read(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        """Oldest first by ``at`` (then in recording order); ``since`` is inclusive."""
        where, params = user(SQLITE, scope)
        if since is not None:
            where += " AND at_us >= ?"
            params.append(epoch_us(utc(since, field_name="since")))
        return [_usage(r) for r in self._s.query(f"SELECT {USAGE_COLUMNS} FROM model_usage WHERE {where} ORDER BY at_us, n", params)]
