"""A scripted model for the OpenAI Agents SDK: the SDK's ``Model`` answering from a script and
recording what it was given (``pip install "memstack[openai-agents]"``; not imported by
``memstack.testing``), for tests and offline examples of ``memstack.integrations.openai_agents``.

    model = ScriptedAgentModel([tool_call("get_weather", {"city": "杭州"}), "杭州今天晴。"])
    agent = Agent(name="assistant", model=model, tools=[get_weather])
    model.calls[0].instructions, model.calls[0].input     # what the model received

Each script entry answers one model call: a string is an assistant message, a ``tool_call(...)``
a function call, a list several output items at once. An exhausted script raises
AssertionError, so an unexpected call fails the test.
"""

from __future__ import annotations

import copy
import json
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import importing
from ..types import new_id

with importing("openai-agents", "openai-agents"):
    from agents import Usage
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
    from agents.model_settings import ModelSettings
    from agents.models.interface import Model, ModelTracing
    from agents.tool import Tool
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
    from openai.types.responses.response_prompt_param import ResponsePromptParam

__all__ = ["ModelCall", "ScriptedAgentModel", "tool_call"]

Step = str | TResponseOutputItem | list[str | TResponseOutputItem]


@dataclass(frozen=True)
class ModelCall:
    """What one model call was given: the system instructions, the input items, the tool names."""

    instructions: str | None
    input: list[Any]
    tools: tuple[str, ...]

    def text(self) -> str:
        """The instructions and every input item as one text (for assertions)."""
        return "\n".join([self.instructions or "", *(json.dumps(item, ensure_ascii=False) for item in self.input)])


def tool_call(name: str, arguments: Mapping[str, Any], *, call_id: str | None = None) -> ResponseFunctionToolCall:
    """A function call output item (arguments as JSON text, a fresh call id unless given)."""
    return ResponseFunctionToolCall(
        type="function_call",
        call_id=call_id or f"call_{new_id()[:12]}",
        name=name,
        arguments=json.dumps(dict(arguments), ensure_ascii=False),
        id=f"fc_{new_id()[:12]}",
    )


class ScriptedAgentModel(Model):
    """The SDK's ``Model`` answering each call with the next step of ``script``."""

    def __init__(self, script: Iterable[Step] = ()) -> None:
        self._script: deque[Step] = deque(script)
        self.calls: list[ModelCall] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        return ModelResponse(output=self._answer(system_instructions, input, tools), usage=Usage(), response_id=None)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The same answer as one ``response.completed`` event (no deltas)."""
        output = self._answer(system_instructions, input, tools)
        response = Response(
            id=f"resp_{new_id()[:12]}",
            created_at=0,
            model="scripted",
            object="response",
            output=output,
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)

    def _answer(self, instructions: str | None, input: str | list[TResponseInputItem], tools: list[Tool]) -> list[TResponseOutputItem]:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else copy.deepcopy(list(input))
        self.calls.append(ModelCall(instructions, items, tuple(getattr(t, "name", type(t).__name__) for t in tools)))
        if not self._script:
            raise AssertionError("ScriptedAgentModel: no output left")
        step = self._script.popleft()
        return [_output(s) for s in (step if isinstance(step, list) else [step])]


def _output(step: str | TResponseOutputItem) -> TResponseOutputItem:
    if not isinstance(step, str):
        return step
    return ResponseOutputMessage(
        type="message",
        id=f"msg_{new_id()[:12]}",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=step, annotations=[])],
    )
