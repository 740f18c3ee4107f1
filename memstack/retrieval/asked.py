"""Rounds in which the user only asked and the assistant answered: what the user said there is a
question, and the answer is the assistant's. Asked about the user ("我现在住在哪个城市？"), the
answer comes from memory, or from the assistant's mistake ("根据你之前告诉我的，你住在上海" after the
user said they moved): shown as memory, it is copied ("你住在上海"). Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..budget import split_text
from ..text import segment
from ..types import Hit, Unit
from .units import LABELS, own_spans

USER_LABELS = frozenset(labels["user"] for labels in LABELS.values())
ASSISTANT_LABELS = frozenset(labels["assistant"] for labels in LABELS.values())
#: a question's end: a question mark, maybe followed by closing quotes, brackets or an emoticon
ASKS = re.compile(r"[？?][\s\"'”’）)～~]*$")
#: the most content words a question has and still only asks (more, and it says things too:
#: "今天我在图书馆发现了一本小说，叫《百年孤独》，你听说过吗？" is a statement ending in a question)
MAX_ASKED_TERMS = 8
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b|我", re.IGNORECASE)
#: "you" / "你" / "您": the question is about what the assistant said
_TO_ASSISTANT = re.compile(r"\b(?:you|your|yours|yourself)\b|[你您]", re.IGNORECASE)


def first_person(text: str) -> bool:
    """Whether the text speaks of the user in the first person ("我", "I", "my")."""
    return bool(_FIRST_PERSON.search(text))


def speaks_to_assistant(query: str) -> bool:
    """Whether the question is about what the assistant said ("你推荐过什么？", "what did you say")."""
    return bool(_TO_ASSISTANT.search(query))


def asked_text(unit: Unit) -> str | None:
    """The user's question when the unit is a round in which the user only asked the assistant
    something and the assistant answered: every sentence of the user's own words (the lead-in
    aside) ends with a question mark, and they hold at most ``MAX_ASKED_TERMS`` content words;
    else None. Between people (named speakers) a question's answer is the other's own words, so
    such a unit is not one; nor is a unit without the assistant's answer."""
    own = own_spans(unit)
    labels = {span[2] for span in own}
    if not (labels & USER_LABELS) or not (labels & ASSISTANT_LABELS) or not labels <= USER_LABELS | ASSISTANT_LABELS:
        return None
    asked = "\n".join(unit.text[start:end] for _mid, _seq, label, _off, start, end in own if label in USER_LABELS)
    sentences = [s.strip() for s in split_text(asked) if s.strip()]
    if not sentences or not all(ASKS.search(s) for s in sentences) or len(segment(asked)) > MAX_ASKED_TERMS:
        return None
    return asked


def asked_only(unit: Unit) -> bool:
    """Whether the unit is a round in which the user only asked (see ``asked_text``)."""
    return asked_text(unit) is not None


def without_derived_answers(hits: Sequence[Hit]) -> list[Hit]:
    """The hits, each round in which the user only asked about themself ("我现在住在哪个城市？",
    "What language does my backend use now?") cut to the user's question: the assistant's answer
    there was drawn from memory (the rounds in which the user said it are the memory) or was its
    mistake, and a model given it as memory repeats it. For a context whose question is not
    about what the assistant said."""
    out = []
    for h in hits:
        asked = asked_text(h.unit)
        out.append(h if asked is None or not first_person(asked) else replace(h, unit=_user_part(h.unit)))
    return out


def _user_part(unit: Unit) -> Unit:
    """The unit with only the user's own lines (text, spans and sources)."""
    text, spans = "", []
    for mid, seq, label, offset, start, end in own_spans(unit):
        if label not in USER_LABELS:
            continue
        text += ("\n" if text else "") + f"{label}: "
        spans.append([mid, seq, label, offset, len(text), len(text) + end - start])
        text += unit.text[start:end]
    metadata = {k: v for k, v in unit.metadata.items() if k not in ("lead", "spans", "roles")}
    ids = tuple(dict.fromkeys(str(span[0]) for span in spans))
    return replace(unit, text=text, source_ids=ids, metadata={**metadata, "spans": spans, "roles": ["user"]})
