"""The memory tools of one user through a client: ``memory_tools(memory, user_id, thread_id)``'s
``openai_tools()`` and ``call(name, arguments)`` for a tool-calling loop, run by the server's tools
(``POST /v1/users/{u}/tools/{name}``), so an agent's loop moves to the service unchanged.

    tools = client.tools("u1", "s1")
    completion = openai.chat.completions.create(..., tools=tools.openai_tools())
    for call in completion.choices[0].message.tool_calls or []:
        result = tools.call(call.function.name, call.function.arguments)   # text for the model
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the tools a model sees, in this order (``MemoryTools.NAMES``)
NAMES = ("save_memory", "recall_memory", "forget_memory", "get_state", "set_state")


class ClientTools:
    """The tools of ``form`` ("notes" or "key-value") bound to a user (and thread) of a Client
    (``client``: a ``Client``; typed loosely, as the clients' module imports this one)."""

    NAMES = NAMES

    def __init__(self, client: Any, user_id: str, thread_id: str | None = None, *, form: str = "notes") -> None:
        self.client, self.user_id, self.thread_id, self.form = client, user_id, thread_id, form

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tools as OpenAI function-calling schemas (``tools=`` of a chat completion)."""
        return self.client.openai_tools(form=self.form)  # type: ignore[no-any-return]

    def call(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        """Run the tool ``name``; its text for the model ("error: ..." for a model's mistake)."""
        return self.client.call_tool(name, arguments, user_id=self.user_id, thread_id=self.thread_id, form=self.form)  # type: ignore[no-any-return]


class AsyncClientTools:
    """``ClientTools`` of an AsyncClient: the same methods, awaited."""

    NAMES = NAMES

    def __init__(self, client: Any, user_id: str, thread_id: str | None = None, *, form: str = "notes") -> None:
        self.client, self.user_id, self.thread_id, self.form = client, user_id, thread_id, form

    async def openai_tools(self) -> list[dict[str, Any]]:
        return await self.client.openai_tools(form=self.form)  # type: ignore[no-any-return]

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        return await self.client.call_tool(name, arguments, user_id=self.user_id, thread_id=self.thread_id, form=self.form)  # type: ignore[no-any-return]
