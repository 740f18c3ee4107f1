"""Fitting messages and sections into a token budget: window(), trim(), pack(). Pure functions.

Every function keeps conversations valid for a chat API: a kept tool result always follows its
assistant tool call and a kept tool call always has its results (the API rejects either alone).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal

from .errors import BudgetError, InvalidInput
from .tokens import TokenCounter
from .types import Message, Section, group_turns

Strategy = Literal["last", "first"]
#: where a sentence ends; not after a title's full stop ("Mr. Patel", "Dr. Li")
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;\n])|(?<=[.](?=\s))(?<!\b[MmDd]r\.)(?<!\b[Mm]rs\.)(?<!\b[Mm]s\.)(?<!\b[Ss]t\.)(?<!\bProf\.)")


def window(messages: Sequence[Message], k: int) -> list[Message]:
    """System messages plus the last ``k`` whole turns (a turn starts at a user message).

    Never starts the conversation with an assistant or tool message, never splits a user message
    from its reply or a tool call from its results. ``k = 0`` keeps only the system messages.
    """
    if k < 0:
        raise InvalidInput("k must be >= 0", field="k")
    system = [m for m in messages if m.role == "system"]
    turns = [t for t in group_turns(messages) if t.user is not None]
    kept = turns[len(turns) - k :] if k else []
    return system + [m for t in kept for m in t.messages]


def split_text(text: str) -> list[str]:
    """Split text after newlines and sentence ends (Chinese and English), keeping every character."""
    parts = [p for p in _SENTENCE_END.split(text) if p]
    return parts or [text]


def trim(
    messages: Sequence[Message],
    max_tokens: int,
    counter: TokenCounter,
    *,
    strategy: Strategy = "last",
    include_system: bool = True,
    start_on: str | Sequence[str] | None = "user",
    end_on: str | Sequence[str] | None = None,
    allow_partial: bool = False,
    text_splitter: Callable[[str], list[str]] = split_text,
) -> list[Message]:
    """Keep the messages that fit in ``max_tokens`` under ``counter``, as LangChain's trim_messages.

    ``strategy="last"`` keeps the most recent messages; with ``include_system`` a leading system
    message is always kept (BudgetError if it alone exceeds the budget); ``start_on`` drops kept
    messages from the front until one of that role starts the result. ``strategy="first"`` keeps
    the earliest; ``end_on`` drops from the back until one of that role ends it. With
    ``allow_partial`` the message at the boundary may be cut at a sentence or line. The result
    never counts more than ``max_tokens`` under ``counter``.
    """
    if max_tokens < 0:
        raise InvalidInput("max_tokens must be >= 0", field="max_tokens")
    if strategy not in ("last", "first"):
        raise InvalidInput(f"strategy must be 'last' or 'first', not {strategy!r}", field="strategy")
    if strategy == "first" and start_on is not None and start_on != "user":
        raise InvalidInput("start_on applies to strategy='last' only", field="start_on")
    msgs = list(messages)
    if strategy == "first":
        kept = _first(msgs, max_tokens, counter, partial="first" if allow_partial else None, splitter=text_splitter)
        return _drop_unanswered_calls(_end_on(kept, end_on))
    if end_on:
        msgs = _end_on(msgs, end_on)
    system: list[Message] = []
    budget = max_tokens
    if include_system and msgs and msgs[0].role == "system":
        system, msgs = [msgs[0]], msgs[1:]
        budget -= counter.count_message(system[0])
        if budget < 0:
            raise BudgetError(f"the system message alone needs {max_tokens - budget} tokens, over the budget of {max_tokens}")
    kept = _first(msgs[::-1], budget, counter, partial="last" if allow_partial else None, splitter=text_splitter)[::-1]
    kept = _start_on(kept, start_on)
    return system + kept


def _roles(spec: str | Sequence[str]) -> set[str]:
    names = {spec} if isinstance(spec, str) else set(spec)
    return {"user" if n == "human" else "assistant" if n == "ai" else n for n in names}


def _start_on(msgs: list[Message], start_on: str | Sequence[str] | None) -> list[Message]:
    """Drop from the front until a message of the given role (and never start on a tool result)."""
    roles = _roles(start_on) if start_on else None
    i = 0
    while i < len(msgs) and ((roles is not None and msgs[i].role not in roles) or msgs[i].role == "tool"):
        i += 1
    return msgs[i:]


def _end_on(msgs: list[Message], end_on: str | Sequence[str] | None) -> list[Message]:
    if not end_on:
        return msgs
    roles = _roles(end_on)
    end = len(msgs)
    while end and msgs[end - 1].role not in roles:
        end -= 1
    return msgs[:end]


def _drop_unanswered_calls(msgs: list[Message]) -> list[Message]:
    """Cut the tail back to before an assistant tool call whose results were not all kept."""
    answered = {m.tool_call_id for m in msgs if m.role == "tool"}
    for i, m in enumerate(msgs):
        if m.tool_calls and not all(c.id in answered for c in m.tool_calls):
            return msgs[:i]
    return msgs


def _first(
    msgs: list[Message], budget: int, counter: TokenCounter, *, partial: str | None, splitter: Callable[[str], list[str]]
) -> list[Message]:
    """The longest prefix within budget (plus a partial message at the boundary if allowed).

    Counts only up to the first message that does not fit: O(kept), not O(all)."""
    used = n = 0
    for m in msgs:
        cost = counter.count_message(m)
        if used + cost > budget:
            break
        used += cost
        n += 1
    kept = msgs[:n]
    if partial and n < len(msgs):
        cut = _partial(msgs[n], budget - used, counter, from_end=partial == "last", splitter=splitter)
        if cut is not None:
            kept.append(cut)
    return kept


def _partial(
    message: Message, budget: int, counter: TokenCounter, *, from_end: bool, splitter: Callable[[str], list[str]]
) -> Message | None:
    """The largest run of whole pieces of ``message``'s text (from its start or end) that fits."""
    if not isinstance(message.content, str) or message.tool_calls or budget <= 0:
        return None
    pieces = splitter(message.content)
    if from_end:
        pieces = pieces[::-1]
    best = None
    lo, hi = 1, len(pieces) - 1  # all pieces = the whole message, which did not fit
    while lo <= hi:
        mid = (lo + hi) // 2
        chosen = pieces[:mid][::-1] if from_end else pieces[:mid]
        candidate = replace(message, content="".join(chosen), metadata={**message.metadata, "partial": True})
        if candidate.text.strip() and counter.count_message(candidate) <= budget:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


def pack(sections: Sequence[Section], budget: int, counter: TokenCounter) -> tuple[list[Section], list[Section]]:
    """Keep sections in priority order (then given order) while their text fits ``budget``.

    Returns (kept in the given order, dropped). A section is kept whole or not at all.
    """
    order = sorted(range(len(sections)), key=lambda i: (sections[i].priority, i))
    kept_idx, dropped, used = set(), [], 0
    for i in order:
        cost = counter.count(sections[i].text) + 4
        if used + cost <= budget:
            kept_idx.add(i)
            used += cost
        else:
            dropped.append(sections[i])
    return [s for i, s in enumerate(sections) if i in kept_idx], dropped
