"""The chat-model contract every provider implements, and what one call returns.

A ChatModel takes OpenAI-shaped messages (``{"role": ..., "content": ...}``) and returns one
Completion with its token usage and latency. ``schema`` (a JSON schema) asks for output that
conforms to it: natively where the provider supports it (``response_format`` json_schema on
OpenAI-compatible APIs, a grammar on the local model), otherwise the caller's prompt must ask for
JSON and ``memstack.llm.structured`` parses and repairs it. Providers translate their failures
into the error tree: ProviderRejected (fix the call), ProviderUnavailable (retry later).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..types import ToolCall


@dataclass(frozen=True, slots=True)
class Completion:
    """One model call's answer: its text, the model's own token counts and the wall time."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    #: "stop", "length" (cut off by max_tokens), "tool_calls", ... as the provider reports it
    finish_reason: str | None = None
    #: the functions the model asked to call (only from providers that take ``tools``)
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A piece of a streamed tool call: the call at ``index``, its id and name once, its arguments in fragments."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class Delta:
    """One piece of a streamed answer; the last ones carry ``finish_reason`` and the token usage."""

    text: str = ""
    tool_calls: tuple[ToolCallPart, ...] = ()
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None


@runtime_checkable
class ChatModel(Protocol):
    #: the provider string it was built from ("local", "ollama:qwen3:8b", ...)
    name: str
    #: tokens of prompt + completion the model accepts
    context_window: int
    #: True when ``schema`` is enforced by the provider (json_schema response format or grammar)
    native_schema: bool

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion: ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in this model's tokenizer (an estimate where it is not known)."""
        ...
