"""The history read's SELECT, as SQLite and PostgreSQL both write it, for a ``Dialect``.

The messages' columns and codecs differ (SQLite keeps a timestamp as ISO text beside UTC
microseconds, PostgreSQL as timestamptz), and so do appends (PostgreSQL's per-thread advisory
lock) and the steps PostgreSQL runs on both drivers; what is here is the statement that selects a
thread's messages for ``HistoryStore.read``, with its filters and order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .dialect import Dialect


def read_query(
    d: Dialect,
    columns: str,
    key: Sequence[str],
    *,
    after: int | None,
    until: datetime | None,
    last: int | None,
    roles: Sequence[str] | None,
    time_order: bool,
) -> tuple[str, list[Any]]:
    """The thread's messages (``key``, exact) after seq ``after``, at or before ``until`` (an
    aware datetime), in ``roles``, the ``last`` ones (None: all; a caller answers a count <= 0 with
    no messages): in append order (seq), or with ``time_order`` newest first by instant then seq,
    so that LIMIT keeps the last n (the caller reverses the rows)."""
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
    elif last is not None:
        return f"SELECT * FROM ({query} ORDER BY seq DESC LIMIT {d.mark}) AS tail ORDER BY seq", [*params, last]
    else:
        return query + " ORDER BY seq", params
    if last is not None:
        return f"{query} LIMIT {d.mark}", [*params, last]
    return query, params
