"""ScriptedModel: a fake ChatModel that plays back a script, for tests of code that calls a model.

Tests of orchestration (structured output, extraction, summaries) need a model whose answers are
chosen by the test, with no network and no weights, and that fails loudly when the code under test
calls it more often than expected. It goes through the real ``ChatModel`` contract, never a patch.

    model = ScriptedModel(['{"facts": []}', ProviderUnavailable("503"), lambda messages, schema: "..."])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..llm.base import Completion
from ..tokens import MESSAGE_OVERHEAD, get_counter

__all__ = ["Output", "ScriptedModel"]

#: One scripted answer: the text, a full Completion (to set finish_reason or token counts),
#: an exception to raise, or a function of ``(messages, schema)`` returning any of these.
Output = str | Completion | Exception | Callable[[list[dict[str, Any]], Mapping[str, Any] | None], Any]


class ScriptedModel:
    """A ChatModel that answers each call with the next scripted output.

    When the script runs out it answers ``default`` if one was given, otherwise it raises
    ``AssertionError("ScriptedModel: no output left")`` so that unexpected calls fail the test.
    Every call is recorded in ``calls`` (messages, schema, max_tokens, temperature). Token counts
    come from the default estimator (``memstack.tokens.get_counter()``).
    """

    #: the latency every scripted Completion reports, in milliseconds
    latency_ms = 0.1

    def __init__(
        self,
        outputs: Iterable[Output] = (),
        *,
        default: Output | None = None,
        native_schema: bool = False,
        context_window: int = 4096,
        name: str = "scripted",
    ) -> None:
        self.name = name
        self.context_window = context_window
        self.native_schema = native_schema
        self.default = default
        self.calls: list[dict[str, Any]] = []
        self._outputs: deque[Output] = deque(outputs)
        self._counter = get_counter()

    @property
    def remaining(self) -> int:
        """Scripted outputs not yet used (the default not counted)."""
        return len(self._outputs)

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        seen = [dict(m) for m in messages]
        self.calls.append({"messages": seen, "schema": schema, "max_tokens": max_tokens, "temperature": temperature})
        output = self._next()
        if callable(output) and not isinstance(output, Exception):
            output = output(seen, schema)
        if isinstance(output, Exception):
            raise output
        if isinstance(output, Completion):
            return output
        return Completion(
            text=output,
            model=self.name,
            prompt_tokens=sum(MESSAGE_OVERHEAD + self.count_tokens(_text(m.get("content"))) for m in seen),
            completion_tokens=self.count_tokens(output),
            latency_ms=self.latency_ms,
            finish_reason="stop",
        )

    def count_tokens(self, text: str) -> int:
        return self._counter.count(text)

    def _next(self) -> Output:
        if self._outputs:
            return self._outputs.popleft()
        if self.default is not None:
            return self.default
        raise AssertionError("ScriptedModel: no output left")

    def __repr__(self) -> str:
        return f"<ScriptedModel {self.name} {self.remaining} outputs left, {len(self.calls)} calls>"


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""
