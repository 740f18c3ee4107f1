"""The SQLite store's JSON documents: state (per scope and name), a tenant's memory profile, and a
thread's newest checkpoints (``keep`` of them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ...types import Checkpoint, Scope, StateDocument, utcnow
from ..rules.checkpoints import check_keep, new_checkpoint
from ..rules.json_values import json_copy
from ..rules.records import scope_of_key
from ..rules.time import epoch_us
from ..sql.dialect import SQLITE
from .database import Database

KEY = SQLITE.key


class SQLiteState:
    def __init__(self, db: Database) -> None:
        self._s = db

    def get(self, scope: Scope, name: str = "state") -> dict[str, Any] | None:
        rows = self._s.query(f"SELECT value FROM state WHERE {KEY} AND name = ?", (*scope.key, name))
        return json.loads(rows[0][0]) if rows else None

    def put(self, scope: Scope, value: Mapping[str, Any], name: str = "state") -> None:
        text = json.dumps(json_copy(value), ensure_ascii=False)
        with self._s.write() as db:
            db.execute(
                "INSERT INTO state VALUES (?,?,?,?,?,?,?) ON CONFLICT DO UPDATE SET value = excluded.value, updated_us = excluded.updated_us",
                (*scope.key, name, text, epoch_us(utcnow())),
            )

    def delete(self, scope: Scope, name: str = "state") -> bool:
        with self._s.write() as db:
            return db.execute(f"DELETE FROM state WHERE {KEY} AND name = ?", (*scope.key, name)).rowcount > 0

    def swap(self, scope: Scope, value: Mapping[str, Any] | None, *, expect: Mapping[str, Any] | None, name: str = "state") -> bool:
        text = None if value is None else json.dumps(json_copy(value), ensure_ascii=False)
        wanted = None if expect is None else json_copy(expect)
        with self._s.write() as db:  # BEGIN IMMEDIATE: no other writer between the read and the write
            row = db.execute(f"SELECT value FROM state WHERE {KEY} AND name = ?", (*scope.key, name)).fetchone()
            if (None if row is None else json.loads(row[0])) != wanted:
                return False
            if text is None:
                db.execute(f"DELETE FROM state WHERE {KEY} AND name = ?", (*scope.key, name))
            else:
                db.execute(
                    "INSERT INTO state VALUES (?,?,?,?,?,?,?) ON CONFLICT DO UPDATE SET value = excluded.value, updated_us = excluded.updated_us",
                    (*scope.key, name, text, epoch_us(utcnow())),
                )
            return True

    def dump(self, scope: Scope) -> list[StateDocument]:
        rows = self._s.query(
            "SELECT tenant, user_id, agent_id, thread_id, name, value FROM state WHERE tenant = ? AND user_id = ?",
            (scope.tenant, scope.user_id),
        )
        return [StateDocument(scope_of_key(r[:4]), r[4], json.loads(r[5])) for r in rows]


class SQLiteProfiles:
    def __init__(self, db: Database) -> None:
        self._s = db

    def get(self, tenant: str) -> dict[str, Any] | None:
        rows = self._s.query("SELECT value FROM profiles WHERE tenant = ?", (tenant,))
        return json.loads(rows[0][0]) if rows else None

    def put(self, tenant: str, value: Mapping[str, Any], *, replace: bool = False) -> dict[str, Any]:
        text = json.dumps(json_copy(value), ensure_ascii=False)
        conflict = "DO UPDATE SET value = excluded.value, updated_us = excluded.updated_us" if replace else "DO NOTHING"
        with self._s.write() as db:
            db.execute(f"INSERT INTO profiles VALUES (?,?,?) ON CONFLICT (tenant) {conflict}", (tenant, text, epoch_us(utcnow())))
            return json.loads(db.execute("SELECT value FROM profiles WHERE tenant = ?", (tenant,)).fetchone()[0])


class SQLiteCheckpoints:
    def __init__(self, db: Database) -> None:
        self._s = db

    def save(self, scope: Scope, data: Mapping[str, Any], *, keep: int = 10, at: datetime | None = None) -> Checkpoint:
        check_keep(keep)
        cp = new_checkpoint(scope, data, at)
        with self._s.write() as db:
            db.execute(
                "INSERT INTO checkpoints (tenant, user_id, agent_id, thread_id, id, created, data) VALUES (?,?,?,?,?,?,?)",
                (*scope.key, cp.id, cp.created_at.isoformat(), json.dumps(cp.data, ensure_ascii=False)),
            )
            db.execute(
                f"DELETE FROM checkpoints WHERE {KEY} AND n NOT IN (SELECT n FROM checkpoints WHERE {KEY} ORDER BY n DESC LIMIT ?)",
                (*scope.key, *scope.key, keep),
            )
        return cp

    def latest(self, scope: Scope) -> Checkpoint | None:
        found = self._list(scope, limit=1)
        return found[0] if found else None

    def list(self, scope: Scope) -> list[Checkpoint]:
        return self._list(scope, limit=-1)

    def _list(self, scope: Scope, *, limit: int) -> list[Checkpoint]:
        rows = self._s.query(
            f"SELECT id, created, data FROM checkpoints WHERE {KEY} ORDER BY n DESC LIMIT ?", (*scope.require_thread().key, limit)
        )
        return [Checkpoint(i, scope, datetime.fromisoformat(c), json.loads(d)) for i, c, d in rows]
