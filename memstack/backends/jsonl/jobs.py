"""A user's job rows (``<tenant>/<user>/_jobs.json``): one dict per (agent, thread, layer)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ...types import Job, Scope
from .names import decode_name

JOBS_FILE = "_jobs.json"
JobRow = dict[str, Any]


def new_job_row(scope: Scope, layer: str) -> JobRow:
    return {
        "agent_id": scope.agent_id,
        "thread_id": scope.thread_id,
        "layer": layer,
        "requested": 0,
        "done": 0,
        "cursor": 0,
        "attempts": 0,
        "owner": None,
        "lease_until": None,
        "not_before": None,
        "last_error": None,
    }


def is_row_of(row: JobRow, scope: Scope) -> bool:
    return row["agent_id"] == scope.agent_id and row["thread_id"] == scope.thread_id


def find_row(rows: list[JobRow], scope: Scope, layer: str) -> JobRow | None:
    return next((row for row in rows if is_row_of(row, scope) and row["layer"] == layer), None)


def is_claimable(row: JobRow, now: datetime, *, waiting: bool = False, idle_seconds: float | None = None) -> bool:
    if is_later(row["lease_until"], now):
        return False
    if is_later(row["not_before"], now):
        return False
    if row["requested"] > row["done"]:
        return True
    quiet = idle_seconds is not None and not is_later(row.get("since"), now - timedelta(seconds=idle_seconds))
    return bool(row.get("waiting")) and (waiting or quiet)


def is_later(stamp: str | None, now: datetime) -> bool:
    return stamp is not None and datetime.fromisoformat(stamp) > now


def job_of(user_dir: Path, row: JobRow) -> Job:
    scope = Scope(
        tenant=decode_name(user_dir.parent.name), user_id=decode_name(user_dir.name), agent_id=row["agent_id"], thread_id=row["thread_id"]
    )
    held = row["requested"] <= row["done"]
    return Job(scope, row["layer"], row["requested"], row["cursor"], row["attempts"], row["owner"], row["last_error"], held)
