"""The WHERE builders the SQL backends share, one copy each: SQL text and its parameters for a
``Dialect``. Each returns ``(condition, params)``; none touches a connection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...types import Scope, SearchFilter
from ..rules.records import check_kind
from .dialect import Dialect


def with_agent(d: Dialect, sql: str, scope: Scope) -> tuple[str, list[Any]]:
    """``sql`` (ending in a condition on tenant and user) narrowed to the scope's agent, if any."""
    if scope.agent_id is None:
        return sql, [scope.tenant, scope.user_id]
    return f"{sql} AND agent_id = {d.mark}", [scope.tenant, scope.user_id, scope.agent_id]


def user(d: Dialect, scope: Scope, kind: str | None = None) -> tuple[str, list[Any]]:
    """The per-user condition of the audit and usage reads: the scope's agent if it names one, and
    the record kind if given."""
    sql, params = with_agent(d, d.user, scope)
    if kind is not None:
        sql += f" AND kind = {d.mark}"
        params.append(check_kind(kind))
    return sql, params


def corpus(d: Dialect, scope: Scope) -> tuple[str, list[Any]]:
    """The units of the scope's user (and agent), as a condition the units' unique index serves:
    with no agent named, the agents are read from the unit owners."""
    if scope.agent_id is not None:
        return f"{d.user} AND agent_id = {d.mark}", [scope.tenant, scope.user_id, scope.agent_id]
    agents = f"SELECT agent_id FROM {d.table('unit_owners')} WHERE {d.user}"
    return f"{d.user} AND agent_id IN ({agents})", [scope.tenant, scope.user_id, scope.tenant, scope.user_id]


def filters(d: Dialect, where: SearchFilter | None, *, alias: str = "") -> tuple[str, list[Any]]:
    """A SearchFilter as SQL over a table with thread_id, category, kind and time columns (named
    through ``alias``, e.g. ``"u."``): the same predicate as ``SearchFilter.matches``; "" for none."""
    if where is None:
        return "", []
    sql, params = [], []
    for column, values in (("thread_id", where.thread_ids), ("category", where.categories), ("kind", where.kinds)):
        if values:
            condition, values_params = d.any_of(alias + column, values)
            sql.append(condition)
            params += values_params
    if where.since is not None:
        sql.append(f"{alias}{d.time_column} >= {d.mark}")
        params.append(d.instant(where.since))
    if where.until is not None:
        sql.append(f"{alias}{d.time_column} < {d.mark}")
        params.append(d.instant(where.until))
    return " AND ".join(sql), params


def deleted_vectors(d: Dialect, scope: Scope, ids: Sequence[str] | None) -> tuple[str, list[Any]]:
    """Which vectors (or cached embeddings) a deletion takes: with ``ids``, those of the user (and
    agent, if named), the ids being the caller's to add; else the exact thread, else the user."""
    sql, params = d.user, [scope.tenant, scope.user_id]
    if scope.agent_id is not None or (ids is None and scope.thread_id is not None):
        sql += f" AND agent_id = {d.mark}"
        params.append(scope.agent_id or "")
    if ids is None and scope.thread_id is not None:
        sql += f" AND thread_id = {d.mark}"
        params.append(scope.thread_id)
    return sql, params
