"""SQLite record store: versioned records and their audit trail (the usage log, of model calls: ``sql.records.SQLUsage``).

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

from collections.abc import Sequence

from ...types import AuditEvent, Change, Record, Scope, utcnow
from ..rules.records import check_limit, checked
from ..sql import records as shared
from ..sql.dialect import SQLITE
from .database import Database

RECORD_COLUMNS = "tenant, user_id, agent_id, thread_id, id, kind, key, value, source_ids, valid_from, invalid_at, created, version"


class SQLiteRecords:
    """The RecordStore of a SQLiteStore (its connection, lock and write transactions); the SQL
    both dialects share is ``sql.records``."""

    def __init__(self, db: Database) -> None:
        self._s = db

    def current(self, scope: Scope, kind: str, keys: Sequence[str] | None = None) -> list[Record]:
        return shared.current(self._s.query, SQLITE, RECORD_COLUMNS, scope, kind, keys)

    def history(self, scope: Scope, kind: str, key: str) -> list[Record]:
        return [shared.record_of(SQLITE, r) for r in self._s.query(*shared.history_query(SQLITE, RECORD_COLUMNS, scope, kind, key))]

    def apply(self, scope: Scope, changes: Sequence[Change], *, layer: str) -> list[AuditEvent]:
        scope, prepared = checked(scope, changes, layer)
        if not prepared:
            return []
        with self._s.write() as db:
            return shared.apply_steps(db.execute, SQLITE, RECORD_COLUMNS, scope, prepared, layer=layer, now=utcnow())

    def audit(self, scope: Scope, *, kind: str | None = None, limit: int | None = None) -> list[AuditEvent]:
        check_limit(limit)
        return [shared.event_of(SQLITE, r) for r in self._s.query(*shared.audit_query(SQLITE, scope, kind, limit))]

    def users(self, tenant: str) -> list[str]:
        return [r[0] for r in self._s.query(*shared.users_query(SQLITE, tenant))]

    def delete(self, scope: Scope, kind: str | None = None) -> int:
        sql, params = shared.delete_query(SQLITE, scope, kind)
        with self._s.write() as db:
            return db.execute(sql, params).rowcount

    def dump(self, scope: Scope) -> tuple[list[Record], list[AuditEvent]]:
        versions, events = shared.dump_queries(SQLITE, RECORD_COLUMNS, scope)
        with self._s.write() as db:  # one snapshot of both tables
            rows, audit = db.execute(*versions).fetchall(), db.execute(*events).fetchall()
        return [shared.record_of(SQLITE, r) for r in rows], [shared.event_of(SQLITE, r) for r in audit]

    def restore(self, records: Sequence[Record], events: Sequence[AuditEvent]) -> int:
        with self._s.write() as db:
            return shared.restore(db.execute, SQLITE, RECORD_COLUMNS, records, events)
