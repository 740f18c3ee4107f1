"""Progress of a long benchmark run on standard error: redrawn in place on a terminal, a plain
line every few percent when piped (a log never gets ``\\r`` control codes)."""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """Called as ``progress(done, total, message)`` after each step; ``close()`` ends the line.
    Used as a context manager, it closes itself."""

    def __init__(self, *, stream: TextIO | None = None, every_percent: float = 5.0, tty: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every_percent = every_percent
        self._drawn = False
        self._last = -1

    def __call__(self, done: int, total: int, message: str = "") -> None:
        total = max(1, total)
        text = f"{done}/{total} ({100 * done / total:.0f}%) {message}".rstrip()
        if self.tty:
            self.stream.write("\r\033[K" + text)
            self._drawn = True
        else:
            step = max(1, int(total * self.every_percent / 100))
            if done != self._last and (done // step > self._last // step or done == total):
                self.stream.write(text + "\n")
                self._last = done
        self.stream.flush()

    def note(self, message: str) -> None:
        """A step that moves no count (ingesting a conversation): redrawn on a terminal, one line
        when piped."""
        if self.tty:
            self.stream.write("\r\033[K" + message)
            self._drawn = True
        else:
            self.stream.write(message + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
