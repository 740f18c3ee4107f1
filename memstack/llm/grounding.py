"""Is an extracted item grounded in the turns it came from, and in which of them?

Small models invent entities and paraphrase; memory must not store what was not said. A name is
grounded when it occurs in a turn (case- and width-insensitive); a sentence (a fact, an evidence
quote) by its overlap with the best-matching turn, in characters for Chinese and words otherwise.
The matching turns become the item's source message ids, at no cost in model tokens.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

from ..types import Message

_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]")
#: a sentence is grounded in a turn when this share of its words/characters occur there
SENTENCE_OVERLAP = 0.5


def normalize(text: str) -> str:
    """Case-folded, NFKC (full-width to half-width), inner whitespace collapsed, and Traditional
    Chinese characters read as Simplified ones (OpenCC's t2s, character for character, so
    positions in the normalised text are positions in it): a rule or a name written once matches
    "我又換工作了" as "我又换工作了"."""
    return _simplified(" ".join(unicodedata.normalize("NFKC", text).casefold().split()))


def _simplified(text: str) -> str:
    if text.isascii():
        return text
    find, table = _t2s()
    return text.translate(table) if find.search(text) else text


@functools.cache
def _t2s() -> tuple[re.Pattern[str], dict[int, str]]:
    """OpenCC's t2s as a character table (built once, ~0.25 s): the Traditional characters of the
    CJK blocks and their Simplified ones; a text with none of them is left as it is, fast."""
    from opencc_purepy import OpenCC  # type: ignore[import-untyped]

    block = "".join(chr(i) for i in range(0x3400, 0xA000))
    out = OpenCC("t2s").convert(block)
    pairs = {a: b for a, b in zip(block, out, strict=False) if a != b and len(b) == 1} if len(out) == len(block) else {}
    return re.compile("[" + "".join(pairs) + "]"), {ord(a): b for a, b in pairs.items()}


def _tokens(text: str) -> list[str]:
    return _WORD.findall(normalize(text))


def name_sources(name: str, messages: Sequence[Message]) -> tuple[str, ...]:
    """Ids of the turns that mention ``name`` (empty: not grounded)."""
    needle = normalize(name)
    if not needle:
        return ()
    return tuple(m.id for m in messages if needle in normalize(m.text))


def overlap(sentence: str, text: str) -> float:
    """Share of the sentence's words (Chinese: characters) that occur in ``text``."""
    words = _tokens(sentence)
    if not words:
        return 0.0
    have = set(_tokens(text))
    return sum(1 for w in words if w in have) / len(words)


def sentence_sources(sentence: str, messages: Sequence[Message], *, threshold: float = SENTENCE_OVERLAP) -> tuple[tuple[str, ...], float]:
    """The turns a sentence draws on (best first, those within 0.1 of the best and above the
    threshold) and the best overlap; ((), score) when none reaches the threshold."""
    scored = sorted(((overlap(sentence, m.text), i) for i, m in enumerate(messages) if m.text.strip()), reverse=True)
    if not scored or scored[0][0] < threshold:
        return (), scored[0][0] if scored else 0.0
    best = scored[0][0]
    return tuple(messages[i].id for s, i in scored if s >= max(threshold, best - 0.1)), best
