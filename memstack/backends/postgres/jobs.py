"""The PostgreSQL job queue: one row per (thread key, layer), counting requests and work done;
``claim`` takes the job that has waited longest."""

from __future__ import annotations

from collections.abc import Sequence

from ...types import Job, JobCursor, Scope
from ..sql.dialect import POSTGRES
from .database import KEY_COLUMNS, Database
from .history import pending_steps, scope_from_key
from .steps import run

KEY_MATCH = POSTGRES.key
USER_MATCH = POSTGRES.user


class PostgresJobs:
    """The JobQueue of a PostgresStore: claims skip rows another transaction holds (SKIP LOCKED);
    leases use the database clock (``now()``) only."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def claim(
        self,
        *,
        worker: str,
        lease_seconds: float = 300.0,
        scope: Scope | None = None,
        waiting: bool = False,
        idle_seconds: float | None = None,
    ) -> Job | None:
        """Lease the longest-waiting claimable job (in the scope's user, if given) to ``worker``."""
        user_filter, params = ("", []) if scope is None else (f"AND {USER_MATCH}", [scope.tenant, scope.user_id])
        with self._db.transaction("claiming a job") as cur:
            cur.execute(
                f"""WITH picked AS (
                        SELECT {KEY_COLUMNS}, layer FROM memstack_jobs
                        WHERE (lease_until IS NULL OR lease_until <= now())
                          AND (not_before IS NULL OR not_before <= now())
                          AND (requested > done OR (waiting AND (%s OR pending_since <= now() - make_interval(secs => %s::float8)))) {user_filter}
                        ORDER BY pending_since LIMIT 1 FOR UPDATE SKIP LOCKED)
                    UPDATE memstack_jobs AS j SET owner = %s, lease_until = now() + make_interval(secs => %s)
                    FROM picked
                    WHERE (j.tenant, j.user_id, j.agent_id, j.thread_id, j.layer)
                        = (picked.tenant, picked.user_id, picked.agent_id, picked.thread_id, picked.layer)
                    RETURNING j.tenant, j.user_id, j.agent_id, j.thread_id, j.layer, j.requested, j.cursor, j.attempts, j.last_error,
                        j.requested <= j.done""",
                (waiting, idle_seconds, *params, worker, lease_seconds),
            )
            row = cur.fetchone()
        if row is None:
            return None
        tenant, user_id, agent_id, thread_id, layer, requested, cursor, attempts, last_error, held = row
        return Job(scope_from_key(tenant, user_id, agent_id, thread_id), layer, requested, cursor, attempts, worker, last_error, held)

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

    def cursors(self, scope: Scope) -> list[JobCursor]:
        with self._db.transaction("reading job cursors") as cur:
            cur.execute(
                f"SELECT {KEY_COLUMNS}, layer, cursor, requested > done, waiting FROM memstack_jobs WHERE {USER_MATCH}",
                (scope.tenant, scope.user_id),
            )
            return [JobCursor(scope_from_key(*r[:4]), r[4], r[5], r[6], r[7]) for r in cur.fetchall()]

    def restore(self, cursors: Sequence[JobCursor]) -> None:
        with self._db.transaction("restoring job cursors") as cur:
            for c in cursors:
                cur.execute(
                    f"""INSERT INTO memstack_jobs ({KEY_COLUMNS}, layer, requested, cursor, waiting) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
                        ON CONFLICT (tenant, user_id, agent_id, thread_id, layer) DO UPDATE SET
                        requested = memstack_jobs.done + excluded.requested, cursor = excluded.cursor, waiting = excluded.waiting""",
                    (*c.scope.key, c.layer, int(c.pending), c.cursor, c.waiting),
                )
