"""Chat models behind any OpenAI-compatible API (OpenAI, DeepSeek, DashScope, Ollama, vLLM, ...), via the official SDK.

The wire format is one (``/chat/completions``); where it goes and which key it sends come from the
provider string and its preset (``memstack.providers.presets``). Providers differ in one way that
matters here: whether ``response_format`` may carry a JSON schema. Those that accept one get it
(``native_schema``); the others are sent ``{"type": "json_object"}``, which only promises JSON, and
the caller puts the schema into the prompt. Beyond the ChatModel contract it takes ``stop``,
``tools`` and ``tool_choice`` (OpenAI's shapes, sent as they are) and streams (``stream``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..errors import InvalidInput, MissingDependency, ProviderUnavailable, UnknownName, require
from ..providers.openai_errors import translate_openai_error, where_of
from ..providers.presets import parse_provider, resolve_api_key
from ..tokens import MESSAGE_OVERHEAD, TokenCounter, get_counter
from ..types import ToolCall
from .base import Completion, Delta, ToolCallPart

#: Hosted APIs whose models call functions (``tools=``); a self-hosted server (vLLM, Ollama,
#: llama.cpp, LM Studio) does only with the right model and flags, so memstack's tool loop asks
#: it for JSON actions unless told otherwise (``run_tool_chat(native=True)``).
NATIVE_TOOL_PROVIDERS = frozenset({"openai", "deepseek", "dashscope", "siliconflow", "zhipu", "moonshot", "openrouter"})

#: Providers whose servers enforce ``response_format: {"type": "json_schema", ...}``.
NATIVE_SCHEMA_PROVIDERS = frozenset({"openai", "vllm", "ollama", "lmstudio", "llamacpp", "openrouter"})

DEFAULT_CONTEXT_WINDOW = 8192
"""For models not in KNOWN_CONTEXT_WINDOWS: small enough that a budget fitted to it fits almost anywhere."""

#: Context windows of well-known hosted models, by name prefix (first match wins, so longer first).
#: Self-hosted servers (ollama, vllm, ...) set their own window: pass ``context_window=``.
KNOWN_CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("deepseek-chat", 128_000),
    ("deepseek-reasoner", 128_000),
    ("qwen-max", 32_768),
    ("qwen-plus", 131_072),
    ("qwen-turbo", 131_072),
    ("moonshot-v1-8k", 8_192),
    ("moonshot-v1-32k", 32_768),
    ("moonshot-v1-128k", 131_072),
    ("glm-4", 128_000),
)


def known_context_window(model: str) -> int:
    """The context window of a well-known model (a vendor prefix such as "openai/" is ignored), else the default."""
    bare = model.rsplit("/", 1)[-1].lower()
    return next((window for prefix, window in KNOWN_CONTEXT_WINDOWS if bare.startswith(prefix)), DEFAULT_CONTEXT_WINDOW)


class OpenAIChat:
    """A ChatModel on an OpenAI-compatible ``/chat/completions`` endpoint named by a provider string.

    ``provider`` is "PROVIDER:MODEL" or "PROVIDER:MODEL@URL" ("openai:gpt-4o-mini", "ollama:qwen3:8b",
    "vllm:MODEL@http://host:8000/v1"); ``base_url`` overrides its address. The API key is resolved
    here (explicit, else the preset's variable), so a missing one raises MissingAPIKey now, not at
    the first call. ``http_client`` (an ``httpx.Client``) replaces the SDK's transport, e.g. with an
    ``httpx.MockTransport`` in tests. The SDK retries timeouts, connection errors, 408/409/429 and
    5xx ``max_retries`` times; what still fails is ProviderUnavailable, a refused request
    ProviderRejected. Token usage is the server's; where a server reports none it is counted with
    ``count_tokens``, which uses the model's OpenAI encoding when the name is known, else the estimator.
    """

    def __init__(
        self,
        provider: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60,
        max_retries: int = 2,
        http_client: Any = None,
        context_window: int | None = None,
    ) -> None:
        spec = parse_provider(provider, base_url=base_url)
        if spec.model is None:
            raise InvalidInput(f"{spec.provider} is an in-process model, not an OpenAI-compatible endpoint", field="provider")
        self._openai = require("openai", extra="openai")
        self.spec = spec
        self.name = provider.strip()
        self.model = spec.model
        self.context_window = context_window or known_context_window(spec.model)
        self.native_schema = spec.provider in NATIVE_SCHEMA_PROVIDERS
        #: whether the tool loop calls this model's functions natively by default
        self.native_tools = spec.provider in NATIVE_TOOL_PROVIDERS
        self._client = self._openai.OpenAI(
            base_url=spec.base_url,
            api_key=resolve_api_key(spec, api_key),
            http_client=http_client,
            timeout=timeout,
            max_retries=max_retries,
        )

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
    ) -> Completion:
        extra = self._options(max_tokens, stop, tools, tool_choice)
        if schema is not None:
            extra["response_format"] = self._response_format(schema)
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(model=self.model, messages=list(messages), temperature=temperature, **extra)
        except self._openai.OpenAIError as exc:
            raise translate_openai_error(exc, self.spec, endpoint="chat completions") from exc
        return self._completion(response, messages, (time.perf_counter() - started) * 1000)

    def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
    ) -> Iterator[Delta]:
        """The answer as the server streams it, one Delta per chunk (usage on the last, where the
        server reports it: ``stream_options.include_usage`` is asked for). Errors as ``complete``'s,
        also mid-stream."""
        extra = self._options(max_tokens, stop, tools, tool_choice)
        try:
            chunks = self._client.chat.completions.create(
                model=self.model,
                messages=list(messages),
                temperature=temperature,
                stream=True,
                stream_options={"include_usage": True},
                **extra,
            )
            for chunk in chunks:
                yield _delta(chunk)
        except self._openai.OpenAIError as exc:
            raise translate_openai_error(exc, self.spec, endpoint="chat completions") from exc

    def count_tokens(self, text: str) -> int:
        return self._counter.count(text)

    @staticmethod
    def _options(
        max_tokens: int | None,
        stop: Sequence[str] | None,
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: str | Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        extra: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens}
        if stop:
            extra["stop"] = list(stop)
        if tools:
            extra["tools"] = [dict(t) for t in tools]
            if tool_choice is not None:
                extra["tool_choice"] = tool_choice
        return extra

    def _response_format(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        if self.native_schema:
            # strict=False: OpenAI's strict mode refuses schemas with optional properties or open objects
            return {"type": "json_schema", "json_schema": {"name": "output", "schema": dict(schema), "strict": False}}
        return {"type": "json_object"}

    def _completion(self, response: Any, messages: Sequence[Mapping[str, Any]], latency_ms: float) -> Completion:
        choice = next(iter(getattr(response, "choices", None) or ()), None)
        message = getattr(choice, "message", None)
        if message is None:
            raise ProviderUnavailable(f"{where_of(self.spec)} answered without a choice")
        text = message.content or ""
        usage = getattr(response, "usage", None)
        if usage is not None and usage.prompt_tokens is not None and usage.completion_tokens is not None:
            prompt_tokens, completion_tokens = usage.prompt_tokens, usage.completion_tokens
        else:
            prompt_tokens = sum(MESSAGE_OVERHEAD + self.count_tokens(_text_of(m)) for m in messages)
            completion_tokens = self.count_tokens(text)
        return Completion(
            text=text,
            model=getattr(response, "model", None) or self.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=latency_ms,
            finish_reason=choice.finish_reason,
            tool_calls=tuple(_tool_call(call) for call in getattr(message, "tool_calls", None) or ()),
        )

    @functools.cached_property
    def _counter(self) -> TokenCounter:
        try:
            return get_counter(self.model)
        except (UnknownName, MissingDependency):  # no known family, or its tokenizer is not installed
            return get_counter("estimate")


def _text_of(message: Mapping[str, Any]) -> str:
    """A message's text: its content string, or the text parts of a multi-part content."""
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))


def _tool_call(call: Any) -> ToolCall:
    function = getattr(call, "function", None)
    return ToolCall(
        id=getattr(call, "id", None) or "",
        name=getattr(function, "name", None) or "",
        arguments=getattr(function, "arguments", None) or "{}",
    )


def _delta(chunk: Any) -> Delta:
    """One streamed chunk as a Delta (a chunk with no choice carries only the usage)."""
    usage = getattr(chunk, "usage", None)
    choice = next(iter(getattr(chunk, "choices", None) or ()), None)
    delta = getattr(choice, "delta", None)
    parts = tuple(
        ToolCallPart(
            index=getattr(part, "index", 0) or 0,
            id=getattr(part, "id", None),
            name=getattr(getattr(part, "function", None), "name", None),
            arguments=getattr(getattr(part, "function", None), "arguments", None) or "",
        )
        for part in getattr(delta, "tool_calls", None) or ()
    )
    return Delta(
        text=getattr(delta, "content", None) or "",
        tool_calls=parts,
        finish_reason=getattr(choice, "finish_reason", None),
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        model=getattr(chunk, "model", None),
    )
