"""PostgreSQL record store: versioned records and their audit trail (the usage log, of model calls: ``sql.records.SQLUsage``).

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
from typing import TYPE_CHECKING, Any

from ...types import AuditEvent, Change, Record, Scope, utcnow
from ..rules.records import check_limit, checked
from ..sql import records as shared
from ..sql.dialect import POSTGRES
from .database import Database, fetch_with

if TYPE_CHECKING:
    from psycopg import Cursor

RECORD_COLUMNS = "tenant, user_id, agent_id, thread_id, id, kind, key, value, source_ids, valid_from, invalid_at, created_at, version"


def _lock_namespace(cur: Cursor[Any], schema: str, scope: Scope) -> None:
    """Serialise writers of the scope's records until the transaction ends."""
    cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("\x1f".join(("memstack.records", schema, *scope.key)),))


class PostgresRecords:
    """The RecordStore of a PostgresStore (one transaction per call, errors translated); the SQL
    both dialects share is ``sql.records``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def current(self, scope: Scope, kind: str, keys: Sequence[str] | None = None) -> list[Record]:
        with self._db.transaction("reading records") as cur:
            return shared.current(fetch_with(cur), POSTGRES, RECORD_COLUMNS, scope, kind, keys)

    def history(self, scope: Scope, kind: str, key: str) -> list[Record]:
        with self._db.transaction("reading a record's history") as cur:
            cur.execute(*shared.history_query(POSTGRES, RECORD_COLUMNS, scope, kind, key))
            return [shared.record_of(POSTGRES, r) for r in cur.fetchall()]

    def apply(self, scope: Scope, changes: Sequence[Change], *, layer: str) -> list[AuditEvent]:
        scope, prepared = checked(scope, changes, layer)
        if not prepared:
            return []
        with self._db.transaction("applying record changes") as cur:
            _lock_namespace(cur, self._db.schema, scope)
            return shared.apply_steps(cur.execute, POSTGRES, RECORD_COLUMNS, scope, prepared, layer=layer, now=utcnow())

    def audit(self, scope: Scope, *, kind: str | None = None, limit: int | None = None) -> list[AuditEvent]:
        check_limit(limit)
        with self._db.transaction("reading the audit trail") as cur:
            cur.execute(*shared.audit_query(POSTGRES, scope, kind, limit))
            return [shared.event_of(POSTGRES, r) for r in cur.fetchall()]

    def users(self, tenant: str) -> list[str]:
        with self._db.transaction("listing users with records") as cur:
            cur.execute(*shared.users_query(POSTGRES, tenant))
            return [r[0] for r in cur.fetchall()]

    def delete(self, scope: Scope, kind: str | None = None) -> int:
        sql, params = shared.delete_query(POSTGRES, scope, kind)
        with self._db.transaction("deleting records") as cur:
            _lock_namespace(cur, self._db.schema, scope)
            cur.execute(sql, params)
            return cur.rowcount

    def dump(self, scope: Scope) -> tuple[list[Record], list[AuditEvent]]:
        versions, events = shared.dump_queries(POSTGRES, RECORD_COLUMNS, scope)
        with self._db.transaction("reading a user's records") as cur:
            rows = cur.execute(*versions).fetchall()
            audit = cur.execute(*events).fetchall()
        return [shared.record_of(POSTGRES, r) for r in rows], [shared.event_of(POSTGRES, r) for r in audit]

    def restore(self, records: Sequence[Record], events: Sequence[AuditEvent]) -> int:
        with self._db.transaction("restoring records") as cur:
            for scope in {r.scope for r in records}:
                _lock_namespace(cur, self._db.schema, scope)
            return shared.restore(cur.execute, POSTGRES, RECORD_COLUMNS, records, events)
