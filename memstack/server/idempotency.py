"""``Idempotency-Key``: a request retried with the same key is a no-op that answers what the first
one answered (the stored messages of a REST add; the proxy's chat completion).

The first answer is kept with the thread (the store's state, under ``idempotency:<key>`` of the
thread's scope), so every server process on the store sees it, and deleting the thread or the
user deletes it. A key names one request of one thread: the same key in another thread is
another request.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import InvalidInput
from ..memory import Memory
from ..types import Scope

HEADER = "Idempotency-Key"
#: the response header of an answer replayed for a retried key
REPLAYED = "Idempotent-Replayed"
_PREFIX = "idempotency:"
_KEY = re.compile(r"[\x21-\x7e]{1,128}")


def checked(key: str | None) -> str | None:
    """The key, or InvalidInput naming the header: 1 to 128 visible ASCII characters."""
    if key is None:
        return None
    if not _KEY.fullmatch(key):
        raise InvalidInput(f"{HEADER} must be 1 to 128 visible ASCII characters", field=HEADER)
    return key


def recall(memory: Memory, scope: Scope, key: str) -> Any | None:
    """What the first request with ``key`` answered in the scope's thread, or None."""
    kept = memory.store.state.get(scope, name=_PREFIX + key)
    return None if kept is None else kept.get("response")


def remember(memory: Memory, scope: Scope, key: str, response: Any) -> None:
    memory.store.state.put(scope, {"response": response}, name=_PREFIX + key)
