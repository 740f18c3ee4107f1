"""The SQLite job queue: one row per (thread key, layer), counting requests and work done."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...types import Job, JobCursor, Scope, utcnow
from ..rules.records import scope_of_key
from ..rules.time import epoch_us
from ..sql.dialect import SQLITE
from .database import Database

KEY = SQLITE.key
USER = SQLITE.user


class SQLiteJobs:
    """The JobQueue of a SQLiteStore: a job is leased by writing its owner and lease in the claim's
    write transaction, so no other process claims it meanwhile."""

    def __init__(self, db: Database) -> None:
        self._s = db

    def claim(
        self,
        *,
        worker: str,
        lease_seconds: float = 300.0,
        scope: Scope | None = None,
        waiting: bool = False,
        idle_seconds: float | None = None,
    ) -> Job | None:
        now = epoch_us(utcnow())
        quiet = now - int(idle_seconds * 1_000_000) if idle_seconds is not None else -1
        sql = (
            "SELECT tenant, user_id, agent_id, thread_id, layer, requested, cursor, attempts, last_error, requested <= done FROM jobs "
            "WHERE (lease_us IS NULL OR lease_us <= ?) AND (not_before_us IS NULL OR not_before_us <= ?) "
            "AND (requested > done OR (waiting = 1 AND (? OR pending_since_us <= ?)))"
        )
        params: list[Any] = [now, now, int(waiting), quiet]
        if scope is not None:
            sql += f" AND {USER}"
            params += [scope.tenant, scope.user_id]
        with self._s.write() as db:
            row = db.execute(sql + " ORDER BY pending_since_us LIMIT 1", params).fetchone()
            if row is None:
                return None
            tenant, user_id, agent_id, thread_id, layer, requested, cursor, attempts, last_error, held = row
            db.execute(
                f"UPDATE jobs SET owner = ?, lease_us = ? WHERE {KEY} AND layer = ?",
                (worker, now + int(lease_seconds * 1_000_000), tenant, user_id, agent_id, thread_id, layer),
            )
        sc = Scope(tenant=tenant, user_id=user_id, agent_id=agent_id or None, thread_id=thread_id or None)
        return Job(sc, layer, requested, cursor, attempts, worker, last_error, bool(held))

    def complete(self, job: Job, *, cursor: int, waiting: bool = False) -> bool:
        with self._s.write() as db:
            done = db.execute(
                "UPDATE jobs SET done = max(done, ?), cursor = max(cursor, ?), attempts = 0, last_error = NULL, not_before_us = NULL, waiting = ?, "
                f"lease_us = NULL, owner = NULL WHERE {KEY} AND layer = ? AND owner = ?",
                (job.version, cursor, int(waiting), *job.scope.key, job.layer, job.worker),
            )
            return done.rowcount == 1

    def renew(self, job: Job, *, lease_seconds: float) -> bool:
        with self._s.write() as db:
            renewed = db.execute(
                f"UPDATE jobs SET lease_us = ? WHERE {KEY} AND layer = ? AND owner = ?",
                (epoch_us(utcnow()) + int(lease_seconds * 1_000_000), *job.scope.key, job.layer, job.worker),
            )
            return renewed.rowcount == 1

    def fail(self, job: Job, error: str, *, retry_in: float) -> None:
        with self._s.write() as db:
            db.execute(
                f"UPDATE jobs SET attempts = attempts + 1, last_error = ?, not_before_us = ?, lease_us = NULL, owner = NULL WHERE {KEY} AND layer = ? AND (owner IS NULL OR owner = ?)",
                (error, epoch_us(utcnow()) + int(retry_in * 1_000_000), *job.scope.key, job.layer, job.worker),
            )

    def pending(self, scope: Scope | None = None) -> int:
        sql, params = "SELECT count(*) FROM jobs WHERE requested > done", []
        if scope is not None:
            sql += f" AND {USER}"
            params = [scope.tenant, scope.user_id]
        return self._s.query(sql, params)[0][0]

    def cursors(self, scope: Scope) -> list[JobCursor]:
        rows = self._s.query(
            f"SELECT tenant, user_id, agent_id, thread_id, layer, cursor, requested > done, waiting FROM jobs WHERE {USER}",
            (scope.tenant, scope.user_id),
        )
        return [JobCursor(scope_of_key(r[:4]), r[4], r[5], bool(r[6]), bool(r[7])) for r in rows]

    def restore(self, cursors: Sequence[JobCursor]) -> None:
        now = epoch_us(utcnow())
        with self._s.write() as db:
            for c in cursors:
                db.execute(
                    "INSERT INTO jobs (tenant, user_id, agent_id, thread_id, layer, requested, cursor, waiting, pending_since_us) "
                    "VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT DO UPDATE SET requested = done + excluded.requested, "
                    "cursor = excluded.cursor, waiting = excluded.waiting",
                    (*c.scope.key, c.layer, int(c.pending), c.cursor, int(c.waiting), now),
                )
