"""OpenAI Agents SDK adapters (``pip install "memstack[openai-agents]"``): a ``Session`` over a
memstack thread, and instructions that carry memstack's memory of the user into every run.

    from agents import Agent, Runner
    from memstack import Memory
    from memstack.integrations.openai_agents import MemstackSession

    memory = Memory("chat.db")                          # or an AsyncMemory, a store URL
    session = MemstackSession("s2", memory, user_id="u1")
    agent = Agent(name="assistant", instructions=session.instructions("You are a helpful assistant."))
    result = await Runner.run(agent, "我的后端使用什么技术？", session=session)

``MemstackSession`` is the SDK's session protocol (``get_items``, ``add_items``, ``pop_item``,
``clear_session``, ``session_id``): the run's items are stored in the user's thread ``session_id``,
one message each (``openai_agents_items``: the user's and the model's text as chat messages, so
memstack's layers (retrieval, summary, entities...) remember them like any conversation; tool
calls as tool calls; every item kept whole in its message's metadata, and given back as it was
stored). A new session object with the same ids resumes the conversation.

``session.instructions(base)`` (or ``memory_instructions(memory, base, user_id=..., thread_id=...)``)
is a dynamic ``instructions`` callable for ``Agent``: before each model call it asks
``Memory.context`` for the run's question (the last user message of the run's input) and returns
``base`` followed by memstack's memory sections: what the user said in earlier sessions, their
profile, summaries, entities, as the Memory's layers render them. The conversation itself is not
repeated there: the session gives it to the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import Conflict, InvalidInput, importing
from ..replaced import REPLACES, visible
from ..types import Message, Scope, check_message, check_text, new_id, utcnow
from .awaiting import Awaiting, MemoryLike
from .openai_agents_items import KEPT, last_user_text, to_items, to_message

with importing("openai-agents", "openai-agents"):
    from agents import Agent, RunContextWrapper
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings
    from agents.memory.session_settings import resolve_session_limit

__all__ = ["MemstackSession", "memory_instructions"]

#: the ``by`` of the deletion note that ``clear_session`` leaves (``Memory.forget``)
BY = "openai-agents"
#: the memory's share of the instructions, in tokens, unless the caller says otherwise
MEMORY_TOKENS = 1500
_TAIL_START = 64
_POP_TRIES = 5

Instructions = Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str]]


class MemstackSession:
    """The SDK's ``Session`` over one memstack thread: ``session_id`` is its thread id.

    ``memory``: a Memory or AsyncMemory (the caller's: left open), or a store URL or path
    (opened here, closed by ``close``). ``user_id`` (and ``tenant``, ``agent_id``) scope every
    read and write; no call sees another user's thread. ``session_settings``: the SDK's
    ``SessionSettings`` (``limit``: how many of the newest items ``get_items`` returns by default).

    - ``get_items(limit)``: the thread's items in the order they were added (the newest ``limit``);
    - ``add_items(items)``: all validated, then stored in one ``Memory.add`` (one transaction: the
      layers get their jobs); InvalidInput names the item (``items[2]``) and nothing is stored;
    - ``pop_item()``: removes and returns the newest item. The history is append-only: the item's
      message is marked replaced (``memstack.replaced``) by a note that replaces itself too, so
      neither is seen again by the session or by any context built from the thread; what a layer
      already derived from the item (an indexed round) stays until the thread is forgotten. A
      message written without the SDK that reads as several items is popped whole (its last
      item is returned);
    - ``clear_session()``: forgets the thread (``Memory.forget``: its messages and everything the
      layers keyed to it), leaving a deletion note by "openai-agents".
    """

    def __init__(
        self,
        session_id: str,
        memory: MemoryLike = None,
        *,
        user_id: str,
        tenant: str | None = None,
        agent_id: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self._calls = Awaiting(memory)
        self.scope: Scope = self._calls.memory.scope(user_id, session_id, tenant=tenant, agent_id=agent_id)
        self.session_id = session_id
        self.session_settings = session_settings or SessionSettings()

    # ---- the SDK's session protocol ----------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The thread's items, oldest first; the newest ``limit`` of them when given (or set in
        ``session_settings``)."""
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is not None and wanted <= 0:
            return []
        n = _TAIL_START
        while True:
            raw = await self._read(None if wanted is None else n)
            items = [item for m in visible(raw) for item in to_items(m)]
            if wanted is None:
                return items  # type: ignore[return-value]
            if len(items) >= wanted or len(raw) < n:
                return items[-wanted:]  # type: ignore[return-value]
            n *= 4

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store the items, in order, in one ``Memory.add``; all are checked first."""
        if not items:
            return
        now = utcnow()
        batch = [_checked(i, item, now) for i, item in enumerate(items)]
        await self._calls("add", batch, **self._ids())

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (None when the thread has none)."""
        for _ in range(_POP_TRIES):
            found = await self._newest()
            if found is None:
                return None
            newest, last_seq = found
            note_id = new_id()
            note = Message(
                role="system",
                content=f"openai-agents: session item {newest.id} popped",
                id=note_id,
                metadata={REPLACES: [newest.id, note_id], KEPT: {"popped": newest.id}},
            )
            try:
                await self._calls("add", [note], **self._ids(), expect_last=last_seq)
            except Conflict:
                continue  # another writer added to the thread since it was read: read again
            items = to_items(newest)
            return items[-1] if items else None  # type: ignore[return-value]
        raise Conflict(f"the thread {self.session_id!r} kept changing while its newest item was popped; try again")

    async def clear_session(self) -> None:
        """Forget the thread: its messages and everything memstack's layers keyed to it."""
        await self._calls("forget", **self._ids(), by=BY)

    # ---- memstack's memory in the agent's instructions ------------------------------------

    def instructions(
        self, base: str | Callable[..., Any] | None = None, *, max_tokens: int | None = MEMORY_TOKENS, **options: Any
    ) -> Instructions:
        """A dynamic ``instructions`` for ``Agent``: ``base`` and memstack's memory for this
        session's user and thread (see ``memory_instructions``)."""
        return _instructions(self._calls, self.scope, base, max_tokens, options)

    async def close(self) -> None:
        """Close the Memory if this session opened it from a URL."""
        await self._calls.close()

    # ---- helpers -----------------------------------------------------------------------------

    def _ids(self) -> dict[str, Any]:
        s = self.scope
        return {"user_id": s.user_id, "thread_id": s.thread_id, "tenant": s.tenant, "agent_id": s.agent_id}

    async def _read(self, last: int | None) -> list[Message]:
        return await self._calls("history", **self._ids(), last=last, order="append", replaced="include")  # type: ignore[no-any-return]

    async def _newest(self) -> tuple[Message, int | None] | None:
        """The newest visible message and the seq of the thread's last message, read together."""
        n = _TAIL_START
        while True:
            raw = await self._read(n)
            shown = visible(raw)
            if shown:
                return shown[-1], raw[-1].seq
            if len(raw) < n:
                return None
            n *= 4

    def __repr__(self) -> str:
        return f"MemstackSession({self.session_id!r}, user_id={self.scope.user_id!r}, tenant={self.scope.tenant!r})"


def memory_instructions(
    memory: MemoryLike,
    base: str | Callable[..., Any] | None = None,
    *,
    user_id: str,
    thread_id: str,
    tenant: str | None = None,
    agent_id: str | None = None,
    max_tokens: int | None = MEMORY_TOKENS,
    **options: Any,
) -> Instructions:
    """A dynamic ``instructions`` callable for ``Agent(instructions=...)``: ``base`` (a string,
    or the SDK's own ``(context, agent)`` callable) and, after a blank line, the memory sections
    ``Memory.context`` builds for the user's thread and the run's question.

    The question is the last user message of the run's input (``RunContextWrapper.turn_input``,
    which the SDK sets before it asks for the instructions, streamed or not), else the thread's
    last stored user message. ``max_tokens`` bounds the context call's budget (the sections take
    at most what the thread's conversation leaves of it, and at least half); ``options`` go to
    ``Memory.context`` (``strategy="retrieval"``: only what earlier sessions said). With no memory
    to add, the instructions are ``base`` alone. Called before every model call of a run.
    """
    calls = Awaiting(memory)
    scope = calls.memory.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)
    return _instructions(calls, scope, base, max_tokens, options)


def _instructions(
    calls: Awaiting, scope: Scope, base: str | Callable[..., Any] | None, max_tokens: int | None, options: dict[str, Any]
) -> Instructions:
    if base is not None and not isinstance(base, str) and not callable(base):
        raise InvalidInput(f"base instructions must be a string or a (context, agent) callable, not {type(base).__name__}", field="base")
    scope.require_thread()

    async def instructions(run_context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        head = await _base_text(base, run_context, agent)
        query = last_user_text(getattr(run_context, "turn_input", None) or [])
        context = await calls(
            "context",
            user_id=scope.user_id,
            thread_id=scope.thread_id,
            tenant=scope.tenant,
            agent_id=scope.agent_id,
            query=query,
            max_tokens=max_tokens,
            **options,
        )
        memory = next((m.text for m in context.messages if m.id == MEMORY_MESSAGE_ID), "")
        return "\n\n".join(part for part in (head, memory) if part)

    return instructions


#: the id ``Memory.context`` gives the one system message that holds the memory sections
MEMORY_MESSAGE_ID = "memstack-memory"


async def _base_text(base: str | Callable[..., Any] | None, run_context: Any, agent: Any) -> str:
    if base is None or isinstance(base, str):
        return base or ""
    value = base(run_context, agent)
    if hasattr(value, "__await__"):
        value = await value
    return value or ""


def _checked(i: int, item: Any, at: Any) -> Message:
    """The i-th item as a Message that meets every rule of a stored one; InvalidInput names it."""
    field = f"items[{i}]"
    try:
        message = to_message(item, at=at, field=field)
        check_text(message.text, "content", what="the text")  # before the kept item, which holds the same text
        check_message(message)
    except InvalidInput as exc:
        if exc.field and exc.field.startswith(field):
            raise
        raise InvalidInput(f"{field}: {exc}", field=f"{field}.{exc.field}" if exc.field else field) from exc
    return message
