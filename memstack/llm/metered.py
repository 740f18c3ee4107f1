"""A ChatModel wrapper that records every call's tokens and latency for a scope, failed ones too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..stores import UsageLog
from ..types import Scope, UsageRecord
from .base import ChatModel, Completion


class Metered:
    """Wraps ``model``; ``calls`` collects this wrapper's completions until ``commit`` writes them
    to the usage log (``ok`` False and the error for a batch whose output was unusable)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.name = model.name
        self.context_window = model.context_window
        self.native_schema = model.native_schema
        self.calls: list[Completion] = []

    def complete(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> Completion:
        """The wrapped model's ``complete``, its options passed on as given (``ChatModel.complete``'s,
        or any more the model takes), the completion kept for ``commit``."""
        out = self.model.complete(messages, **options)
        self.calls.append(out)
        return out

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    def commit(self, log: UsageLog | None, scope: Scope, layer: str, *, error: str | None = None) -> None:
        if log is not None and self.calls:
            log.record(
                [
                    UsageRecord(
                        scope,
                        layer,
                        c.model or self.name,
                        c.prompt_tokens,
                        c.completion_tokens,
                        c.latency_ms,
                        ok=error is None,
                        error=error,
                    )
                    for c in self.calls
                ]
            )
        self.calls = []
