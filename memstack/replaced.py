"""Regenerated answers: a message may replace earlier ones of its thread.

A chat client that regenerates an answer sends the same request again and shows the user only the
new answer. The thread keeps both (history is append-only), the new one naming the old in its
metadata (``replaces``: their ids); what the model is given, what the layers remember and what a
resent history is matched against is the thread as the client sees it: without the replaced ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from .types import Message

#: metadata key of a message: the ids of the earlier messages of its thread that it replaces
REPLACES = "replaces"


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
