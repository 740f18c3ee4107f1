"""What a copy says while it runs: one bar line redrawn on a terminal, plain lines when piped
(a log or a CI job reads one line per batch)."""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """Called after each batch with the user, the kind and how many items the batch held."""

    def __init__(self, stream: TextIO | None = None, *, users: int = 0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.users, self.user_index, self.items, self._user = users, 0, 0, ""

    def __call__(self, user: str, kind: str, n: int) -> None:
        if user != self._user:
            self._user, self.user_index = user, self.user_index + 1
        self.items += n
        where = f"user {self.user_index}/{self.users} {user!r}" if self.users else f"user {user!r}"
        if self.tty:
            self.stream.write(f"\r\x1b[Kcopying {where}: {kind} +{n} ({self.items} items)")
        else:
            self.stream.write(f"copied {n} {kind} items of {where} ({self.items} in all)\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.items:
            self.stream.write("\n")
            self.stream.flush()
