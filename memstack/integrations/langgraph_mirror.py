"""A graph thread's ``MessagesState`` messages mirrored into memstack's history, once each.

``MemstackSaver(memory=Memory(...))`` calls ``Mirror.put`` after each checkpoint of the root
namespace that wrote the messages channel is committed, so the memory layers (window,
retrieval, summary, entities...) run on a LangGraph app's conversation with no ``Memory.add``
in its nodes. The rules:

- **Who**: the config's ``configurable["user_id"]``; the memstack thread is the graph's
  ``thread_id``, the tenant the saver's. A root checkpoint put without a user_id is refused
  (UsageError) before anything is written: never a guess, never a shared default user; so is
  one for a thread that has checkpoints of another user (a thread's messages belong to one).
- **Once each**: LangGraph's ``add_messages`` gives every message an id, and a thread's history
  holds an id once (``HistoryStore.append`` skips ids it has). Each put sends the state's
  messages that the thread's stored tail lacks; repeated invocations, resumes after an
  interrupt, replays and ``update_state`` add only what is new. A message without an id (a state
  without ``add_messages``) gets one derived from the thread, its position and its content.
- **When**: a message keeps a ``response_metadata["timestamp"]`` it carries; otherwise it is
  dated with the checkpoint in which it first reached the history.
- **What**: Human, AI (with tool calls), System and Tool messages, mapped as LangChain's history
  maps them (``langchain_history.to_memstack``). A message memstack refuses (an empty AI reply,
  one over ``max_message_bytes``) is not mirrored, with a warning naming its id; the rest are.
- **Edits and removals**: the history is the log of what was said. A message replaced in the
  state under the same id keeps its first stored version; a ``RemoveMessage`` removes it from
  the graph's state, not from the history (``Memory.forget`` erases).
- **Subgraphs**: only the root namespace (``checkpoint_ns == ""``) is mirrored; what a subgraph
  says reaches the history when it is returned into the parent's messages.
- **Failures**: the checkpoint is committed first, the history written after it. If that
  write fails, ``put`` raises: the graph call fails as on any failed step, its checkpoint and
  the step's writes saved, and ``graph.invoke(None, config)`` resumes it (LangGraph's own
  recovery). The next put that writes the messages channel mirrors everything the history
  still lacks, so a failed mirror loses no checkpoint and, once the store is back, no message.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidInput, UsageError, importing
from ..memory import Memory
from ..types import Message, parse_time
from .langchain_history import to_memstack

with importing("langchain-core", "langgraph"):
    from langchain_core.messages import BaseMessage, convert_to_messages

log = logging.getLogger("memstack.integrations.langgraph")


class Mirror:
    """Copies the messages channel ``key`` of a thread's root checkpoints into ``memory``'s history."""

    def __init__(self, memory: Memory, *, tenant: str, key: str = "messages") -> None:
        self.memory = memory
        self.tenant = tenant
        self.key = key

    def require_user(self, configurable: dict[str, Any]) -> str:
        """The config's user_id, or UsageError: mirrored messages always belong to a named user."""
        user_id = configurable.get("user_id")
        if user_id is None or str(user_id) == "":
            raise UsageError(
                "MemstackSaver(memory=...) mirrors the graph's messages into a user's history: "
                'pass config={"configurable": {"thread_id": ..., "user_id": ...}}'
            )
        return str(user_id)

    def put(self, user_id: str, thread_id: str, checkpoint: dict[str, Any]) -> list[Message]:
        """Store the checkpoint's messages that the thread's history lacks; returns those stored."""
        values = checkpoint.get("channel_values", {}).get(self.key) or []
        at = _checkpoint_time(checkpoint)
        batch = [m for m in (_convert(thread_id, i, m, at) for i, m in enumerate(_as_messages(values))) if m is not None]
        if not batch:
            return []
        scope = self.memory.scope(user_id, thread_id, tenant=self.tenant)
        held = {m.id for m in self.memory.store.history.read(scope, last=len(batch) + 16, order="append")}
        new = [m for m in batch if m.id not in held]
        if not new:
            return []
        try:
            return self._add(new, user_id, thread_id)
        except InvalidInput:  # one message memstack refuses: store the others, one by one
            return [stored for m in new for stored in self._add_or_skip(m, user_id, thread_id)]

    def _add(self, messages: Sequence[Message], user_id: str, thread_id: str) -> list[Message]:
        return self.memory.add(list(messages), user_id=user_id, thread_id=thread_id, tenant=self.tenant)

    def _add_or_skip(self, message: Message, user_id: str, thread_id: str) -> list[Message]:
        try:
            return self._add([message], user_id, thread_id)
        except InvalidInput as exc:
            log.warning("not mirroring message %s of thread %s into the history: %s", message.id, thread_id, exc)
            return []


def _as_messages(values: Any) -> list[BaseMessage]:
    if not isinstance(values, list):
        values = [values]
    return [v if isinstance(v, BaseMessage) else convert_to_messages([v])[0] for v in values]


def _convert(thread_id: str, index: int, message: BaseMessage, at: datetime | None) -> Message | None:
    """The memstack Message for a state message; None (with a warning) for one memstack refuses."""
    if not message.id:
        message = message.model_copy(update={"id": _derived_id(thread_id, index, message)})
    try:
        return to_memstack(message, at=at)
    except InvalidInput as exc:
        log.warning("not mirroring message %s of thread %s into the history: %s", message.id, thread_id, exc)
        return None


def _derived_id(thread_id: str, index: int, message: BaseMessage) -> str:
    content = json.dumps(message.content, ensure_ascii=False, sort_keys=True, default=str)
    digest = hashlib.sha256(json.dumps([thread_id, index, message.type, content], ensure_ascii=False).encode()).hexdigest()
    return f"lg-{digest[:32]}"


def _checkpoint_time(checkpoint: dict[str, Any]) -> datetime | None:
    stamp = checkpoint.get("ts")
    if not isinstance(stamp, str):
        return None
    try:
        return parse_time(stamp, field_name="ts")
    except InvalidInput:
        return None
