"""Token-budget trimming: the most recent messages that fit the budget (LangChain's trim_messages)."""

from __future__ import annotations

from dataclasses import dataclass

from ..budget import Strategy, trim
from ..types import Message
from . import register_layer
from .base import LayerOutput, ReadRequest, dropped_between


@dataclass(frozen=True)
class Trim:
    """Keeps what fits in ``max_tokens`` (default: the share of the budget left to the history),
    starting on a user message, system message kept, no partial messages unless asked."""

    max_tokens: int | None = None
    strategy: Strategy = "last"
    allow_partial: bool = False
    name: str = "trim"
    scope: str = "thread"

    @property
    def history(self) -> str:
        return "tail" if self.strategy == "last" else "all"

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        budget = self.max_tokens if self.max_tokens is not None else request.budget
        if budget is None:
            return LayerOutput(list(messages))
        if self.max_tokens is not None and request.budget is not None:
            budget = min(budget, request.budget)
        kept = trim(messages, budget, request.counter, strategy=self.strategy, allow_partial=self.allow_partial)
        return LayerOutput(
            kept, dropped=dropped_between(self.name, messages, kept, f"over the {budget} tokens left for the conversation", request.counter)
        )


register_layer("trim", Trim)
