"""The last k whole turns of a list of LangChain messages, by the ``window`` layer's rule.

    recent = window_messages(messages, k=2)     # the articles' get_recent_messages(messages, k)

The ``window`` layer keeps the last k turns of a stored thread (``Memory.context(strategy=
"window", k=...)``); this is the same rule (``memstack.budget.window``) for a list an app holds
itself, such as a LangGraph state's messages: the system messages, then the last ``k`` turns,
where a turn starts at a user message and holds what follows it until the next one. So it never
starts on a reply cut from its question, never splits a tool call from its results, and counts
turns, not messages, also when the user sends several messages in a row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..budget import window
from ..errors import InvalidInput, importing
from .langchain_history import to_memstack

with importing("langchain-core", "langchain"):
    from langchain_core.messages import BaseMessage

__all__ = ["window_messages"]


def window_messages(messages: Sequence[BaseMessage], k: int) -> list[BaseMessage]:
    """The system messages and the last ``k`` whole turns of ``messages``, in their order: the
    given message objects themselves, not copies. ``k = 0`` keeps only the system messages.

    InvalidInput for a negative ``k``, and for a message memstack cannot hold (it names the
    message: ``messages[3].content``), as ``MemstackChatMessageHistory.add_messages`` does.
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise InvalidInput(f"k must be an integer, got {type(k).__name__}", field="k")
    if k < 0:
        raise InvalidInput("k must be >= 0", field="k")
    by_position = []
    for i, message in enumerate(messages):
        try:
            by_position.append(dataclasses.replace(to_memstack(message), id=str(i)))
        except InvalidInput as exc:
            raise InvalidInput(f"messages[{i}]: {exc}", field=f"messages[{i}].{exc.field or 'content'}") from exc
    return [messages[int(m.id)] for m in window(by_position, k)]
