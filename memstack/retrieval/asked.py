"""Rounds in which the user only asked and the assistant answered: what the user said there is a
question, and the answer is the assistant's. Asked about the user ("我现在住在哪个城市？"), the
answer comes from memory, or from the assistant's mistake ("根据你之前告诉我的，你住在上海" after the
user said they moved): shown as memory, it is copied ("你住在上海"). Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

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
    aside) ends with a question mark, they hold at most ``MAX_ASKED_TERMS`` content words, and no
    sentence says something before it asks (see ``says_something``); else None. Between people (named speakers) a question's answer is the other's own words, so
    such a unit is not one; nor is a unit without the assistant's answer."""
    own = own_spans(unit)
    labels = {span[2] for span in own}
    if not (labels & USER_LABELS) or not (labels & ASSISTANT_LABELS) or not labels <= USER_LABELS | ASSISTANT_LABELS:
        return None
    asked = "\n".join(unit.text[start:end] for _mid, _seq, label, _off, start, end in own if label in USER_LABELS)
    sentences = [s.strip() for s in split_text(asked) if s.strip()]
    if not sentences or not all(ASKS.search(s) for s in sentences) or len(segment(asked)) > MAX_ASKED_TERMS:
        return None
    if any(says_something(s) for s in sentences):
        return None
    return asked


#: where a sentence's clauses end
_CLAUSE = re.compile(r"[，,；;：:]")
#: the most content words a clause before a question may hold and still only lead into it ("对了，",
#: "请问，", "By the way,")
MAX_LEAD_TERMS = 1


def says_something(sentence: str) -> bool:
    """Whether a question sentence says something before it asks: a clause ahead of its last with
    content of its own ("我很喜欢旅游和看电影，你呢？", "比赛那天早上六点半就起跑，我得几点起床啊？")."""
    clauses = [c for c in _CLAUSE.split(sentence) if c.strip()]
    return any(len(segment(c)) > MAX_LEAD_TERMS for c in clauses[:-1])


#: a question asking what to do or what is good: its answer is the assistant's advice, new content
#: of the assistant's own, not drawn from what the user said ("那我现在该怎么办？", "有什么好的推荐吗？")
_ADVICE = re.compile(
    r"应该|我该|我得|怎么办|怎么做|怎样才|如何|建议|推荐|能不能|可不可以|要不要|有什么好|帮我|帮忙|"
    r"\b(?:should|recommend|suggest|advice|advise|ideas?|tips?|how (?:can|do|should|could) i|what can i)\b",
    re.IGNORECASE,
)


def asks_for_advice(question: str) -> bool:
    """Whether the question asks the assistant for advice or suggestions (see ``_ADVICE``)."""
    return bool(_ADVICE.search(question))


def asked_only(unit: Unit) -> bool:
    """Whether the unit is a round in which the user only asked (see ``asked_text``)."""
    return asked_text(unit) is not None


def without_derived_answers(hits: Sequence[Hit]) -> list[Hit]:
    """The hits without the rounds in which the user only asked about themself ("我现在住在哪个城市？",
    "What language does my backend use now?"): the assistant's answer there was drawn from memory
    (the rounds in which the user said it are the memory) or was its mistake, and a model given it
    as memory repeats it; the bare question says nothing either, and a few of them ("用户: 我现在住在
    哪个城市？ 用户: 我的后端用什么语言？") filled the section in the place of what the user said. For a
    context whose question is not about what the assistant said."""
    return [h for h in hits if not derived(h.unit)]


def derived(unit: Unit) -> bool:
    """Whether the unit is a round in which the user only asked about themself and the assistant's
    answer could only come from memory: first person, not a request for advice (see
    ``asks_for_advice``: that answer is the assistant's own, and what "你建议过什么？" asks about)."""
    asked = asked_text(unit)
    return asked is not None and first_person(asked) and not asks_for_advice(asked)
