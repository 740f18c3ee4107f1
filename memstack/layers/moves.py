"""Moves said in the user's words, as statements: "人也搬到重庆渝北区了" is 用户|搬到|重庆渝北区.

A move is the change people make most and the one a stale memory gets wrong most: when the
model leaves the new place out of a long sentence ("之前那家公司俺已经辞了，后来去了重庆一家公司，
人也搬到重庆渝北区了"), the old city stays current. So the extractor adds, beside the model's
statements, a statement for each move the words say that the model did not write, and
``verify`` checks it like any other (whose words, a plan or a supposition, a question).

Decision: only a place name right after a move verb, as jieba's tagger reads place names (``ns``:
"搬回宜昌找份工作" is 宜昌; or a word that ends as a district does, "雨花区"); a move said ahead of
time ("下个月搬到雨花区", "打算搬去…") is a plan, "计划搬到", which ``fulfil`` marks done when the user
says it happened, or in English capitalised words right after "moved/relocated to"
("moved to Hoboken"; not "moved to the Manchester office", which is where one works). A place
the tagger does not know is left to the model: a missed move costs recall, a wrong one precision.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..budget import split_text
from ..llm.extract import Statement
from ..llm.grounding import normalize
from ..text import leading_place
from ..types import Message
from .names import SELF_KEY, entity_key
from .supersede import kind

#: verbs that say the speaker now lives somewhere else (each a spelling of 住在 / lives in)
_MOVE_ZH = re.compile(r"搬家到|搬到|搬去|搬回|迁到|移居")
_MOVE_EN = re.compile(r"\b(?:moved|relocated)\s+(?:back\s+)?to\s+((?:[A-Z][\w'-]+)(?:\s+[A-Z][\w'-]+){0,2})")


def said_moves(messages: Sequence[Message], lang: str) -> list[Statement]:
    """A statement for each move the user's turns say with a place name after its verb, in the
    order said; the subject is the user ("用户"/"User"), for ``verify`` to keep or give to the one
    the words say it of."""
    out: list[Statement] = []
    subject = "用户" if lang == "zh" else "User"
    for m in messages:
        if m.role != "user":
            continue
        for sentence in split_text(m.text):
            for verb, place in [*_places_zh(sentence), *_places_en(sentence)]:
                if place and all(normalize(place) != normalize(s.object) for s in out):
                    out.append(Statement(subject=subject, predicate=verb, object=place))
    return out


def missed_moves(statements: Sequence[Statement], messages: Sequence[Message], lang: str) -> list[Statement]:
    """The moves of ``said_moves`` whose place no statement of the model about where the user lives
    names (nor a part of it): one the model gave another subject ("长沙岳麓区|住在|雨花区", dropped by
    ``verify``) or another predicate ("User|is|vancouver") does not stand for the user's move."""
    named = [normalize(s.object) for s in statements if entity_key(s.subject) == SELF_KEY and _says_where(s.predicate, s.object)]
    return [m for m in said_moves(messages, lang) if not any(normalize(m.object) in n or n in normalize(m.object) for n in named if n)]


def _says_where(predicate: str, obj: str) -> bool:
    """Whether a statement says where someone lives or moved, in its predicate ("住在", "搬到",
    "lives in", "moved to") or with its object ("计划|搬到雨花区"): one that names the place under
    another predicate ("User|is|vancouver") does not stand for the move."""
    said = normalize(predicate + " " + obj)
    return kind(predicate) == "住在" or bool(_MOVE_ZH.search(said)) or bool(re.search(r"\b(?:mov|reloc|liv)", said))


#: words before a Chinese move verb that put it ahead ("下个月搬到雨花区"): a planned move, "计划搬到"
_AHEAD_ZH = re.compile(r"明年|下个?月|下周|下星期|下礼拜|明天|后天|过几天|过阵子|年底|年后|打算|计划|准备|想|要")


def _places_zh(sentence: str) -> list[tuple[str, str]]:
    out = []
    for match in _MOVE_ZH.finditer(sentence):
        place = leading_place(sentence[match.end() :].lstrip("了")[:16])
        ahead = _AHEAD_ZH.search(re.split(r"[，,。；;！!？?]", sentence[: match.start()])[-1])
        if len(place) >= 2:
            out.append((("计划" if ahead else "") + match.group(0), place))
    return out


def _places_en(sentence: str) -> list[tuple[str, str]]:
    return [("moved to", m.group(1)) for m in _MOVE_EN.finditer(sentence)]
