"""``Idempotency-Key``: a request retried with the same key is a no-op that answers what the first
one answered (the stored messages of a REST add; the proxy's chat completion).

The first answer is kept with the thread (the store's state, under ``idempotency:<key>`` of the
thread's scope), so every server process on the store sees it, and deleting the thread or the
user deletes it. A key names one request of one thread: the same key in another thread is
another request.

Copies of one request at once (a client that retries before the first answer came, to any
server process) are settled by the store too: a REST add's messages that carry no id get ids
made from the key (``message_ids``), so the store's append, which skips an id the thread holds,
stores them once; a copy that stored nothing answers the messages the first one stored. (The
proxy's copies wait on the first one's claim of the key: ``copies``.)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidInput
from ..memory import Memory
from ..types import Message, Scope

HEADER = "Idempotency-Key"
#: the response header of an answer replayed for a retried key
REPLAYED = "Idempotent-Replayed"
#: the state name a key's answer (or a copy's claim of it, ``copies``) is kept under, after this
PREFIX = "idempotency:"
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
    kept = memory.store.state.get(scope, name=PREFIX + key)
    return None if kept is None else kept.get("response")


def remember(memory: Memory, scope: Scope, key: str, response: Any) -> None:
    memory.store.state.put(scope, {"response": response}, name=PREFIX + key)


def message_ids(key: str, count: int) -> list[str]:
    """The ids of a keyed add's messages, the same for every copy of the request: 32 hex digits,
    the shape of ``types.new_id``'s."""
    digest = hashlib.sha256(key.encode("ascii")).hexdigest()[:24]
    return [f"{digest}{i:08x}" for i in range(count)]


def with_ids(messages: Sequence[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The messages, those without an id given the key's."""
    return [m if m.get("id") else {**m, "id": made} for m, made in zip(messages, message_ids(key, len(messages)), strict=True)]


def stored_copies(memory: Memory, scope: Scope, messages: Sequence[dict[str, Any]]) -> list[Message]:
    """The thread's messages with the ids of ``messages``, in the thread's order: what a copy of
    the request that got there first stored."""
    wanted = {m["id"] for m in messages}
    return [m for m in memory.store.history.read(scope) if m.id in wanted]
