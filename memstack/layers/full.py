"""Full history: the whole thread, every message kept (the articles' first strategy)."""

from __future__ import annotations

from dataclasses import dataclass

from ..types import Message
from . import register_layer
from .base import LayerOutput, ReadRequest


@dataclass(frozen=True)
class FullHistory:
    """Keeps every message; the stack's max_tokens still caps the final context."""

    name: str = "full"
    scope: str = "thread"
    history: str = "all"

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        return LayerOutput(list(messages))


register_layer("full", FullHistory)
