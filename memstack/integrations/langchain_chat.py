"""A LangChain chat model over memstack's chat models: the local model or any provider string.

    llm = MemstackChatModel(model="local")                       # the in-process Qwen2.5 1.5B
    llm = MemstackChatModel(model="deepseek:deepseek-chat")      # any OpenAI-compatible preset
    llm.with_structured_output(EntityExtraction).invoke(prompt)  # memstack.llm.structured
    trim_messages(history, max_tokens=2000, token_counter=llm)   # memstack's counters

What each provider can do:

- streaming: where the model streams (``stream()``: OpenAI-compatible providers and the local
  model) token by token, with the usage on the last chunk (counted here if a server sends none);
  a model without ``stream`` (a ScriptedModel) yields its whole answer as one chunk;
- tools: OpenAI-compatible providers take ``bind_tools`` (sent as ``tools``/``tool_choice``); the
  local model does not do tool calling, and ``bind_tools`` on it raises InvalidInput (memstack's
  own tool loop, ``memstack.tool_chat``, drives it with JSON actions instead);
- structured output goes through ``memstack.llm.structured.generate`` whatever ``method`` is asked
  for: the provider's native JSON schema where it has one (a grammar on the local model), else the
  schema in the prompt, then repair and one retry; ModelOutputError if that still fails;
- token counts are memstack's counters for the model's family (``token_counter``): exact for
  OpenAI, Qwen (the local model included) and DeepSeek, the calibrated estimator otherwise.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..errors import InvalidInput, MissingDependency, ModelOutputError, UnknownName, importing
from ..llm import get_chat_model
from ..llm.base import ChatModel, Completion, Delta
from ..llm.structured import generate
from ..tokens import MESSAGE_OVERHEAD, TokenCounter, get_counter
from .langchain_tokens import count_messages, token_counter

with importing("langchain-core", "langchain"):
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.language_models import BaseChatModel, LanguageModelInput
    from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, convert_to_openai_messages
    from langchain_core.messages.ai import UsageMetadata
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
    from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool
    from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, RootModel, SecretStr

__all__ = ["MemstackChatModel"]

#: what langchain-tests and LangChain's own chat models call the tool choices
_TOOL_CHOICES = {"any": "required", "required": "required", "auto": "auto", "none": "none"}


class MemstackChatModel(BaseChatModel):
    """A ``BaseChatModel`` answering with ``memstack.llm.get_chat_model(model)``.

    ``model`` is "local" (the default, the packaged in-process model) or a provider string
    ("openai:gpt-4o-mini", "ollama:qwen3:8b", "vllm:MODEL@http://host:8000/v1"); ``client``, a
    memstack ChatModel object, is used as is instead (a ScriptedModel in tests). ``api_key``,
    ``base_url``, ``timeout``, ``max_retries`` and ``context_window`` go to an OpenAI-compatible
    provider and are ignored by the local model. A ``model=`` given at call time answers with that
    provider instead (built once per name). Errors are memstack's (``memstack.errors``).
    """

    model: str = "local"
    temperature: float = 0.0
    max_tokens: int | None = None
    stop: list[str] | None = None
    timeout: float | None = None
    max_retries: int = 2
    api_key: SecretStr | None = None
    base_url: str | None = None
    context_window: int | None = None
    #: answer ``invoke`` by streaming (LangChain's convention), where the model streams
    streaming: bool = False
    client: Any = Field(default=None, exclude=True)

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True)

    _models: dict[str, ChatModel] = PrivateAttr(default_factory=dict)

    # -- LangChain's descriptions ----------------------------------------------------------------

    @property
    def _llm_type(self) -> str:
        return "memstack"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model, "temperature": self.temperature, "max_tokens": self.max_tokens, "stop": self.stop}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params: dict[str, Any] = {
            "ls_provider": "memstack",
            "ls_model_name": kwargs.get("model") or self.model,
            "ls_model_type": "chat",
            "ls_temperature": kwargs.get("temperature", self.temperature),
        }
        if (max_tokens := kwargs.get("max_tokens", self.max_tokens)) is not None:
            params["ls_max_tokens"] = max_tokens
        if stop := stop or self.stop:
            params["ls_stop"] = list(stop)
        return params

    # -- answering ------------------------------------------------------------------------------

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any
    ) -> ChatResult:
        if kwargs.get("memstack_schema") is not None:
            return ChatResult(generations=[ChatGeneration(message=self._structured(messages, kwargs))])
        if self.streaming and self._streams(kwargs.get("model")):
            chunks = list(self._stream(messages, stop, run_manager, **kwargs))
            message = functools.reduce(lambda a, b: a + b, (c.message for c in chunks))
            return ChatResult(generations=[ChatGeneration(message=_as_message(message))])
        chat = self._chat(kwargs.get("model"))
        completion = _complete(chat, _openai_messages(messages), **self._options(stop, kwargs))
        return ChatResult(generations=[ChatGeneration(message=_ai_message(completion, chat, stop or self.stop))])

    def _stream(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        chat = self._chat(kwargs.get("model"))
        openai_messages = _openai_messages(messages)
        options = self._options(stop, kwargs)
        structured = kwargs.get("memstack_schema") is not None
        if structured or not callable(getattr(chat, "stream", None)):  # answers whole: one chunk
            if structured:
                message = self._structured(messages, kwargs)
            else:
                message = _ai_message(_complete(chat, openai_messages, **options), chat, stop or self.stop)
            chunk = ChatGenerationChunk(
                message=AIMessageChunk(
                    content=message.content,
                    additional_kwargs=message.additional_kwargs,
                    tool_call_chunks=[
                        {
                            "index": i,
                            "id": c["id"],
                            "name": c["name"],
                            "args": json.dumps(c["args"], ensure_ascii=False),
                            "type": "tool_call_chunk",
                        }
                        for i, c in enumerate(message.tool_calls)
                    ],
                    usage_metadata=message.usage_metadata,
                    response_metadata=message.response_metadata,
                    chunk_position="last",
                )
            )
            if run_manager:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk
            return
        yield from self._relay(chat, openai_messages, options, run_manager)

    def _relay(
        self, chat: Any, messages: list[dict[str, Any]], options: dict[str, Any], run_manager: CallbackManagerForLLMRun | None
    ) -> Iterator[ChatGenerationChunk]:
        """The provider's stream as LangChain chunks, each as it comes, then an empty last one
        (``chunk_position="last"``) with the usage counted here if the server sent none."""
        text, usage_seen = [], False
        for delta in chat.stream(messages, **options):
            usage = _usage(delta.prompt_tokens, delta.completion_tokens or 0) if delta.prompt_tokens is not None else None
            usage_seen = usage_seen or usage is not None
            text.append(delta.text)
            chunk = ChatGenerationChunk(message=_chunk_message(delta, usage))
            if run_manager and delta.text:
                run_manager.on_llm_new_token(delta.text, chunk=chunk)
            yield chunk
        usage = None
        if not usage_seen:
            prompt = sum(MESSAGE_OVERHEAD + chat.count_tokens(_text(m.get("content"))) for m in messages)
            usage = _usage(prompt, chat.count_tokens("".join(text)))
        yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=usage, chunk_position="last"))

    def _options(self, stop: list[str] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        options: dict[str, Any] = {
            "temperature": kwargs.get("temperature", self.temperature),
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
        }
        if stop := stop or self.stop:
            options["stop"] = list(stop)
        if kwargs.get("tools"):
            options["tools"] = kwargs["tools"]
            if kwargs.get("tool_choice") is not None:
                options["tool_choice"] = kwargs["tool_choice"]
        return options

    def _streams(self, override: str | None) -> bool:
        return callable(getattr(self._chat(override), "stream", None))

    def _chat(self, override: str | None = None) -> ChatModel:
        """The memstack chat model for ``override`` (a call's ``model=``) or this model's, built once."""
        if self.client is not None and not override:
            return self.client
        name = override or self.model
        if name not in self._models:
            self._models[name] = get_chat_model(name, **self._provider_options(name))
        return self._models[name]

    def _provider_options(self, name: str) -> dict[str, Any]:
        if name.strip().lower() == "local":
            return {}
        options: dict[str, Any] = {"max_retries": self.max_retries}
        for key in ("base_url", "timeout", "context_window"):
            if getattr(self, key) is not None:
                options[key] = getattr(self, key)
        if self.api_key is not None:
            options["api_key"] = self.api_key.get_secret_value()
        return options

    # -- tools and structured output ------------------------------------------------------------

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | bool | Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Tools for an OpenAI-compatible provider, sent with every call (``tool_choice``: "auto",
        "any"/"required", "none", a tool's name, True for any, or OpenAI's dict). The local model
        does not call tools: InvalidInput."""
        if not self._takes_tools():
            raise InvalidInput(
                f"{self.model!r} does not support tool calling: use an OpenAI-compatible provider string, "
                "or memstack's tool loop (memstack.tool_chat), which drives the local model with JSON actions",
                field="tools",
            )
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        choice = _tool_choice(tool_choice, formatted)
        return super().bind(tools=formatted, **({"tool_choice": choice} if choice is not None else {}), **kwargs)

    def _takes_tools(self) -> bool:
        chat = self.client if self.client is not None else None
        if chat is None:
            return self.model.strip().lower() != "local"
        return "tools" in _parameters(chat.complete)

    def with_structured_output(
        self, schema: Any, *, method: str = "json_schema", include_raw: bool = False, strict: bool | None = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, Any]:
        """A runnable answering an instance of ``schema`` (a pydantic model; a TypedDict or a JSON
        schema dict gives a dict) through ``memstack.llm.structured.generate``: the schema is
        enforced natively where the provider can (the local model's grammar), else put in the
        prompt, then repaired and retried once; ModelOutputError if that still fails. Every
        ``method`` takes this one path; ``strict`` is accepted for compatibility. ``include_raw``:
        ``{"raw", "parsed", "parsing_error"}``, the error then caught instead of raised.
        ``retries`` and ``language`` ("zh": Chinese instructions) go to ``generate``. The call goes
        through this chat model (callbacks and tracing see it, with ``ls_structured_output_format``);
        a stream yields the whole value once."""
        if method not in ("json_schema", "function_calling", "json_mode"):
            raise InvalidInput(f"unknown structured output method {method!r}", field="method")
        if kwargs.keys() - {"retries", "language"}:
            raise InvalidInput(f"unexpected arguments {sorted(kwargs.keys() - {'retries', 'language'})}", field="kwargs")
        target, unwrap = _as_model(schema)
        bound = self.bind(
            memstack_schema=target,
            memstack_options=dict(kwargs),
            ls_structured_output_format={"kwargs": {"method": method, "strict": strict}, "schema": convert_to_json_schema(schema)},
        )

        def parsed(message: BaseMessage) -> Any:
            value = message.additional_kwargs["parsed"]
            return value.root if unwrap else value

        if not include_raw:
            return bound | RunnableLambda(parsed, name="MemstackStructuredOutput")

        def with_raw(value: LanguageModelInput, config: RunnableConfig) -> dict[str, Any]:
            try:
                raw = bound.invoke(value, config)
            except ModelOutputError as exc:
                return {"raw": AIMessage(content=exc.raw or ""), "parsed": None, "parsing_error": exc}
            return {"raw": raw, "parsed": parsed(raw), "parsing_error": None}

        return RunnableLambda(with_raw, name="MemstackStructuredOutput")

    def _structured(self, messages: list[BaseMessage], kwargs: Mapping[str, Any]) -> AIMessage:
        """The answer to a ``with_structured_output`` call: the accepted output's text, the value
        in ``additional_kwargs["parsed"]``, the usage of every attempt."""
        chat = self._chat(kwargs.get("model"))
        result = generate(
            chat,
            _openai_messages(messages),
            kwargs["memstack_schema"],
            temperature=kwargs.get("temperature", self.temperature),
            max_tokens=kwargs.get("max_tokens", self.max_tokens),
            **kwargs.get("memstack_options", {}),
        )
        last = result.calls[-1]
        message = _ai_message(last, chat, None)
        message.usage_metadata = _usage(sum(c.prompt_tokens for c in result.calls), sum(c.completion_tokens for c in result.calls))
        message.additional_kwargs["parsed"] = result.value
        message.response_metadata["attempts"] = len(result.calls)
        message.response_metadata["repaired"] = result.repaired
        return message

    # -- token counts ---------------------------------------------------------------------------

    def get_num_tokens(self, text: str) -> int:
        """Tokens of ``text`` under memstack's counter for this model's family (``token_counter``)."""
        return self._counter().count(text)

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Sequence[Any] | None = None) -> int:
        """Tokens of ``messages`` as memstack's budgets count them (text plus ``MESSAGE_OVERHEAD`` a
        message), plus each tool's JSON schema as text."""
        counter = self._counter()
        total = count_messages(counter, messages)
        for tool in tools or ():
            total += counter.count(json.dumps(convert_to_openai_tool(tool), ensure_ascii=False))
        return total

    def _counter(self) -> TokenCounter:
        """The family's counter; a provider's model of no known family (or without its tokenizer
        installed) is counted by the estimator, as OpenAIChat counts it."""
        try:
            return token_counter(self.model).counter
        except (UnknownName, MissingDependency):
            return get_counter("estimate")


# -- conversions --------------------------------------------------------------------------------


def _openai_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    converted = convert_to_openai_messages(list(messages))
    return [_plain_content(m) for m in converted]


def _plain_content(message: dict[str, Any]) -> dict[str, Any]:
    """A content list of text parts only becomes one string: every chat template takes that."""
    content = message.get("content")
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        message = {**message, "content": "".join(p.get("text", "") for p in content)}
    return message


def _complete(chat: Any, messages: list[dict[str, Any]], **options: Any) -> Completion:
    """``chat.complete`` with the options it takes; ``stop`` is applied here for a model without it,
    and ``tools`` refused by one without them."""
    taken = _parameters(chat.complete)
    if "tools" in options and "tools" not in taken:
        raise InvalidInput(f"{getattr(chat, 'name', 'this model')!r} does not support tool calling", field="tools")
    return chat.complete(messages, **{k: v for k, v in options.items() if k in taken})


@functools.lru_cache(maxsize=64)
def _parameters_of(function: Any) -> frozenset[str]:
    return frozenset(inspect.signature(function).parameters)


def _parameters(method: Any) -> frozenset[str]:
    return _parameters_of(getattr(method, "__func__", method))


def _ai_message(completion: Completion, chat: Any, stop: Sequence[str] | None) -> AIMessage:
    text = _cut_at_stop(completion.text, stop)
    return AIMessage(
        content=text,
        tool_calls=[{"id": c.id, "name": c.name, "args": _arguments(c.arguments), "type": "tool_call"} for c in completion.tool_calls],
        usage_metadata=_usage(completion.prompt_tokens, completion.completion_tokens),
        response_metadata={
            "model_name": completion.model or getattr(chat, "name", ""),
            "finish_reason": completion.finish_reason,
            "model_provider": "memstack",
        },
    )


def _chunk_message(delta: Delta, usage: UsageMetadata | None) -> AIMessageChunk:
    metadata: dict[str, Any] = {"model_provider": "memstack"}
    if delta.finish_reason:
        metadata["finish_reason"] = delta.finish_reason
    if delta.model:
        metadata["model_name"] = delta.model
    return AIMessageChunk(
        content=delta.text,
        tool_call_chunks=[
            {"index": p.index, "id": p.id, "name": p.name, "args": p.arguments, "type": "tool_call_chunk"} for p in delta.tool_calls
        ],
        usage_metadata=usage,
        response_metadata=metadata,
    )


def _as_message(chunk: AIMessageChunk) -> AIMessage:
    return AIMessage(
        content=chunk.content,
        tool_calls=chunk.tool_calls,
        usage_metadata=chunk.usage_metadata,
        response_metadata=chunk.response_metadata,
        id=chunk.id,
    )


def _usage(prompt: int, completion: int) -> UsageMetadata:
    return UsageMetadata(input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion)


def _cut_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """``text`` up to the first stop sequence (providers that honour ``stop`` never send one)."""
    cuts = [i for i in (text.find(s) for s in stop or () if s) if i >= 0]
    return text[: min(cuts)] if cuts else text


def _arguments(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"__raw__": arguments}  # shown, not dropped: the model wrote arguments that do not parse
    return value if isinstance(value, dict) else {"__raw__": arguments}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or () if isinstance(p, dict))


def _tool_choice(choice: str | bool | Mapping[str, Any] | None, tools: list[dict[str, Any]]) -> Any:
    if choice is None or choice is False:
        return None
    if choice is True:
        return "required"
    if isinstance(choice, Mapping):
        return dict(choice)
    if choice in _TOOL_CHOICES:
        return _TOOL_CHOICES[choice]
    names = [t["function"]["name"] for t in tools]
    if choice not in names:
        raise InvalidInput(f"tool_choice {choice!r} names no bound tool; bound: {', '.join(names)}", field="tool_choice")
    return {"type": "function", "function": {"name": choice}}


def _as_model(schema: Any) -> tuple[type[BaseModel], bool]:
    """``(model class, unwrap)``: a pydantic model as is; a TypedDict or JSON schema dict inside a
    RootModel whose schema is the given one, unwrapped to a dict after validation."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema, False
    if isinstance(schema, Mapping):
        json_schema = convert_to_json_schema(dict(schema))

        class JsonObject(RootModel[dict[str, Any]]):
            @classmethod
            def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
                return json_schema

        JsonObject.__name__ = str(json_schema.get("title") or "JsonObject")
        return JsonObject, True
    try:
        wrapped = RootModel[schema]  # type: ignore[valid-type]
    except TypeError as exc:
        raise InvalidInput(
            f"cannot use {schema!r} as a structured output schema: give a pydantic model, a TypedDict or a JSON schema", field="schema"
        ) from exc
    return wrapped, True
