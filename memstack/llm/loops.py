"""Stop a schema-constrained answer that has started to loop.

A small model at temperature 0 can fall into a cycle inside a JSON list: the same statement, or
the same few statements, again and again until ``max_tokens`` or the list's cap ends it. Every
token of the cycle costs decode time (the write side is decode-bound on a CPU) and adds nothing:
the items are duplicates. A grammar cannot forbid repeats, and a repetition penalty also punishes
the words a list legitimately repeats ("用户", a type, a predicate). So the answer is watched as
it is decoded, and cut before the first list item that repeats an earlier item of the same list:
what comes before the cut is kept whole (``structured.parse_output`` closes the brackets of a cut
answer).

Only strings that are list elements are items; object members (``"type": "人物"``), which repeat
legitimately, are never compared, and lists of objects are not watched.
"""

from __future__ import annotations

import json

__all__ = ["RepeatGuard"]

#: items shorter than this (in characters, as written) are not compared: short values may repeat
MIN_ITEM_CHARS = 4


class RepeatGuard:
    """Feed the decoded pieces in order; ``feed`` answers True once the answer repeats an item.

    ``text`` is then the answer up to the start of the repeating item (the whole answer while it
    has not repeated); ``repeated`` is the item."""

    def __init__(self) -> None:
        self._chars: list[str] = []
        self._stack: list[tuple[str, set[str]]] = []  # open brackets, each array with the items seen in it
        self._in_string = False
        self._escaped = False
        self._start = 0  # where the string being read began
        self._cut: int | None = None
        self.repeated: str | None = None

    @property
    def text(self) -> str:
        joined = "".join(self._chars)
        return joined[: self._cut] if self._cut is not None else joined

    def feed(self, piece: str) -> bool:
        if self._cut is not None:
            return True
        for char in piece:
            self._chars.append(char)
            if self._step(char, len(self._chars) - 1):
                return True
        return False

    def _step(self, char: str, at: int) -> bool:
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == '"':
                self._in_string = False
                return self._string_ended(at)
            return False
        if char == '"':
            self._in_string, self._start = True, at
        elif char in "[{":
            self._stack.append((char, set()))
        elif char in "]}" and self._stack:
            self._stack.pop()
        return False

    def _string_ended(self, end: int) -> bool:
        if not self._stack or self._stack[-1][0] != "[":
            return False  # a key or an object member, not a list element
        literal = "".join(self._chars[self._start : end + 1])
        try:
            item = json.loads(literal)
        except ValueError:
            return False
        key = " ".join(str(item).split()).casefold()
        if len(key) < MIN_ITEM_CHARS:
            return False
        seen = self._stack[-1][1]
        if key in seen:
            self._cut, self.repeated = self._start, item
            return True
        seen.add(key)
        return False
