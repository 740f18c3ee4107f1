"""Regenerated answers: a message may replace earlier ones of its thread.

A chat client that regenerates an answer sends the same request again and shows the user only the
new answer. The thread keeps both (history is append-only), the new one naming the old in its
metadata (``replaces``: their ids); what the model is given, what the layers remember and what a
resent history is matched against is the thread as the client sees it: without the replaced ones.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from .errors import InvalidInput
from .types import Message

#: metadata key of a message: the ids of the earlier messages of its thread that it replaces
REPLACES = "replaces"
#: what a reader of a thread's history may ask for: the thread as the client sees it, or every message
REPLACED_CHOICES = ("exclude", "include")


def replaced_ids(messages: Sequence[Message]) -> set[str]:
    """The ids that a message of ``messages`` replaces."""
    out: set[str] = set()
    for m in messages:
        ids = m.metadata.get(REPLACES) if m.metadata else None
        if isinstance(ids, list):
            out.update(str(i) for i in ids)
    return out


def visible(messages: Sequence[Message]) -> list[Message]:
    """The messages as the client sees them: those no later message of the list replaces."""
    gone = replaced_ids(messages)
    return [m for m in messages if m.id not in gone] if gone else list(messages)


def replaces_of(message: Message) -> list[str] | None:
    """The ids ``message`` replaces, or None."""
    ids = message.metadata.get(REPLACES) if message.metadata else None
    return [str(i) for i in ids] if isinstance(ids, list) else None


def replaced_by(messages: Sequence[Message]) -> dict[str, str]:
    """Each replaced id of ``messages`` -> the id of the message that replaces it (the latest one,
    should several name it)."""
    out: dict[str, str] = {}
    for m in messages:
        ids = m.metadata.get(REPLACES) if m.metadata else None
        if isinstance(ids, list):
            out.update((str(i), m.id) for i in ids)
    return out


def check_replaced(value: object) -> str:
    """``value`` if it is "exclude" or "include", else InvalidInput naming ``replaced``."""
    if value not in REPLACED_CHOICES:
        raise InvalidInput(f"replaced must be one of {', '.join(REPLACED_CHOICES)}, not {value!r}", field="replaced")
    return str(value)


def visible_tail(read: Callable[[int | None], list[Message]], last: int | None) -> list[Message]:
    """The ``last`` visible messages (all, for None) of a thread that ``read(n)`` reads the last n
    messages of (``None``: all): the tail read grows until it holds ``last`` visible ones or the
    whole thread, since the answers a regenerate replaced are left out after reading."""
    if last is None:
        return visible(read(None))
    n = max(last, 1) * 2
    while True:
        raw = read(n)
        shown = visible(raw)
        if len(shown) >= last or len(raw) < n:
            return shown[len(shown) - last :] if last else []
        n *= 4


async def visible_tail_async(read: Callable[[int], Awaitable[list[Message]]], last: int) -> list[Message]:
    """``visible_tail`` for an awaited read (``AsyncMemory.history``)."""
    n = max(last, 1) * 2
    while True:
        raw = await read(n)
        shown = visible(raw)
        if len(shown) >= last or len(raw) < n:
            return shown[len(shown) - last :] if last else []
        n *= 4
