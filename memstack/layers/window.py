"""Sliding window: the last k turns, never splitting a user message from its reply."""

from __future__ import annotations

from dataclasses import dataclass

from ..budget import window
from ..errors import InvalidInput
from ..types import Message
from . import register_layer
from .base import LayerOutput, ReadRequest, dropped_between


@dataclass(frozen=True)
class Window:
    """System messages plus the last ``k`` turns (a turn = a user message and all that answers it)."""

    k: int = 5
    name: str = "window"
    scope: str = "thread"
    history: str = "tail"

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 0:
            raise InvalidInput("window k must be an integer >= 0", field="k")

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        kept = window(messages, self.k)
        return LayerOutput(
            kept,
            dropped=dropped_between(
                self.name, messages, kept, f"outside the last {self.k} turn{'' if self.k == 1 else 's'}", request.counter
            ),
        )


register_layer("window", Window)
