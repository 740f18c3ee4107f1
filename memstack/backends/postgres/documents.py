"""The PostgreSQL store's JSON documents (jsonb): state (per scope and name), a tenant's memory
profile, and a thread's newest checkpoints (``keep`` of them)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ...types import Checkpoint, Scope, StateDocument, aware
from ..rules.checkpoints import check_keep
from ..sql.dialect import POSTGRES
from .database import KEY_COLUMNS, Database, lock_thread, to_json
from .history import scope_from_key

KEY_MATCH = POSTGRES.key
CHECKPOINT_COLUMNS = f"{KEY_COLUMNS}, id, created_at, data"


class PostgresState:
    def __init__(self, db: Database) -> None:
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

    def dump(self, scope: Scope) -> list[StateDocument]:
        with self._db.transaction("reading a user's state") as cur:
            cur.execute(
                f"SELECT {KEY_COLUMNS}, name, value FROM memstack_state WHERE tenant = %s AND user_id = %s", (scope.tenant, scope.user_id)
            )
            return [StateDocument(scope_from_key(*r[:4]), r[4], r[5]) for r in cur.fetchall()]


class PostgresProfiles:
    def __init__(self, db: Database) -> None:
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


def checkpoint_from_row(row: Sequence[Any]) -> Checkpoint:
    tenant, user_id, agent_id, thread_id, id_, created_at, data = row
    return Checkpoint(id_, scope_from_key(tenant, user_id, agent_id, thread_id), created_at, data)


class PostgresCheckpoints:
    def __init__(self, db: Database) -> None:
        self._db = db

    def save(self, scope: Scope, data: Mapping[str, Any], *, keep: int = 10, at: datetime | None = None) -> Checkpoint:
        check_keep(keep)
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
