"""The history read's SELECT, as SQLite and PostgreSQL both write it, for a ``Dialect``.

The messages' columns and codecs differ (SQLite keeps a timestamp as ISO text beside UTC
microseconds, PostgreSQL as timestamptz), and so do appends (PostgreSQL's per-thread advisory
lock) and the steps PostgreSQL runs on both drivers; what is here is the statement that selects a
thread's messages for ``HistoryStore.read``, with its filters and order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...stores import ReadOptions
from ...types import aware, by_time
from .dialect import Dialect


@dataclass(frozen=True, slots=True)
class Select:
    """A history read's statement; its rows come newest first where ``reverse`` (so that LIMIT
    keeps the last n of a time-ordered read), and ``in_order`` puts them back."""

    sql: str
    params: list[Any]
    reverse: bool = False

    def in_order(self, rows: Sequence[Any]) -> Sequence[Any]:
        return rows[::-1] if self.reverse else rows


def read_query(d: Dialect, columns: str, key: Sequence[str], options: ReadOptions) -> Select | None:
    """``HistoryStore.read``'s statement for the thread ``key`` (exact) and ``options`` (checked:
    ``until`` must be aware, ``order`` one of the known); None where ``last`` is a count <= 0,
    which no statement is needed to answer with no messages."""
    after, last, roles = options.get("after"), options.get("last"), options.get("roles")
    until = options.get("until")
    until = None if until is None else aware(until, field_name="until")
    time_order = by_time(options.get("order", "append"))
    if last is not None and last <= 0:
        return None
    conditions = [d.key]
    params: list[Any] = list(key)
    if after is not None:
        conditions.append(f"seq > {d.mark}")
        params.append(after)
    if until is not None:
        conditions.append(f"{d.time_column} <= {d.mark}")
        params.append(d.instant(until))
    if roles is not None:
        condition, values = d.any_of("role", roles)
        conditions.append(condition)
        params += values
    query = f"SELECT {columns} FROM {d.table('messages')} WHERE {' AND '.join(conditions)}"
    if time_order:  # the time column is the instant, whatever offset the message was given with
        query += f" ORDER BY {d.time_column} DESC, seq DESC"
        if last is not None:
            return Select(f"{query} LIMIT {d.mark}", [*params, last], reverse=True)
        return Select(query, params, reverse=True)
    if last is not None:
        return Select(f"SELECT * FROM ({query} ORDER BY seq DESC LIMIT {d.mark}) AS tail ORDER BY seq", [*params, last])
    return Select(query + " ORDER BY seq", params)
