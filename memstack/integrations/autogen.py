"""AutoGen adapter (``pip install "memstack[autogen]"``): autogen-core's ``Memory`` protocol backed
by memstack, for ``AssistantAgent(memory=[...])`` and any agent that calls ``update_context``.

    from autogen_agentchat.agents import AssistantAgent
    from memstack import Memory
    from memstack.integrations.autogen import MemstackMemory

    memory = MemstackMemory(Memory("chat.db"), user_id="u1", thread_id="s2")
    agent = AssistantAgent("assistant", model_client=client, memory=[memory])
    result = await agent.run(task="我的后端使用什么技术？")
    await memory.add_messages(result.messages)       # this session's conversation, for later ones

What each method does with memstack:

- ``update_context(model_context)``: ``Memory.context`` for the last user message of the model
  context (the question) builds memstack's memory sections (what the user said in earlier
  sessions, their profile, summaries, entities, as the Memory's layers render them), added to
  the model context as one ``SystemMessage``; the result lists that text (AssistantAgent shows it
  as a ``MemoryQueryEvent``). Nothing is added when there is no question or nothing to recall.
- ``add(content)``: a ``MemoryContent`` whose metadata names a ``role`` ("user", "assistant",
  "system") is a message of the thread (the layers get their jobs, as for ``Memory.add``); any
  other is a saved memory of the user (the tools' note: searchable at once, in every thread;
  ``metadata["category"]`` labels it). Text, markdown and JSON content are stored as text;
  images and bytes are refused (InvalidInput, field "content").
- ``add_messages(messages)``: a conversation into the thread: autogen-core's LLM messages
  (UserMessage, AssistantMessage with its function calls, SystemMessage, the function results)
  and autogen-agentchat's chat messages (``TaskResult.messages``: a message from "user" is the
  user's, any other source an assistant's; a tool call request event is the assistant's tool
  calls, an execution event their results); agentchat's other events (memory queries, thoughts)
  are not conversation and are left out.
- ``query(query)``: ``Memory.search`` over every thread and saved memory of the user, best first,
  as MemoryContent with ``metadata`` id, score, thread_id, kind and timestamp.
- ``clear()``: forgets the user (``Memory.forget``: every thread and saved memory of the user in
  this tenant), so that ``query`` finds nothing afterwards, as ``ListMemory.clear`` empties it.
- ``close()``: closes the Memory if this adapter opened it from a URL.

Every read and write is scoped to ``user_id`` (and ``tenant``, ``agent_id``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidInput, importing
from ..retrieval.units import language
from ..saved import NOTES_THREAD, index_notes, note_id
from ..types import Hit, Message, Role, Scope, ToolCall, Unit, check_message, check_text, utcnow
from .awaiting import Awaiting, MemoryLike

with importing("autogen-core", "autogen"):
    from autogen_core import CancellationToken, FunctionCall
    from autogen_core.memory import Memory as AutoGenMemory
    from autogen_core.memory import MemoryContent, MemoryMimeType, MemoryQueryResult, UpdateContextResult
    from autogen_core.model_context import ChatCompletionContext
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        SystemMessage,
        UserMessage,
    )

__all__ = ["MemstackMemory"]

#: the key of a stored message's metadata that keeps AutoGen's own fields (mime type, metadata, source)
KEPT = "autogen"
#: the ``by`` of the deletion notes ``clear`` leaves
BY = "autogen"
#: the id ``Memory.context`` gives the one system message that holds the memory sections
MEMORY_MESSAGE_ID = "memstack-memory"
_ROLES = ("user", "assistant", "system")
_TEXT_TYPES = {MemoryMimeType.TEXT.value, MemoryMimeType.MARKDOWN.value, MemoryMimeType.JSON.value}


class MemstackMemory(AutoGenMemory):
    """autogen-core's ``Memory`` over one user's memstack memory, writing to thread ``thread_id``.

    ``memory``: a Memory or AsyncMemory (the caller's: left open), or a store URL or path (opened
    here, closed by ``close``). ``k``: how many results ``query`` returns unless told (its
    ``k=`` keyword). ``max_tokens`` bounds ``update_context``'s context call (the memory sections
    take at most what the thread's conversation leaves, and at least half); ``options`` go to
    ``Memory.context`` (``strategy="retrieval"``: only what earlier sessions said).
    """

    component_type = "memory"

    def __init__(
        self,
        memory: MemoryLike = None,
        *,
        user_id: str,
        thread_id: str,
        tenant: str | None = None,
        agent_id: str | None = None,
        name: str = "memstack",
        k: int = 5,
        max_tokens: int | None = 1500,
        **options: Any,
    ) -> None:
        self._calls = Awaiting(memory)
        self.scope: Scope = self._calls.memory.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id).require_thread()
        self._name = name
        self.k = k
        self.max_tokens = max_tokens
        self.options = options

    @property
    def name(self) -> str:
        return self._name

    # ---- autogen-core's Memory protocol ------------------------------------------------------

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Add memstack's memory for the model context's last user message as a SystemMessage."""
        question = _last_user_text(await model_context.get_messages())
        if question is None:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        context = await self._calls("context", **self._ids(), query=question, max_tokens=self.max_tokens, **self.options)
        text = next((m.text for m in context.messages if m.id == MEMORY_MESSAGE_ID), "")
        if not text:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        await model_context.add_message(SystemMessage(content=text))
        sections = {k.split(":", 1)[1]: v for k, v in context.sections.items() if k.startswith("memory:")}
        found = MemoryContent(content=text, mime_type=MemoryMimeType.TEXT, metadata={"sections": sections, "query": question})
        return UpdateContextResult(memories=MemoryQueryResult(results=[found]))

    async def query(
        self, query: str | MemoryContent, cancellation_token: CancellationToken | None = None, **kwargs: Any
    ) -> MemoryQueryResult:
        """The user's memories most relevant to ``query`` (``k=``: how many), best first."""
        text = _content_text(query.content if isinstance(query, MemoryContent) else query, "query")
        k = kwargs.get("k", self.k)
        s = self.scope
        hits: list[Hit] = await self._calls("search", text, user_id=s.user_id, tenant=s.tenant, agent_id=s.agent_id, k=k)
        return MemoryQueryResult(results=[_content_of(hit) for hit in hits])

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        """A message of the thread (metadata ``role``) or a saved memory of the user (otherwise)."""
        if not isinstance(content, MemoryContent):
            raise InvalidInput(f"add takes a MemoryContent, not {type(content).__name__}", field="content")
        mime = content.mime_type.value if isinstance(content.mime_type, MemoryMimeType) else str(content.mime_type)
        if mime not in _TEXT_TYPES:
            raise InvalidInput(f"memstack keeps text: {mime} content is not stored (text, markdown or JSON)", field="content")
        text = _content_text(content.content, "content")
        metadata = dict(content.metadata or {})
        role = metadata.get("role")
        kept = {"mime_type": mime, "metadata": _json(metadata)}
        if role is None:
            await self._save_note(text, metadata.get("category"), kept)
        elif role in _ROLES:
            await self._calls("add", [Message(role=role, content=text, metadata={KEPT: kept})], **self._ids())
        else:
            raise InvalidInput(f"metadata role {role!r}: expected one of {', '.join(_ROLES)} (or none, for a saved memory)", field="role")

    async def clear(self) -> None:
        """Forget the user: every thread and saved memory in this tenant (``query`` finds nothing)."""
        s = self.scope
        await self._calls("forget", user_id=s.user_id, tenant=s.tenant, agent_id=s.agent_id, by=BY)

    async def close(self) -> None:
        await self._calls.close()

    # ---- conversations -----------------------------------------------------------------------

    async def add_messages(self, messages: Sequence[Any]) -> list[Message]:
        """Store a conversation in the thread in one ``Memory.add`` (all checked first; InvalidInput
        names the message, ``messages[2]``); returns the stored messages."""
        now = utcnow()
        batch: list[Message] = []
        for i, message in enumerate(messages):
            try:
                batch += [check_message(m) for m in _to_memstack(message, now)]
            except InvalidInput as exc:
                raise InvalidInput(f"messages[{i}]: {exc}", field=f"messages[{i}].{exc.field}" if exc.field else f"messages[{i}]") from exc
        if not batch:
            return []
        return await self._calls("add", batch, **self._ids())  # type: ignore[no-any-return]

    # ---- helpers -----------------------------------------------------------------------------

    def _ids(self) -> dict[str, Any]:
        s = self.scope
        return {"user_id": s.user_id, "thread_id": s.thread_id, "tenant": s.tenant, "agent_id": s.agent_id}

    async def _save_note(self, text: str, category: Any, kept: dict[str, Any]) -> None:
        """A saved memory (the tools' note): indexed at once, found from every thread."""
        memory = self._calls.memory
        text = text.strip()
        if category is not None and (not isinstance(category, str) or not category.strip()):
            raise InvalidInput("metadata category must be a non-empty string", field="category")
        unit = Unit(
            id=note_id(text),
            scope=self.scope.thread(NOTES_THREAD),
            text=text,
            timestamp=utcnow(),
            kind="note",
            category=category.strip() if category else None,
            metadata={"lang": language(text), "saved_in": self.scope.thread_id, "via": "autogen", KEPT: kept},
        )
        check_text(text, "content", what="the text")
        check_message(Message(role="user", content=text, metadata=unit.metadata))  # the rules of stored JSON
        await self._calls.run(index_notes, memory._retrieval({}), memory.store, [unit])

    def __repr__(self) -> str:
        return f"MemstackMemory(user_id={self.scope.user_id!r}, thread_id={self.scope.thread_id!r}, tenant={self.scope.tenant!r})"


# ---- AutoGen's messages -> memstack's ----------------------------------------------------------


def _to_memstack(message: Any, at: Any) -> list[Message]:
    """The memstack messages of one AutoGen message ([] for an agentchat event)."""
    if isinstance(message, UserMessage):
        return [Message(role="user", content=_user_text(message.content), timestamp=at, metadata={KEPT: {"source": message.source}})]
    if isinstance(message, SystemMessage):
        return [Message(role="system", content=message.content, timestamp=at)]
    if isinstance(message, AssistantMessage):
        kept = {KEPT: {"source": message.source}}
        if isinstance(message.content, str):
            return [Message(role="assistant", content=message.content, timestamp=at, metadata=kept)]
        calls = tuple(ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in message.content)
        return [Message(role="assistant", content=message.thought or "", tool_calls=calls, timestamp=at, metadata=kept)]
    if isinstance(message, FunctionExecutionResultMessage):
        return [_result(r, at) for r in message.content]
    if hasattr(message, "to_model_message") and isinstance(getattr(message, "source", None), str):  # agentchat's chat messages
        role: Role = "user" if message.source == "user" else "assistant"
        kept = {KEPT: {"source": message.source, "type": type(message).__name__}}
        return [Message(role=role, content=message.to_model_text(), timestamp=at, metadata=kept)]
    if hasattr(message, "to_text") and isinstance(getattr(message, "source", None), str):  # agentchat's events
        return _event(message, at)
    raise InvalidInput(
        f"cannot store a {type(message).__name__}: expected an autogen-core LLM message or an agentchat message", field="type"
    )


def _event(event: Any, at: Any) -> list[Message]:
    """An agentchat event: a tool call request or its results as the chat's tool messages; any
    other event (a memory query, a thought, a handoff) is none."""
    content = getattr(event, "content", None)
    kept = {KEPT: {"source": event.source, "type": type(event).__name__}}
    if isinstance(content, list) and content and all(isinstance(c, FunctionCall) for c in content):
        calls = tuple(ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in content)
        return [Message(role="assistant", content="", tool_calls=calls, timestamp=at, metadata=kept)]
    if isinstance(content, list) and content and all(isinstance(r, FunctionExecutionResult) for r in content):
        return [_result(r, at) for r in content]
    return []


def _result(result: FunctionExecutionResult, at: Any) -> Message:
    return Message(
        role="tool",
        content=result.content,
        tool_call_id=result.call_id,
        name=result.name,
        timestamp=at,
        metadata={KEPT: {"is_error": result.is_error}},
    )


def _last_user_text(messages: Sequence[Any]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            text = _user_text(message.content)
            if text.strip():
                return text
    return None


def _user_text(content: Any) -> str:
    """A UserMessage's text: the string, or its string parts (images left out)."""
    if isinstance(content, str):
        return content
    return "\n".join(part for part in content if isinstance(part, str))


def _content_text(content: Any, field: str) -> str:
    if isinstance(content, str):
        text = content
    elif isinstance(content, Mapping):
        text = json.dumps(_json(content), ensure_ascii=False)
    else:
        raise InvalidInput(f"memstack keeps text: {type(content).__name__} content is not stored", field=field)
    if not text.strip():
        raise InvalidInput(f"{field} is empty", field=field)
    return text


def _json(value: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return json.loads(json.dumps(dict(value), ensure_ascii=False, allow_nan=False))  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"metadata must be JSON: {exc}", field="metadata") from exc


def _content_of(hit: Hit) -> MemoryContent:
    unit = hit.unit
    return MemoryContent(
        content=unit.text,
        mime_type=MemoryMimeType.TEXT,
        metadata={
            "id": unit.id,
            "score": hit.score,
            "thread_id": unit.scope.thread_id,
            "kind": unit.kind,
            "timestamp": unit.timestamp.isoformat(),
            **({"category": unit.category} if unit.category else {}),
        },
    )
