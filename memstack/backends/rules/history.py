"""``HistoryStore.read``'s options applied in Python, for the backends that hold a thread's whole
log in hand (memory, JSON lines); the SQL backends say the same in their WHERE and ORDER BY."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from ...stores import ReadOptions
from ...types import Message, aware, by_time


def read_filter(log: Sequence[Message], **options: Unpack[ReadOptions]) -> list[Message]:
    """The messages after seq ``after``, at or before ``until``, of ``roles``, in append order (or
    by instant, then seq, for ``order="time"``), the last ``last`` of them."""
    out = list(log)
    if (after := options.get("after")) is not None:
        out = [m for m in out if m.seq is not None and m.seq > after]
    if (until := options.get("until")) is not None:
        until = aware(until, field_name="until")
        out = [m for m in out if m.timestamp <= until]
    if (roles := options.get("roles")) is not None:
        out = [m for m in out if m.role in roles]
    if by_time(options.get("order", "append")):
        out.sort(key=lambda m: (m.timestamp, m.seq or 0))
    if (last := options.get("last")) is not None:
        out = out[-last:] if last > 0 else []
    return out
