"""A retention pass (``Store.expire``) as both SQL backends run it, for a ``Dialect``: which of a
tenant's users have rows older than the ``Expiry``, and one user's expired rows deleted in the
caller's transaction (messages, then the memories that stood on them only, audit events, model
calls), counted as a deletion note counts them; and the whole pass (``expire``), in the
transactions and with the deletion notes of the backend that runs it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC
from typing import Any

from ...types import Deletion, Expiry, Scope
from ..rules.deletions import tally
from ..rules.expiry import check, stood_on
from .adapter_rows import Run
from .dialect import Dialect


def _cutoffs(d: Dialect, expiry: Expiry) -> list[tuple[str, str, str, Any]]:
    """(kind, table, time column, the cutoff as that column holds it) of each kind that expires."""
    out = []
    if expiry.messages is not None:
        out.append(("messages", d.table("messages"), d.time_column, d.instant(expiry.messages)))
    if expiry.audit is not None:  # SQLite keeps it as UTC ISO text, which sorts as the instants
        out.append(("audit", d.table("record_audit"), "at", d.time_value(expiry.audit.astimezone(UTC))))
    if expiry.usage is not None:
        out.append(("usage", d.table("model_usage"), d.instant_column("at"), d.instant(expiry.usage)))
    return out


def expire(
    transaction: Callable[[str], AbstractContextManager[Any]],
    d: Dialect,
    tenant: str,
    expiry: Expiry,
    note: Callable[..., Deletion],
    *,
    layer: str,
) -> list[Deletion]:
    """``Store.expire``: the tenant's users with expired rows found in one transaction, then each
    user's deleted and noted in one of its own. ``transaction(doing)``: the backend's (its
    connection or cursor has ``execute``); ``note``: its ``record_deletion`` in that transaction."""
    check(tenant, expiry)
    with transaction("finding expired rows") as db:
        users = expiring_users(db.execute, d, tenant, expiry)
    notes = []
    for user_id in users:
        with transaction("expiring a user's rows") as db:
            user = Scope(user_id=user_id, tenant=tenant)
            counts = tally(expire_user(db.execute, d, user, expiry))
            if counts:
                notes.append(note(db, user, "expired", counts, layer=layer))
    return notes


def expiring_users(run: Run, d: Dialect, tenant: str, expiry: Expiry) -> list[str]:
    """The tenant's users with a message, audit event or model call older than its cutoff, sorted."""
    parts = _cutoffs(d, expiry)
    if not parts:
        return []
    sql = " UNION ".join(f"SELECT user_id FROM {table} WHERE tenant = {d.mark} AND {column} < {d.mark}" for _, table, column, _ in parts)
    params = [p for _, _, _, cutoff in parts for p in (tenant, cutoff)]
    return sorted(row[0] for row in run(sql, params).fetchall())


def expire_user(run: Run, d: Dialect, user: Scope, expiry: Expiry) -> list[tuple[str, int]]:
    """Delete one user's expired rows in ``run``'s transaction; ``(what, rows)`` as ``tally`` takes them."""
    who = (user.tenant, user.user_id)
    counts: list[tuple[str, int]] = []
    expired: set[str] = set()
    if expiry.messages is not None:
        table, cutoff = d.table("messages"), d.instant(expiry.messages)
        where = f"{d.user} AND {d.time_column} < {d.mark}"
        expired = {row[0] for row in run(f"SELECT id FROM {table} WHERE {where}", (*who, cutoff)).fetchall()}
        counts.append(("messages", run(f"DELETE FROM {table} WHERE {where}", (*who, cutoff)).rowcount))
    if expiry.derived and expired:
        kept = {row[0] for row in run(f"SELECT id FROM {d.table('messages')} WHERE {d.user}", who).fetchall()}
        counts += _expire_derived(run, d, who, expired, kept)
    for kind, table, column, cutoff in _cutoffs(d, expiry):
        if kind != "messages":
            counts.append((kind, run(f"DELETE FROM {table} WHERE {d.user} AND {column} < {d.mark}", (*who, cutoff)).rowcount))
    return counts


def _expire_derived(run: Run, d: Dialect, who: tuple[str, str], expired: set[str], kept: set[str]) -> list[tuple[str, int]]:
    """The user's record versions and units (with their vectors) that stood on ``expired`` only."""
    counts = []
    records = [
        n
        for n, sources in run(f"SELECT n, source_ids FROM {d.table('records')} WHERE {d.user}", who).fetchall()
        if _doomed(d, sources, expired, kept)
    ]
    counts.append(("memories", _delete_rows(run, d, "records", records)))
    units = [
        (n, agent, unit_id)
        for n, agent, unit_id, sources in run(f"SELECT n, agent_id, id, source_ids FROM {d.table('units')} WHERE {d.user}", who).fetchall()
        if _doomed(d, sources, expired, kept)
    ]
    counts.append(("units", _delete_rows(run, d, "units", [n for n, _, _ in units])))
    by_agent: dict[str, list[str]] = {}
    for _, agent, unit_id in units:
        by_agent.setdefault(agent, []).append(unit_id)
    for agent, ids in by_agent.items():
        for group in d.groups(ids):
            match, params = d.any_of("unit_id", group)
            sql = f"DELETE FROM {d.table('vectors')} WHERE {d.user} AND agent_id = {d.mark} AND {match}"
            counts.append(("vectors", run(sql, (*who, agent, *params)).rowcount))
    return counts


def _doomed(d: Dialect, sources: Any, expired: set[str], kept: set[str]) -> bool:
    return stood_on(d.json_of(sources) or (), expired, kept)


def _delete_rows(run: Run, d: Dialect, table: str, numbers: list[int]) -> int:
    deleted = 0
    for group in d.groups(numbers):
        match, params = d.any_of("n", group)
        deleted += run(f"DELETE FROM {d.table(table)} WHERE {match}", params).rowcount
    return deleted
