"""PostgreSQL record store and usage log: versioned records, their audit trail and model calls.

The rules (what a put or delete does, namespaces, what deleting removes) are ``rules.records``,
whose ``step`` decides every change here too. Tables (``migrations``):

- ``memstack_records``: every version of every key, unique on (key columns, kind, key, version),
  with a partial unique index on the current ones (``invalid_at IS NULL``, key in ``"C"``
  collation): at most one current record per key, and ``current`` reads it in code-point order;
- ``memstack_record_audit``: one row per event, read per user newest first through (tenant, user_id, n);
- ``memstack_model_usage``: one row per model call, read per user oldest first through (tenant, user_id, at, n);

``apply`` holds an advisory lock on the scope's record namespace for its transaction, so two
writers of one key take turns instead of both inserting a version (the partial unique index
would refuse the second). Values are jsonb; times come back in UTC. Text PostgreSQL cannot store
(NUL characters) is InvalidInput, through the store's error translation.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...types import AuditEvent, Change, Record, Scope, UsageRecord, utcnow
from ..rules.json_values import json_text
from ..rules.records import Step, check_kind, check_layer, check_limit, check_usage, prepare, scope_of_key, step
from ..rules.time import utc
from ..sql.dialect import POSTGRES
from ..sql.where import user
from .database import Database

if TYPE_CHECKING:
    from psycopg import Cursor

KEY = POSTGRES.key
RECORD_COLUMNS = "tenant, user_id, agent_id, thread_id, id, kind, key, value, source_ids, valid_from, invalid_at, created_at, version"
AUDIT_COLUMNS = "tenant, user_id, agent_id, thread_id, id, layer, kind, key, action, before, after, source_ids, at"
USAGE_COLUMNS = "tenant, user_id, agent_id, thread_id, layer, model, prompt_tokens, completion_tokens, latency_ms, ok, error, at"


def _record(row: Sequence[Any]) -> Record:
    *key, id_, kind, name, value, source_ids, valid_from, invalid_at, created_at, version = row
    return Record(
        id=id_,
        scope=scope_of_key(key),
        kind=kind,
        key=name,
        value=value,
        source_ids=tuple(source_ids),
        valid_from=valid_from,
        invalid_at=invalid_at,
        created_at=created_at,
        version=version,
    )


def _event(row: Sequence[Any]) -> AuditEvent:
    *key, id_, layer, kind, name, action, before, after, source_ids, at = row
    return AuditEvent(id_, scope_of_key(key), layer, kind, name, action, before, after, tuple(source_ids), at)


def _usage(row: Sequence[Any]) -> UsageRecord:
    *key, layer, model, prompt, completion, latency, ok, error, at = row
    return UsageRecord(scope_of_key(key), layer, model, prompt, completion, latency, ok, error, at)


def _lock_namespace(cur: Cursor[Any], schema: str, scope: Scope) -> None:
    """Serialise writers of the scope's records until the transaction ends."""
    cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("\x1f".join(("memstack.records", schema, *scope.key)),))


class PostgresRecords:
    """The RecordStore of a PostgresStore (one transaction per call, errors translated)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def current(self, scope: Scope, kind: str, keys: Sequence[str] | None = None) -> list[Record]:
        sql = f"SELECT {RECORD_COLUMNS} FROM memstack_records WHERE {KEY} AND kind = %s AND invalid_at IS NULL"
        params: list[Any] = [*scope.key, check_kind(kind)]
        if keys is not None:
            sql += " AND key = ANY(%s)"
            params.append(list(keys))
        with self._db.transaction("reading records") as cur:
            cur.execute(sql + ' ORDER BY key COLLATE "C"', params)
            return [_record(r) for r in cur.fetchall()]

    def history(self, scope: Scope, kind: str, key: str) -> list[Record]:
        with self._db.transaction("reading a record's history") as cur:
            cur.execute(
                f"SELECT {RECORD_COLUMNS} FROM memstack_records WHERE {KEY} AND kind = %s AND key = %s ORDER BY version",
                [*scope.key, check_kind(kind), key],
            )
            return [_record(r) for r in cur.fetchall()]

    def apply(self, scope: Scope, changes: Sequence[Change], *, layer: str) -> list[AuditEvent]:
        check_layer(layer)
        prepared = prepare(changes)
        if not prepared:
            return []
        scope = scope_of_key(scope.key)
        now = utcnow()
        events = []
        with self._db.transaction("applying record changes") as cur:
            _lock_namespace(cur, self._db.schema, scope)
            for change in prepared:
                cur.execute(
                    f"SELECT {RECORD_COLUMNS}, n FROM memstack_records WHERE {KEY} AND kind = %s AND key = %s ORDER BY version DESC LIMIT 1",
                    (*scope.key, change.kind, change.key),
                )
                latest = cur.fetchone()
                done = step(scope, change, _record(latest[:-1]) if latest else None, layer=layer, now=now)
                _write(cur, done, latest[-1] if latest else None)
                if done.event is not None:
                    events.append(done.event)
        return events

    def audit(self, scope: Scope, *, kind: str | None = None, limit: int | None = None) -> list[AuditEvent]:
        check_limit(limit)
        where, params = user(POSTGRES, scope, kind)
        with self._db.transaction("reading the audit trail") as cur:
            cur.execute(f"SELECT {AUDIT_COLUMNS} FROM memstack_record_audit WHERE {where} ORDER BY n DESC LIMIT %s", [*params, limit])
            return [_event(r) for r in cur.fetchall()]

    def users(self, tenant: str) -> list[str]:
        with self._db.transaction("listing users with records") as cur:
            cur.execute(
                "SELECT DISTINCT user_id FROM memstack_records WHERE tenant = %s AND invalid_at IS NULL ORDER BY user_id", (tenant,)
            )
            return [r[0] for r in cur.fetchall()]

    def delete(self, scope: Scope, kind: str | None = None) -> int:
        sql, params = f"DELETE FROM memstack_records WHERE {KEY}", list(scope.key)
        if kind is not None:
            sql += " AND kind = %s"
            params.append(check_kind(kind))
        with self._db.transaction("deleting records") as cur:
            _lock_namespace(cur, self._db.schema, scope)
            cur.execute(sql, params)
            return cur.rowcount


def _write(cur: Cursor[Any], done: Step, latest: int | None) -> None:
    """Carry out a ``step`` on the key whose latest version is row ``latest``."""
    if done.retire is not None:
        cur.execute("UPDATE memstack_records SET invalid_at = %s WHERE n = %s", (done.retire, latest))
    if done.sources is not None:
        cur.execute("UPDATE memstack_records SET source_ids = %s::jsonb WHERE n = %s", (json_text(list(done.sources)), latest))
    if (r := done.insert) is not None:
        cur.execute(
            f"""INSERT INTO memstack_records ({RECORD_COLUMNS})
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, NULL, %s, %s)""",
            (*r.scope.key, r.id, r.kind, r.key, json_text(r.value), json_text(list(r.source_ids)), r.valid_from, r.created_at, r.version),
        )
    if (e := done.event) is not None:
        cur.execute(
            f"""INSERT INTO memstack_record_audit ({AUDIT_COLUMNS})
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s)""",
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
                e.at,
            ),
        )


class PostgresUsage:
    """The UsageLog of a PostgresStore."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def record(self, rows: Sequence[UsageRecord]) -> None:
        checked = check_usage(rows)
        if not checked:
            return
        with self._db.transaction("recording model usage") as cur:
            cur.executemany(
                f"INSERT INTO memstack_model_usage ({USAGE_COLUMNS}) VALUES ({', '.join(['%s'] * 12)})",
                [
                    (*r.scope.key, r.layer, r.model, r.prompt_tokens, r.completion_tokens, r.latency_ms, r.ok, r.error, r.at)
                    for r in checked
                ],
            )

    def read(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        """Oldest first by ``at`` (then in recording order); ``since`` is inclusive."""
        where, params = user(POSTGRES, scope)
        if since is not None:
            where += " AND at >= %s"
            params.append(utc(since, field_name="since"))
        with self._db.transaction("reading model usage") as cur:
            cur.execute(f"SELECT {USAGE_COLUMNS} FROM memstack_model_usage WHERE {where} ORDER BY at, n", params)
            return [_usage(r) for r in cur.fetchall()]
