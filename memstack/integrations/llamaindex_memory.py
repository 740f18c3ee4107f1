"""memstack as a LlamaIndex memory: ``MemstackMemory``, the ``memory=`` of its agents, and
``MemstackMemoryBlock``, a memory block for LlamaIndex's own ``Memory``.

``MemstackMemory`` is a ``BaseMemory``, what ``FunctionAgent``, ``ReActAgent`` and
``AgentWorkflow`` take as ``memory``: the agent puts the user's message, the assistant's tool
calls, the tools' results and its answer, and each goes to one memstack thread of one user
(``Memory.add``: validated, stored durably, the layers' jobs queued). Before each model call the
agent gets the messages, and gets memstack's context for the thread: what the layers keep of this
conversation and, in a system message, what the user's other sessions hold that bears on the
question (retrieval, entities, summaries: the memory's layers), under the token budget.

``MemstackMemoryBlock`` is for an app that keeps LlamaIndex's ``Memory`` (its chat store, its
queue): the block adds memstack's memory of the user's other sessions to the memory's system
message, for the question the chat ends with, and stores the chat in memstack (the session is
the thread). A block is only given messages when the queue flushes them, so it stores the chat
when it is read: the agents read the memory before each model call and once more after their
answer, which stores it; a chat read otherwise has its last answer stored with the next read.

The layers' write-side work (embedding, extraction) runs from memstack's queue: with
``Memory(background=True)``, ``memstack worker``, or ``memory.flush()``. Until it has run, a new
session does not find the last one's messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal

from ..errors import importing
from ..memory import Memory
from ..types import Message, utcnow
from .llamaindex_messages import is_empty_reply, to_llamaindex, to_memstack, unseen

with importing("llama-index-core", "llamaindex"):
    from llama_index.core.base.llms.types import ChatMessage, TextBlock
    from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
    from llama_index.core.memory import BaseMemory
    from llama_index.core.memory.memory import BaseMemoryBlock

log = logging.getLogger("memstack.integrations.llamaindex")

#: the id of the system message that carries the memory sections in a memstack Context
MEMORY_MESSAGE_ID = "memstack-memory"
#: how far back a thread is read to tell which messages of a list it holds already
_TAIL = 200


def _memory(memory: Memory | Any) -> Memory:
    return memory if isinstance(memory, Memory) else Memory(memory)


class _Thread:
    """One thread of one user (in a tenant, for an agent): what both classes store to and read."""

    def __init__(self, memory: Memory, user_id: str, thread_id: str, tenant: str | None, agent_id: str | None) -> None:
        self.memory = memory
        self.scope = memory.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)

    def _where(self) -> dict[str, Any]:
        s = self.scope
        return {"user_id": s.user_id, "thread_id": s.thread_id, "tenant": s.tenant, "agent_id": s.agent_id}

    def add(self, messages: Sequence[ChatMessage]) -> None:
        """Store the messages in one add, all validated first; an empty reply is left out."""
        now = utcnow()
        batch = [to_memstack(m, at=now) for m in messages if not _skipped(m)]
        if batch:
            self.memory.add(batch, **self._where())

    def add_unseen(self, messages: Sequence[ChatMessage], *, system: bool = True) -> None:
        """Store those of the messages the thread does not hold yet (``unseen``); ``system``:
        system messages too."""
        now = utcnow()
        kept = [m for m in messages if not _skipped(m) and (system or m.role.value not in ("system", "developer"))]
        incoming = [to_memstack(m, at=now) for m in kept]
        if not incoming:
            return
        tail = self.history(last=len(incoming) + _TAIL)
        new = unseen(tail, incoming)
        if new:
            self.memory.add(new, **self._where())

    def history(self, last: int | None = None) -> list[Message]:
        return self.memory.history(**self._where(), last=last, order="append")

    def context(self, query: str | None, max_tokens: int | None) -> list[Message]:
        """memstack's context for the thread: ``query`` (the question, not stored) is read with
        and not returned; None reads with the thread's last user message, as stored."""
        where = self._where()
        ctx = (
            self.memory.context(**where, query=query)
            if max_tokens is None
            else self.memory.context(**where, query=query, max_tokens=max_tokens)
        )
        messages = list(ctx.messages)
        return messages[:-1] if query is not None and query.strip() else messages

    def forget(self) -> None:
        s = self.scope
        self.memory.forget(user_id=s.user_id, thread_id=s.thread_id, tenant=s.tenant, agent_id=s.agent_id, by="llamaindex")


def _skipped(message: ChatMessage) -> bool:
    if is_empty_reply(message):
        log.warning("not storing an empty assistant reply: memstack keeps only messages with content or tool calls")
        return True
    return False


class MemstackMemory(BaseMemory):
    """One thread of one user as a LlamaIndex agent's memory.

    ``memory``: a Memory (its layers get their jobs after each add), or a store URL or path
    (wrapped in a plain Memory), or None for the default SQLite file. ``max_tokens``: the
    context's budget (None: the Memory's).

    ``get`` returns memstack's context for the thread: the memory sections in a system message
    first, or with ``insert="user"`` before the text of the last user message (LlamaIndex's
    ``InsertMethod.USER``; a ``ReActAgent`` without a ``system_prompt`` takes the first system
    message it gets for its own prompt and drops it). ``get_all`` is the thread as stored;
    ``put`` and ``put_messages`` store; ``set`` stores those of the messages the thread does not
    end with already (an agent run with ``chat_history`` sets it on every run: each message is
    stored once, and nothing stored is deleted); ``reset`` forgets the thread and what the layers
    keyed to it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    user_id: str
    thread_id: str
    tenant: str | None = None
    agent_id: str | None = None
    max_tokens: int | None = None
    insert: Literal["system", "user"] = "system"
    memory: Any = Field(default=None, exclude=True, description="the memstack Memory")
    _thread: _Thread = PrivateAttr()

    def __init__(
        self,
        memory: Memory | Any = None,
        *,
        user_id: str,
        thread_id: str,
        tenant: str | None = None,
        agent_id: str | None = None,
        max_tokens: int | None = None,
        insert: Literal["system", "user"] = "system",
    ) -> None:
        fields: dict[str, Any] = {"user_id": user_id, "thread_id": thread_id, "tenant": tenant, "agent_id": agent_id}
        fields.update(memory=_memory(memory), max_tokens=max_tokens, insert=insert)
        super().__init__(**fields)
        self._thread = _Thread(self.memory, user_id, thread_id, tenant, agent_id)

    @classmethod
    def class_name(cls) -> str:
        return "MemstackMemory"

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> MemstackMemory:  # type: ignore[override]
        return cls(**kwargs)

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """memstack's context for the thread, as the messages to send. ``input``: the question to
        read the memory with, when it is not the thread's last user message already (the agents
        store the user's message before they ask, so they pass it again or not at all); it is not
        a message of the thread and is not returned."""
        last = self._thread.history(last=1)
        query = input if input and not (last and last[0].role == "user" and last[0].text.strip() == input.strip()) else None
        messages = self._thread.context(query, self.max_tokens)
        return _into_last_user(messages) if self.insert == "user" else [to_llamaindex(m) for m in messages]

    def get_all(self) -> list[ChatMessage]:
        """The thread's messages as stored, in the order they were added."""
        return [to_llamaindex(m) for m in self._thread.history()]

    def put(self, message: ChatMessage) -> None:
        self._thread.add([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Store the messages in one add: all are validated before any is written."""
        self._thread.add(messages)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        await asyncio.to_thread(self.put_messages, messages)

    def set(self, messages: list[ChatMessage]) -> None:
        """Make the thread end with ``messages``: store those it does not hold yet (never deletes)."""
        self._thread.add_unseen(messages)

    def reset(self) -> None:
        """Forget the thread: its messages and everything the layers keyed to it."""
        self._thread.forget()


def _into_last_user(messages: list[Message]) -> list[ChatMessage]:
    """The messages, the memory's system message moved to the start of the last user message
    (as LlamaIndex's ``InsertMethod.USER`` puts its blocks); kept where it is when there is none."""
    memory = next((m for m in messages if m.id == MEMORY_MESSAGE_ID), None)
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if memory is None or not users:
        return [to_llamaindex(m) for m in messages]
    out = [to_llamaindex(m) for m in messages]
    target = out[users[-1]]
    target.blocks = [TextBlock(text=memory.text + "\n\n"), *target.blocks]
    return [m for m, original in zip(out, messages, strict=True) if original is not memory]


class MemstackMemoryBlock(BaseMemoryBlock[str]):
    """A block of LlamaIndex's ``Memory``: memstack's memory of the user, for the question the
    chat ends with, as text in the memory's system message; the chat stored in memstack.

    The thread is ``thread_id``, or the LlamaIndex memory's ``session_id`` when None.
    ``max_tokens``: the budget of memstack's context the sections are fitted into (None: the
    Memory's). Give the block a priority above 0 to let LlamaIndex drop it when over its limit.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "memstack"
    user_id: str
    thread_id: str | None = None
    tenant: str | None = None
    agent_id: str | None = None
    max_tokens: int | None = None
    memory: Any = Field(default=None, exclude=True, description="the memstack Memory")

    def __init__(self, memory: Memory | Any = None, **data: Any) -> None:
        data["memory"] = _memory(memory)
        super().__init__(**data)

    def _thread(self, session_id: str | None) -> _Thread:
        thread = self.thread_id or session_id
        if not thread:
            raise ValueError("MemstackMemoryBlock needs a thread_id, or the session_id LlamaIndex's Memory passes")
        return _Thread(self.memory, self.user_id, thread, self.tenant, self.agent_id)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        return await asyncio.to_thread(self._get, list(messages or []), block_kwargs.get("session_id"))

    def _get(self, messages: list[ChatMessage], session_id: str | None) -> str:
        thread = self._thread(session_id)
        if len(messages) > 1 and all(m.role.value == "user" for m in messages[-2:]) and messages[-1].content == messages[-2].content:
            messages = messages[:-1]  # LlamaIndex's Memory.aget(input=...) adds the input again for the blocks
        thread.add_unseen(messages, system=False)
        context = thread.context(None, self.max_tokens)
        return next((m.text for m in context if m.id == MEMORY_MESSAGE_ID), "")

    async def _aput(self, messages: list[ChatMessage]) -> None:
        session = next((m.additional_kwargs.get("session_id") for m in messages if m.additional_kwargs.get("session_id")), None)
        await asyncio.to_thread(self._thread(session).add_unseen, messages, system=False)
