"""A scripted model client for AutoGen: autogen-core's ``ChatCompletionClient`` answering from a
script and recording what it was given (``pip install "memstack[autogen]"``; not imported by
``memstack.testing``), for tests and offline examples of ``memstack.integrations.autogen``. In the
manner of autogen-ext's ReplayChatCompletionClient, without needing autogen-ext.

    client = ScriptedChatCompletionClient(["你的后端使用 SpringBoot。"])
    agent = AssistantAgent("assistant", model_client=client, memory=[memory])
    client.calls[0]                                   # the LLM messages of the first call

Each script entry answers one call: a string is the answer's text, a list of ``FunctionCall`` a
tool call. An exhausted script raises AssertionError, so an unexpected call fails the test.
Token counts are memstack's estimator's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from ..errors import importing
from ..tokens import get_counter

with importing("autogen-core", "autogen"):
    from autogen_core import CancellationToken, FunctionCall
    from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage, ModelCapabilities, ModelInfo, RequestUsage
    from autogen_core.tools import Tool, ToolSchema

__all__ = ["ScriptedChatCompletionClient"]

Step = str | list[FunctionCall]


class ScriptedChatCompletionClient(ChatCompletionClient):
    """Answers each ``create`` with the next step of ``script``; ``calls`` keeps every call's messages."""

    def __init__(self, script: Iterable[Step] = (), *, context_window: int = 32768) -> None:
        self._script: deque[Step] = deque(script)
        self.calls: list[list[LLMMessage]] = []
        self.context_window = context_window
        self._counter = get_counter()
        self._total = RequestUsage(prompt_tokens=0, completion_tokens=0)
        self._last = RequestUsage(prompt_tokens=0, completion_tokens=0)

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        self.calls.append(list(messages))
        if not self._script:
            raise AssertionError("ScriptedChatCompletionClient: no output left")
        step = self._script.popleft()
        prompt = self.count_tokens(messages)
        completion = self._counter.count(step) if isinstance(step, str) else sum(self._counter.count(c.arguments) for c in step)
        self._last = RequestUsage(prompt_tokens=prompt, completion_tokens=completion)
        self._total = RequestUsage(
            prompt_tokens=self._total.prompt_tokens + prompt, completion_tokens=self._total.completion_tokens + completion
        )
        return CreateResult(
            finish_reason="stop" if isinstance(step, str) else "function_calls", content=step, usage=self._last, cached=False
        )

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        result = await self.create(messages, tools=tools, tool_choice=tool_choice, json_output=json_output)
        if isinstance(result.content, str):
            yield result.content
        yield result

    async def close(self) -> None:
        return None

    def actual_usage(self) -> RequestUsage:
        return self._last

    def total_usage(self) -> RequestUsage:
        return self._total

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return sum(self._counter.count(str(m.content)) for m in messages)

    def remaining_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return max(0, self.context_window - self.count_tokens(messages, tools=tools))

    @property
    def capabilities(self) -> ModelCapabilities:  # deprecated in autogen-core, still abstract
        return {"vision": False, "function_calling": True, "json_output": False}

    @property
    def model_info(self) -> ModelInfo:
        return {"vision": False, "function_calling": True, "json_output": False, "family": "unknown", "structured_output": False}
