"""The layer contract: a cheap read side that shapes the context, an optional write side run by jobs.

A layer's ``read`` receives the conversation as shaped by the layers before it and returns the
messages to keep, the memory sections to add to the system prompt, and what it dropped and why.
A layer that also implements ``Writer.write`` gets a durable job after every ``add()``; writes
must be idempotent (keyed by source message ids), since a job killed mid-way runs again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..reldates import annotate
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


@dataclass
class ExtractedLayer:
    """The base of the layers that read what the extractor's job wrote (entities, relations,
    state): records of the user, kept in ``store``; the thread itself is not read."""

    store: Any
    scope: str = "user"
    history: str = "none"
    job: str = "extract"


def current_records(store: Any, scope: Scope, kind: str, keys: Sequence[str] | None = None) -> list[Record]:
    """The store's current records of ``kind`` at ``scope`` (``RecordStore.current``); [] from a
    store that keeps none (jsonl): a layer that reads records then adds nothing."""
    records = getattr(store, "records", None)
    return [] if records is None else records.current(scope, kind, keys)  # type: ignore[no-any-return]


def record_lines(
    layer: str,
    title: str,
    records: Sequence[Record],
    render: Callable[[Record], str | Sequence[str]],
    budget: int | None,
    counter: TokenCounter,
    *,
    what: str,
    priority: int,
    tail: Callable[[Callable[[str], bool]], str] | None = None,
) -> LayerOutput:
    """One section of ``title`` and a line per record, best first, within ``budget`` tokens (a
    record that does not fit is left out, the ones after it may still fit); its sections and what it
    dropped (``what``: "entities", "relations"), for a LayerOutput of no messages of its own.
    ``render`` may give a record's line in several forms, the fullest first (with its quote, then
    without): the first that fits is shown. ``tail``: makes a last line, given a test of whether a
    line would still fit (e.g. the names of records too bare for a line of their own; "": none)."""
    lines = [title]
    shown: list[Record] = []
    left: list[tuple[Record, str]] = []
    for r in records:
        forms = render(r)
        forms = [forms] if isinstance(forms, str) else list(forms)
        line = next((f for f in forms if budget is None or counter.count("\n".join([*lines, f])) <= budget), None)
        if line is None:
            left.append((r, forms[-1]))
            continue
        lines.append(line)
        shown.append(r)
    if tail is not None:

        def fits(line: str) -> bool:
            return budget is None or counter.count("\n".join([*lines, line])) <= budget

        extra = tail(fits)
        if extra and fits(extra):
            lines.append(extra)
    dropped = (
        [
            Dropped(
                layer,
                f"{len(left)} {what} over its share of the budget",
                tuple(i for r, _ in left for i in r.source_ids),
                sum(counter.count(line) for _, line in left),
            )
        ]
        if left
        else []
    )
    sections = (
        [Section(layer, "\n".join(lines), priority=priority, source_ids=tuple(i for r in shown for i in r.source_ids))]
        if len(lines) > 1
        else []
    )
    return LayerOutput([], sections, dropped)


#: the longest quote of the words a model-made fact came from: characters of Chinese, words of English
QUOTE_CHARS = 20
QUOTE_WORDS = 12


def dated_quote(text: str, anchor: str, said: str | datetime | None, lang: str) -> str:
    """``short_quote`` with the calendar date after each relative expression, dated from the day
    the words were said ("我上周五（2026-03-06）去医院体检了"): beside the date a fact was said, a
    bare "上周五" was read as that date ("2026-03-12"), as in the retrieved turns and the summary's
    quotes. ``said``: a datetime or an ISO string; unreadable or missing leaves the quote bare."""
    quote = short_quote(text, anchor)
    if not quote or not said:
        return quote
    try:
        when = said if isinstance(said, datetime) else datetime.fromisoformat(str(said))
    except ValueError:
        return quote
    return annotate(quote, when, lang)


def short_quote(text: str, anchor: str = "") -> str:
    """At most ``QUOTE_CHARS`` characters of Chinese (a Latin word counts two) or ``QUOTE_WORDS``
    words of other text, of ``text``: the clause that holds ``anchor`` (the value the fact states),
    "…" where cut.

    Decision: only that clause (and a condition before it: "如果…，", "if …,"), not the whole
    sentence even where it would fit. The clauses beside it state other facts, and they go stale
    on their own: beside the current 计划=装修, "我家准备装修，预算二十万，想要北欧风" said the
    old style again, in the entities and again in the graph, and the model answered with it.
    Without the anchor in any clause, the first clauses that fit."""
    text = " ".join((text or "").split()).strip().rstrip("。.！!；;，, ")
    if not text:
        return ""
    cjk = sum(1 for c in text if "\u3400" <= c <= "\u9fff")
    clauses = re.findall(r"[^，,；;。！!？?]+[，,；;。！!？?]?", text)
    at = _clause_of(clauses, anchor, words=cjk * 3 < len(text))
    if at is not None and len(clauses) > 1:
        begin = at - 1 if at and _CONDITION.match(clauses[at - 1].strip()) else at
        piece = "".join(clauses[begin : at + 1]).strip().rstrip("，,；;。！! ")
        if len(piece) < len(text):
            cut = short_quote(piece, anchor)
            return (
                ("…" if begin and not cut.startswith("…") else "") + cut + ("…" if at + 1 < len(clauses) and not cut.endswith("…") else "")
            )
    if cjk * 3 < len(text):  # words
        words = text.split(" ")
        if len(words) <= QUOTE_WORDS:
            return text
        first = anchor.casefold().split(" ")[0] if anchor.strip() else ""
        at_word = next((i for i, w in enumerate(words) if first and first in w.casefold()), 0)
        begin = max(0, min(at_word - QUOTE_WORDS // 2, len(words) - QUOTE_WORDS))
        return ("…" if begin else "") + " ".join(words[begin : begin + QUOTE_WORDS]) + ("…" if begin + QUOTE_WORDS < len(words) else "")
    if _width(text) <= QUOTE_CHARS:
        return text
    at = at or 0
    if _width(clauses[at]) > QUOTE_CHARS:  # one long clause: the characters up to the anchor's end
        stop = clauses[at].find(anchor) + len(anchor) if anchor and anchor in clauses[at] else QUOTE_CHARS
        piece = clauses[at][:stop]
        while _width(piece) > QUOTE_CHARS:
            piece = piece[1:]
        cut_before = at > 0 or not clauses[at].startswith(piece)
        return ("…" if cut_before else "") + piece.rstrip("，,；;") + ("…" if piece != text[-len(piece) :] else "")
    begin = at
    while begin > 0 and _width("".join(clauses[begin - 1 : at + 1])) <= QUOTE_CHARS:
        begin -= 1
    stop = at + 1
    while stop < len(clauses) and _width("".join(clauses[begin : stop + 1])) <= QUOTE_CHARS:
        stop += 1
    piece = "".join(clauses[begin:stop]).rstrip("，,；;。！! ")
    return ("…" if begin else "") + piece + ("…" if stop < len(clauses) else "")


#: a clause that sets a condition for the next one: kept in the quote with it
_CONDITION = re.compile(r"(如果|要是|假如|假设|万一|除非|等到|if\b|unless\b|once\b|when\b)", re.IGNORECASE)


def _clause_of(clauses: Sequence[str], anchor: str, *, words: bool) -> int | None:
    """The index of the first clause that holds ``anchor`` (in text of words: its first word,
    case-folded, at a word's start), None without one."""
    anchor = anchor.strip()
    if not anchor:
        return None
    if not words:
        return next((i for i, c in enumerate(clauses) if anchor in c), None)
    first = re.escape(anchor.casefold().split(" ")[0])
    return next((i for i, c in enumerate(clauses) if re.search(rf"(?<![\w]){first}", c.casefold())), None)


def _width(text: str) -> int:
    """Characters as a reader counts them: a Latin word or number is two."""
    return len(re.sub(r"[A-Za-z0-9_.+#-]+", "ab", text))


def dropped_between(layer: str, before: Sequence[Message], after: Sequence[Message], reason: str, counter: TokenCounter) -> list[Dropped]:
    """A Dropped record for the messages in ``before`` that are not in ``after`` (by id)."""
    kept = {m.id for m in after if not m.metadata.get("partial")}
    gone = [m for m in before if m.id not in kept]
    if not gone:
        return []
    return [Dropped(layer, reason, tuple(m.id for m in gone), sum(counter.count_message(m) for m in gone))]
