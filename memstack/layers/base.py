"""The layer contract: a cheap read side that shapes the context, an optional write side run by jobs.

A layer's ``read`` receives the conversation as shaped by the layers before it and returns the
messages to keep, the memory sections to add to the system prompt, and what it dropped and why.
A layer that also implements ``Writer.write`` gets a durable job after every ``add()``; writes
must be idempotent (keyed by source message ids), since a job killed mid-way runs again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ..tokens import TokenCounter
from ..types import Dropped, Message, Record, Scope, Section

if TYPE_CHECKING:
    from ..stores import Store

LayerScope = Literal["thread", "user"]
HistoryNeed = Literal["none", "tail", "all"]


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """What a layer's read side may use: whose context, the next user message, the reference time,
    the tokens it may spend, and the counter that measures them."""

    scope: Scope
    query: str | None
    at: datetime
    budget: int | None
    counter: TokenCounter
    #: ids of messages already in the context (e.g. the stored message the query came from)
    exclude_ids: frozenset[str] = frozenset()
    #: scratch space of one context() call: a layer read again with a larger budget (Memory gives
    #: a layer what the others left unused) keeps its costly work here (the retrieval's hits)
    memo: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class LayerOutput:
    messages: list[Message]
    sections: list[Section] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class WriteRequest:
    """New messages of one thread for a layer's write side: those after ``cursor`` (the seq the
    layer consumed last time; 0 at the thread's start). ``final`` asks it not to wait for a
    fuller batch (flush)."""

    scope: Scope
    messages: Sequence[Message]
    final: bool
    store: Store
    cursor: int = 0


@dataclass(frozen=True, slots=True)
class Waiting:
    """What ``write`` returns to hold turns back for a fuller batch: nothing was consumed after
    ``cursor``; the job is taken again by the next add's request or by a flush."""

    cursor: int


@runtime_checkable
class Layer(Protocol):
    name: str
    #: whose memory it keeps: one thread's, or the user's across threads
    scope: LayerScope
    #: how much of the thread the read side needs: none, a recent tail, or all of it
    history: HistoryNeed

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput: ...


@runtime_checkable
class Writer(Protocol):
    def write(self, request: WriteRequest) -> int | Waiting | None:
        """Process ``request.messages``; return the seq of the last message consumed (None: all),
        or Waiting(cursor) to hold them back until the batch fills (never when ``request.final``)."""
        ...


def record_lines(layer: str, title: str, records: Sequence[Record], render: Callable[[Record], str], budget: int | None, counter: TokenCounter, *, what: str, priority: int) -> LayerOutput:
    """One section of ``title`` and a line per record, best first, within ``budget`` tokens (a
    record that does not fit is left out, the ones after it may still fit); its sections and what it
    dropped (``what``: "entities", "relations"), for a LayerOutput of no messages of its own."""
    lines = [title]
    shown: list[Record] = []
    left: list[tuple[Record, str]] = []
    for r in records:
        line = render(r)
        if budget is not None and counter.count("\n".join([*lines, line])) > budget:
            left.append((r, line))
            continue
        lines.append(line)
        shown.append(r)
    dropped = [Dropped(layer, f"{len(left)} {what} over its share of the budget", tuple(i for r, _ in left for i in r.source_ids), sum(counter.count(line) for _, line in left))] if left else []
    sections = [Section(layer, "\n".join(lines), priority=priority, source_ids=tuple(i for r in shown for i in r.source_ids))] if shown else []
    return LayerOutput([], sections, dropped)


def dropped_between(layer: str, before: Sequence[Message], after: Sequence[Message], reason: str, counter: TokenCounter) -> list[Dropped]:
    """A Dropped record for the messages in ``before`` that are not in ``after`` (by id)."""
    kept = {m.id for m in after if not m.metadata.get("partial")}
    gone = [m for m in before if m.id not in kept]
    if not gone:
        return []
    return [Dropped(layer, reason, tuple(m.id for m in gone), sum(counter.count_message(m) for m in gone))]
