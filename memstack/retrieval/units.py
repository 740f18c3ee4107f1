"""Cutting a thread's messages into retrievable units: one per user/assistant round, or chunks of
at most ``chunk_tokens`` (sentence boundaries) when a round is long. Pure functions.

A unit's id is derived from its round's first message id and its chunk number, so rebuilding the
same round gives the same ids (writes are idempotent); its ``source_ids`` are the messages its text
was taken from, which is what recall is measured against.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..budget import split_text
from ..tokens import TokenCounter
from ..types import Message, Scope, Unit, group_turns

_CJK = re.compile(r"[\u3400-\u9fff]")
LABELS = {"zh": {"user": "用户", "assistant": "助手"}, "en": {"user": "User", "assistant": "Assistant"}}


def language(text: str) -> str:
    """'zh' when a tenth or more of the characters are Chinese, else 'en'."""
    if not text:
        return "en"
    return "zh" if len(_CJK.findall(text)) * 10 >= len(text) else "en"


def speaker(message: Message, lang: str) -> str:
    return message.name or LABELS[lang].get(message.role, message.role)


@dataclass(frozen=True, slots=True)
class Piece:
    """A stretch of one message's text: ``text`` starts at character ``offset`` of the message."""

    message: Message
    label: str
    text: str
    offset: int = 0


def round_pieces(messages: Sequence[Message], lang: str) -> list[Piece]:
    """The speakable text of a round, message by message (tool traffic and empty text left out)."""
    return [Piece(m, speaker(m, lang), m.text) for m in messages if m.role in ("user", "assistant") and m.text.strip()]


#: A span of a unit's text: [message id, message seq, speaker label, offset in the message,
#: start and end in the unit's text]. Rendering merges spans of one message across units.
Span = list


def render_pieces(pieces: Sequence[Piece]) -> tuple[str, list[Span]]:
    """ "Label: text" lines (consecutive pieces of one message share a line) and their spans."""
    out = ""
    spans: list[Span] = []
    for p in pieces:
        last = spans[-1] if spans else None
        if last is not None and last[0] == p.message.id and last[3] + (last[5] - last[4]) == p.offset:
            out += p.text
            last[5] = len(out)
            continue
        if last is not None:
            out = out.rstrip()
            last[5] = min(last[5], len(out))
        text = p.text.lstrip()
        out += ("\n" if out else "") + f"{p.label}: "
        spans.append([p.message.id, p.message.seq, p.label, p.offset + len(p.text) - len(text), len(out), len(out) + len(text)])
        out += text
    out = out.rstrip()
    if spans:
        spans[-1][5] = min(spans[-1][5], len(out))
    return out, spans


def sentence_pieces(piece: Piece) -> list[Piece]:
    """A piece cut at sentence ends, each sentence with its offset in the message."""
    out, offset = [], piece.offset
    for sentence in split_text(piece.text):
        if sentence.strip():
            out.append(Piece(piece.message, piece.label, sentence, offset))
        offset += len(sentence)
    return out


def chunk_pieces(pieces: Sequence[Piece], counter: TokenCounter, chunk_tokens: int) -> list[list[Piece]]:
    """Greedy packing of sentence pieces into chunks of at most ``chunk_tokens`` (a sentence longer
    than that stands alone)."""
    sentences = [piece for p in pieces for piece in sentence_pieces(p)]
    chunks: list[list[Piece]] = []
    current: list[Piece] = []
    used = 0
    for s in sentences:
        cost = counter.count(s.text) + (2 if not current or current[-1].message.id != s.message.id else 0)
        if current and used + cost > chunk_tokens:
            chunks.append(current)
            current, used = [], 0
            cost = counter.count(s.text) + 2
        current.append(s)
        used += cost
    if current:
        chunks.append(current)
    return chunks


def lead_in(previous: Sequence[Message], lang: str, counter: TokenCounter, max_tokens: int) -> Piece | None:
    """The end of the previous round's last message (its last sentences, at most ``max_tokens``):
    what the round answers ("你喜欢哪种菜系呢？" before "我比较喜欢川菜和粤菜")."""
    replies = [m for m in previous if m.role in ("user", "assistant") and m.text.strip()]
    if not replies or max_tokens <= 0:
        return None
    last = replies[-1]
    kept: list[Piece] = []
    for sentence in reversed(sentence_pieces(Piece(last, speaker(last, lang), last.text))):
        if counter.count("".join(p.text for p in [sentence, *kept])) > max_tokens:
            break
        kept.insert(0, sentence)
    return Piece(last, kept[0].label, "".join(p.text for p in kept), kept[0].offset) if kept else None


def units_for_round(
    scope: Scope,
    messages: Sequence[Message],
    round_no: int,
    counter: TokenCounter,
    *,
    chunk_tokens: int = 280,
    previous: Sequence[Message] = (),
    lead_tokens: int = 40,
    key_min_tokens: int | None = 180,
) -> list[Unit]:
    """The units of one round: the whole round if it fits ``chunk_tokens``, else its chunks; the
    first is led in by the end of the ``previous`` round's reply (see ``lead_in``): context only,
    so a unit's time is that of its own first message, and the lead-in's own id and time are kept
    in ``metadata["lead"]`` (rendering dates it by them). A unit longer
    than ``key_min_tokens`` lists the user's sentences in it as keys (None: no keys); a shorter one
    is about what its own embedding says, and keys would only repeat it."""
    lang = language("".join(m.text for m in messages))
    pieces = round_pieces(messages, lang)
    if not pieces:
        return []
    whole, _ = render_pieces(pieces)
    groups = [list(pieces)] if counter.count(whole) <= chunk_tokens else chunk_pieces(pieces, counter, chunk_tokens)
    lead = lead_in(previous, lang, counter, lead_tokens) if messages[0].role == "user" else None
    if lead is not None:
        groups[0] = [lead, *groups[0]]
    first = messages[0]
    own = [g[1:] if (i == 0 and lead is not None) else g for i, g in enumerate(groups)]
    category = next((m.metadata.get("category") for m in messages if m.metadata.get("category")), None)
    units = []
    for i, group in enumerate(groups):
        sources = tuple(dict.fromkeys(p.message.id for p in group))
        text, spans = render_pieces(group)
        keys = sentence_keys(own[i]) if key_min_tokens is not None and counter.count(text) > key_min_tokens else []
        led = {"lead": {"id": lead.message.id, "at": lead.message.timestamp.isoformat()}} if (i == 0 and lead is not None) else {}
        units.append(
            Unit(
                id=f"{first.id}:{i}",
                scope=scope,
                text=text,
                timestamp=own[i][0].message.timestamp,
                kind="round" if len(groups) == 1 else "chunk",
                round=round_no,
                category=str(category) if category else None,
                source_ids=sources,
                metadata={
                    "lang": lang,
                    "spans": spans,
                    "roles": sorted({p.message.role for p in group}),
                    **({"keys": keys} if keys else {}),
                    **led,
                },
            )
        )
    return units


def own_spans(unit: Unit) -> list[Span]:
    """The unit's spans without its lead-in's (the end of the round before: context only)."""
    lead = (unit.metadata.get("lead") or {}).get("id")
    return [span for span in unit.metadata.get("spans") or [] if span[0] != lead]


def own_text(unit: Unit, *, without: frozenset[str] = frozenset()) -> str:
    """The unit's words without speaker labels or its lead-in, and without the words of the
    speakers labelled ``without``; a unit without spans, its text."""
    if not unit.metadata.get("spans"):
        return unit.text
    return "\n".join(unit.text[start:end] for _mid, _seq, label, _off, start, end in own_spans(unit) if label not in without)


#: sentence keys per unit at most, and the shortest sentence that gets one (characters)
MAX_KEYS = 12
MIN_KEY_CHARS = 8


def sentence_keys(pieces: Sequence[Piece]) -> list[str]:
    """The sentences the user said in these pieces, each to be embedded on its own: a fact said in
    passing at the end of a long message ("By the way, I've had my acoustic guitar for 8 years")
    is lost in the embedding of the whole round but found by its own."""
    out: list[str] = []
    for piece in pieces:
        if piece.message.role != "user":
            continue
        for s in sentence_pieces(piece):
            text = s.text.strip()
            if len(text) >= MIN_KEY_CHARS and text not in out:
                out.append(text)
    return out[:MAX_KEYS]


def rounds(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages grouped into rounds (a user message and what answers it); system messages skipped."""
    return [list(t.messages) for t in group_turns(messages)]


#: the generic speaker labels, which say nothing a vector needs (a person's name stays)
ROLE_LABELS = frozenset(label for labels in LABELS.values() for label in labels.values())


def dense_text(unit: Unit, max_tokens: int, counter: TokenCounter) -> str:
    """What the dense index embeds of a unit: its opening (``head``), each line without a generic
    "用户:" / "Assistant:" label. Those labels are a fifth of a short round's tokens (embedding
    time is per token) and tell the vector nothing; names ("Caroline:") are kept."""
    spans = unit.metadata.get("spans") or []
    if not spans:
        return head(unit.text, max_tokens, counter)
    lines = [
        unit.text[start:end] if label in ROLE_LABELS else f"{label}: {unit.text[start:end]}"
        for _mid, _seq, label, _off, start, end in spans
    ]
    return head("\n".join(lines), max_tokens, counter)


def head(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` (what the dense index embeds of a long
    unit; keyword search always sees all of it)."""
    if counter.count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]
