"""A LangChain chat message history over a memstack thread, and the message mapping both ways.

``MemstackChatMessageHistory`` is what ``RunnableWithMessageHistory`` asks for: the thread's
messages, ``add_messages`` and ``clear``. Adding goes through ``Memory.add``, so the messages are
validated, stored durably and the memory's layers (summary, entities, retrieval...) get their
jobs, exactly as for any other caller; ``clear`` forgets the thread and everything keyed to it.

Mapping: Human/AI/System/Tool messages (and ChatMessage with one of those roles) become user,
assistant, system and tool messages; an AI message's tool calls become OpenAI-style tool calls
(arguments as JSON text) and back. Ids are kept (re-adding a message with a stored id adds
nothing). A message's time is kept in memstack's timestamp and comes back as
``response_metadata["timestamp"]`` (ISO 8601), which is also read when a message is added, so
a history copied through LangChain keeps its dates. additional_kwargs, response_metadata,
usage_metadata, a tool message's status and invalid tool calls are kept as JSON in the message's
metadata (values JSON cannot hold become their text); a tool message's ``artifact`` is not kept.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidInput, importing
from ..memory import Memory
from ..types import Message, ToolCall, new_id, parse_time, utcnow

with importing("langchain-core", "langchain"):
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage

log = logging.getLogger("memstack.integrations.langchain")

#: the key of memstack Message.metadata under which LangChain-only fields are kept
KEPT = "langchain"
_ROLE_OF_CHAT = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "system": "system", "tool": "tool"}


class MemstackChatMessageHistory(BaseChatMessageHistory):
    """One thread of one user (in a tenant, for an agent) as a LangChain chat history.

    ``memory``: a Memory (its layers get their jobs after each add), or a Store, URL or path
    (wrapped in a plain Memory), or None for the default SQLite file. ``last`` limits
    ``messages`` to the thread's last n messages (None: all of them).
    """

    def __init__(
        self,
        memory: Memory | Any = None,
        *,
        user_id: str,
        thread_id: str,
        tenant: str | None = None,
        agent_id: str | None = None,
        last: int | None = None,
    ) -> None:
        self.memory = memory if isinstance(memory, Memory) else Memory(memory)
        self.scope = self.memory.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)
        self.last = last

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The thread's messages in the order they were added (LangChain's contract: the
        conversation replayed to the model as the app built it), as LangChain messages."""
        s = self.scope
        stored = self.memory.history(
            user_id=s.user_id, thread_id=s.thread_id, tenant=s.tenant, agent_id=s.agent_id, last=self.last, order="append"
        )  # type: ignore[arg-type]
        return [to_langchain(m) for m in stored]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store the messages in one ``Memory.add`` (all validated before any is written).

        An empty AI reply (no text, no tool calls: a model that answered "" or stopped at once)
        is not stored, and a warning says so; the rest of the batch is, so under
        ``RunnableWithMessageHistory`` the user's message of that turn is kept, as LangChain's
        own histories keep it. Any other message memstack cannot store (an empty human message,
        an unknown role) is refused with InvalidInput naming it (``messages[1].content``) and
        nothing of the batch is written.
        """
        now = utcnow()
        batch = [m for m in (_stored_form(i, m, now) for i, m in enumerate(messages)) if m is not None]
        if not batch:
            return
        s = self.scope
        self.memory.add(batch, user_id=s.user_id, thread_id=s.thread_id, tenant=s.tenant, agent_id=s.agent_id)  # type: ignore[arg-type]

    def clear(self) -> None:
        """Forget the thread: its messages and everything the layers keyed to it."""
        s = self.scope
        self.memory.forget(user_id=s.user_id, thread_id=s.thread_id, tenant=s.tenant, agent_id=s.agent_id, by="langchain")


# ---- LangChain -> memstack -------------------------------------------------------------------


def _stored_form(i: int, message: BaseMessage, at: datetime) -> Message | None:
    """The Message to store for the i-th message of a batch; None for an empty AI reply."""
    try:
        return to_memstack(message, at=at)
    except InvalidInput as exc:
        if isinstance(message, AIMessage) and exc.field == "content":
            log.warning(
                "not storing an empty AI reply (id %s) in the history: memstack keeps only messages with content or tool calls", message.id
            )
            return None
        raise InvalidInput(f"messages[{i}]: {exc}", field=f"messages[{i}].{exc.field or 'content'}") from exc


def to_memstack(message: BaseMessage, *, at: datetime | None = None) -> Message:
    """The memstack Message for a LangChain message; ``at`` dates it unless it carries a timestamp."""
    kwargs: dict[str, Any] = {
        "role": _role(message),
        "content": _content(message.content),
        "id": message.id or new_id(),
        "timestamp": _timestamp(message) or at or utcnow(),
    }
    if message.name:
        kwargs["name"] = message.name
    if isinstance(message, AIMessage) and message.tool_calls:
        kwargs["tool_calls"] = tuple(
            ToolCall(
                id=call.get("id") or new_id(),
                name=call["name"],
                arguments=json.dumps(call.get("args", {}), ensure_ascii=False, default=str),
            )
            for call in message.tool_calls
        )
    if isinstance(message, ToolMessage):
        kwargs["tool_call_id"] = message.tool_call_id
    kept = _kept(message)
    if kept:
        kwargs["metadata"] = {KEPT: kept}
    return Message(**kwargs)


def _role(message: BaseMessage) -> str:
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage) and message.role in _ROLE_OF_CHAT:
        return _ROLE_OF_CHAT[message.role]
    raise InvalidInput(
        f"cannot store a LangChain {type(message).__name__} ({getattr(message, 'role', message.type)!r}); use Human, AI, System or Tool messages",
        field="role",
    )


def _content(content: Any) -> str | tuple[dict[str, Any], ...]:
    if isinstance(content, str):
        return content
    return tuple({"type": "text", "text": part} if isinstance(part, str) else dict(part) for part in content)


def _timestamp(message: BaseMessage) -> datetime | None:
    stamp = (message.response_metadata or {}).get("timestamp")
    if isinstance(stamp, datetime):
        return stamp if stamp.tzinfo else None
    if isinstance(stamp, str):
        try:
            return parse_time(stamp, field_name="timestamp")
        except InvalidInput:
            return None
    return None


def _kept(message: BaseMessage) -> dict[str, Any]:
    """The LangChain-only fields worth keeping, as JSON (values JSON cannot hold become text)."""
    fields: dict[str, Any] = {
        "additional_kwargs": message.additional_kwargs,
        "response_metadata": {k: v for k, v in (message.response_metadata or {}).items() if k != "timestamp"},
    }
    if isinstance(message, AIMessage):
        fields["usage_metadata"] = message.usage_metadata
        fields["invalid_tool_calls"] = message.invalid_tool_calls
    if isinstance(message, ToolMessage) and message.status != "success":
        fields["status"] = message.status
    kept = {k: v for k, v in fields.items() if v}
    return json.loads(json.dumps(kept, ensure_ascii=False, default=str)) if kept else {}


# ---- memstack -> LangChain -------------------------------------------------------------------


def to_langchain(message: Message) -> BaseMessage:
    """The LangChain message for a stored memstack Message (its time in response_metadata)."""
    kept: Mapping[str, Any] = message.metadata.get(KEPT, {}) if isinstance(message.metadata.get(KEPT), Mapping) else {}
    common: dict[str, Any] = {
        "content": message.content if isinstance(message.content, str) else [dict(p) for p in message.content],
        "id": message.id,
        "additional_kwargs": dict(kept.get("additional_kwargs", {})),
        "response_metadata": {**kept.get("response_metadata", {}), "timestamp": message.timestamp.isoformat()},
    }
    if message.name:
        common["name"] = message.name
    if message.role == "user":
        return HumanMessage(**common)
    if message.role == "system":
        return SystemMessage(**common)
    if message.role == "tool":
        return ToolMessage(**common, tool_call_id=message.tool_call_id or "", status=kept.get("status", "success"))
    calls, invalid = _tool_calls(message.tool_calls)
    return AIMessage(
        **common,
        tool_calls=calls,
        invalid_tool_calls=[*kept.get("invalid_tool_calls", []), *invalid],
        usage_metadata=kept.get("usage_metadata"),
    )


def _tool_calls(calls: Sequence[ToolCall]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """LangChain tool calls; arguments that are not a JSON object become an invalid tool call."""
    valid, invalid = [], []
    for call in calls:
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            args = None
        if isinstance(args, dict):
            valid.append({"name": call.name, "args": args, "id": call.id, "type": "tool_call"})
        else:
            invalid.append(
                {
                    "name": call.name,
                    "args": call.arguments,
                    "id": call.id,
                    "error": "arguments are not a JSON object",
                    "type": "invalid_tool_call",
                }
            )
    return valid, invalid
