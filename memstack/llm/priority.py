"""Who goes first on a model that answers one call at a time: an answer someone is waiting for
before the layers' background work.

The in-process local model runs one request at a time (one llama.cpp slot). On a small machine an
extraction job takes tens of seconds, so an answer queued behind the write queue's jobs would
time out although the model is idle for the user. Calls are marked by a context variable: the
write side of the layers runs its model calls inside ``background()``; everything else (the
proxy's answer, the chat's answer, a direct ``complete``) is foreground, the default.

    with background():          # a layer's write job
        model.complete(...)     # waits while any foreground call waits

``PriorityLock`` serves waiters foreground first, each priority in arrival order. A call that
holds the lock is never interrupted: an answer waits at most for the one background call running.
Background calls can wait as long as answers keep coming; that is the point (their jobs are
durable and run later).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import IntEnum


class Priority(IntEnum):
    """Lower goes first."""

    FOREGROUND = 0
    BACKGROUND = 1


_current: ContextVar[Priority] = ContextVar("memstack_model_priority", default=Priority.FOREGROUND)


def current_priority() -> Priority:
    """The priority of model calls made here: BACKGROUND inside ``background()``, else FOREGROUND."""
    return _current.get()


@contextmanager
def background() -> Iterator[None]:
    """Mark the model calls made inside (in this thread or task) as background work."""
    token = _current.set(Priority.BACKGROUND)
    try:
        yield
    finally:
        _current.reset(token)


class PriorityLock:
    """A lock granted to the waiter with the lowest (priority, arrival): foreground waiters before
    background ones, first come first served within a priority. Not reentrant."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._waiting: list[tuple[int, int]] = []
        self._tickets = itertools.count()
        self._held = False

    @contextmanager
    def hold(self, priority: Priority | None = None) -> Iterator[None]:
        """Hold the lock for the block; ``priority`` defaults to ``current_priority()``."""
        self.acquire(priority)
        try:
            yield
        finally:
            self.release()

    def acquire(self, priority: Priority | None = None) -> None:
        ticket = (int(current_priority() if priority is None else priority), next(self._tickets))
        with self._cond:
            heapq.heappush(self._waiting, ticket)
            try:
                self._cond.wait_for(lambda: not self._held and self._waiting[0] == ticket)
            except BaseException:
                self._leave(ticket)
                raise
            heapq.heappop(self._waiting)
            self._held = True

    def release(self) -> None:
        with self._cond:
            if not self._held:
                raise RuntimeError("release of an unheld PriorityLock")
            self._held = False
            self._cond.notify_all()

    def waiting(self) -> int:
        """Calls waiting for the lock now (for tests and metrics)."""
        with self._cond:
            return len(self._waiting)

    def _leave(self, ticket: tuple[int, int]) -> None:
        """Drop an interrupted waiter, letting the next one go (the caller holds ``_cond``)."""
        self._waiting.remove(ticket)
        heapq.heapify(self._waiting)
        self._cond.notify_all()
