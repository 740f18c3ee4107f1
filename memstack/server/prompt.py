"""The request the proxy sends upstream: the client's system messages, then one system message of
memory, then the thread's earlier turns the client did not send, then the client's conversation
as sent, trimmed by the core's ``trim`` (oldest first) only when the whole would exceed the
budget. Pure functions.

The client's messages are forwarded as the client wrote them (every field kept); they are parsed
into Messages only to be counted, trimmed and stored. ``developer`` messages count as system ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..budget import trim
from ..errors import BudgetError, InvalidInput
from ..tokens import TokenCounter
from ..types import Message

#: the id Memory.context() gives the one system message that holds the memory sections
MEMORY_MESSAGE_ID = "memstack-memory"


@dataclass(frozen=True, slots=True)
class ClientMessage:
    raw: dict[str, Any]
    message: Message


@dataclass(frozen=True, slots=True)
class Outgoing:
    """The messages to send, their tokens, and what fitting them cost."""

    messages: list[dict[str, Any]]
    tokens: int
    trimmed: int
    memory_tokens: int


def parse_client(raw_messages: Sequence[Mapping[str, Any]]) -> list[ClientMessage]:
    """The client's messages as Messages (ids ``client-N``); InvalidInput names ``messages[N].field``."""
    out = []
    for i, raw in enumerate(raw_messages):
        data = dict(raw)
        if data.get("role") == "developer":
            data["role"] = "system"
        try:
            message = Message.from_dict({k: v for k, v in data.items() if k not in ("id", "timestamp", "metadata")}, id=f"client-{i}")
        except InvalidInput as exc:
            raise InvalidInput(f"messages[{i}]: {exc}", field=f"messages[{i}].{exc.field or 'content'}") from exc
        out.append(ClientMessage(dict(raw), message))
    return out


def split_system(client: Sequence[ClientMessage]) -> tuple[list[ClientMessage], list[ClientMessage]]:
    """The leading system messages (the client's instructions) and the conversation after them."""
    n = 0
    while n < len(client) and client[n].message.role == "system":
        n += 1
    return list(client[:n]), list(client[n:])


def last_user_text(client: Sequence[ClientMessage]) -> str | None:
    return next((c.message.text for c in reversed(client) if c.message.role == "user" and c.message.text.strip()), None)


def fit(
    system: Sequence[ClientMessage],
    memory: Message | None,
    convo: Sequence[ClientMessage],
    budget: int | None,
    counter: TokenCounter,
    *,
    earlier: Sequence[Message] = (),
) -> Outgoing:
    """System messages, memory, the ``earlier`` stored turns, conversation; over ``budget``, the
    earlier turns and then the conversation are trimmed from the oldest end (whole turns, starting
    on a user message), and if even its last message cannot fit beside the memory, the memory goes
    first. BudgetError when nothing of it fits."""
    convo = [ClientMessage(m.to_openai(), m) for m in earlier] + list(convo)
    fixed = [c.message for c in system]
    talk = [c.message for c in convo]
    for mem in ([memory] if memory is not None else []) + [None]:
        head = fixed + ([mem] if mem is not None else [])
        total = counter.count_messages(head + talk)
        if budget is None or total <= budget:
            return _outgoing(system, mem, convo, talk, total, counter)
        room = budget - counter.count_messages(head)
        kept = trim(talk, room, counter, include_system=False) if room > 0 else []
        if kept and (not talk or kept[-1].id == talk[-1].id):
            return _outgoing(system, mem, convo, kept, counter.count_messages(head + kept), counter)
    raise BudgetError(f"the request's system messages and last message need more than the budget of {budget} tokens")


def _outgoing(
    system: Sequence[ClientMessage],
    memory: Message | None,
    convo: Sequence[ClientMessage],
    kept: Sequence[Message],
    tokens: int,
    counter: TokenCounter,
) -> Outgoing:
    ids = {m.id for m in kept}
    messages = (
        [c.raw for c in system] + ([memory.to_openai()] if memory is not None else []) + [c.raw for c in convo if c.message.id in ids]
    )
    return Outgoing(messages, tokens, len(convo) - len(ids), counter.count_message(memory) if memory is not None else 0)
