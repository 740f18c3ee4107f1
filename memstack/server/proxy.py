"""The OpenAI-compatible memory proxy: ``POST /v1/chat/completions`` and ``GET /v1/models``.

An app gains memory by changing its base URL. For each call:

1. whose: the user from ``X-Memstack-User`` or the request's ``user`` (400 without either); the
   thread from ``X-Memstack-Thread``, else one per user per UTC day (``YYYY-MM-DD``);
2. store what is new: the request's trailing messages the thread does not hold yet (``resend``),
   so a client that resends its whole history stores each message once;
3. memory: ``Memory.context()`` with the client's last user message as the query builds the one
   system message of memory sections, placed after the client's own system messages; then the
   thread's turns from before the client's history, as the stack's conversation layers (window,
   summary-buffer...) keep them, for the clients that send only their newest message (turns the
   client resent are its own, never sent twice); then the client's history as sent. The whole is
   trimmed, oldest turns first, only when it would exceed the budget (``prompt.fit``);
4. answer: forward upstream (``upstream``), relay the answer or its stream, then store it (before
   the stream's ``[DONE]``), which queues the layers' work. A dead or slow upstream is a 502/504
   JSON error, and the user's message stays stored.
5. cost: the answer's tokens go to the usage log as layer ``answer`` (the upstream's counts, else
   counted here). The tenant's answer budget (``memstack init --answer-budget``) is checked before
   step 1: a user past it gets 429 with ``Retry-After`` (seconds to the period's end) and nothing is
   stored. The layers' budget never blocks an answer (``memstack.ceiling``).

The memory's calls are the app's AsyncMemory's (``memstack.aio``), awaited: the event loop that
relays streams never waits on the store.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse

from ..aio import AsyncMemory
from ..ceiling import ANSWER_LAYER
from ..errors import Conflict, InvalidInput, MemstackError
from ..replaced import REPLACES, visible
from ..types import Message, Scope, UsageRecord, utcnow
from . import copies, idempotency
from .deps import Tenant
from .errors import ApiError, UpstreamTimeout, error_body
from .metrics import Metrics
from .prompt import MEMORY_MESSAGE_ID, ClientMessage, Outgoing, fit, last_user_text, parse_client, split_system
from .resend import STORED_ROLES, new_messages
from .schemas import ChatRequest, ModelList, error_responses
from .upstream import Upstream, chunks_of

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible proxy"], responses=error_responses(400, 401, 413, 422, 429, 502, 504))
log = logging.getLogger("memstack.server")

#: stored messages read beyond the request's length, for answers the client has not seen
_CONFLICT_RETRIES = 8
#: the response header of an unkeyed request answered as a copy of an identical one (a double submit)
DOUBLE_SUBMIT = "X-Memstack-Double-Submit"
_TAIL_SLACK = 16


@dataclass(frozen=True, slots=True)
class Who:
    tenant: str
    user_id: str
    thread_id: str

    def ids(self) -> dict[str, str]:
        return {"tenant": self.tenant, "user_id": self.user_id, "thread_id": self.thread_id}


@dataclass(frozen=True, slots=True)
class Prepared:
    outgoing: Outgoing
    store_answer: bool
    #: the stored answer that the answer to this request replaces (a regenerate)
    replaces: tuple[str, ...] = ()
    #: the seq of the message the answer follows (see ``Proxy._store_answer``)
    answers: int | None = None


@dataclass(frozen=True, slots=True)
class Stored:
    """What storing a request's new messages found: whether to store the answer, and the seq of
    the thread's copy of the request's first message (None: the request holds no history)."""

    store_answer: bool
    client_from: int | None
    replaces: tuple[str, ...] = ()
    #: the seq of the thread's last message when the request was stored: what its answer follows
    answers: int | None = None


class Proxy:
    """The proxy's work for one app: Memory on one side, the upstream model on the other.

    ``max_tokens`` bounds the request sent upstream, and never more than the model's window minus
    the answer's tokens (the request's ``max_tokens``, else ``completion_tokens``).
    """

    def __init__(
        self, memory: AsyncMemory, upstream: Upstream, metrics: Metrics, *, max_tokens: int | None, completion_tokens: int = 1024,
        double_submit_window: float = copies.DEFAULT_WINDOW,
    ) -> None:  # fmt: skip
        self.memory = memory
        self.double_submit_window = double_submit_window
        self.upstream = upstream
        self.metrics = metrics
        self.max_tokens = max_tokens
        self.completion_tokens = completion_tokens

    # ---- before the call ------------------------------------------------------------------------

    async def prepare(self, who: Who, body: ChatRequest) -> Prepared:
        client = parse_client([m.model_dump(exclude_none=True) for m in body.messages])
        stored = await self._store_new(who, client)
        system, convo = split_system(client)
        budget = self._budget(body)
        ctx = await self.memory.context(**who.ids(), query=last_user_text(client), max_tokens=budget)
        memory = next((m for m in ctx.messages if m.id == MEMORY_MESSAGE_ID), None)
        earlier = earlier_turns(ctx.messages, stored.client_from)
        return Prepared(
            fit(system, memory, convo, budget, self.memory.counter, earlier=earlier), stored.store_answer, stored.replaces, stored.answers
        )

    async def _store_new(self, who: Who, client: list[ClientMessage]) -> Stored:
        """Store what the thread lacks of the request's history. The read, the match and the
        write are one conditional append in the store (``expect_last``): when another request
        (in this process or another) wrote to the thread in between, read and match again, so
        that any number of servers store each message once."""
        incoming = [c.message for c in client if c.message.role in STORED_ROLES]
        for _ in range(_CONFLICT_RETRIES):
            raw = await self.memory.history(**who.ids(), last=len(incoming) + _TAIL_SLACK, order="append", replaced="include")
            last = raw[-1].seq if raw else None
            tail = [m for m in visible(raw) if m.role in STORED_ROLES]
            plan = new_messages(tail, incoming)
            try:
                added = await self.memory.add([m.to_openai() for m in plan.new], **who.ids(), expect_last=last) if plan.new else []
            except Conflict:
                continue
            first = tail[plan.first] if plan.first is not None else added[0] if added else None
            return Stored(plan.store_answer, first.seq if first is not None else None, plan.replaces, added[-1].seq if added else last)
        raise Conflict(f"thread {who.thread_id!r} kept changing while its request was stored; retry the request")

    def _budget(self, body: ChatRequest) -> int:
        answer = body.max_completion_tokens or body.max_tokens or self.completion_tokens
        room = self.upstream.context_window - answer
        budget = room if self.max_tokens is None else min(self.max_tokens, room)
        if budget <= 0:
            raise InvalidInput(
                f"max_tokens={answer} leaves no room for the prompt in the model's window of {self.upstream.context_window}",
                field="max_tokens",
            )
        return budget

    # ---- the call ------------------------------------------------------------------------------

    async def answer(self, who: Who, body: ChatRequest, key: str | None = None) -> JSONResponse | StreamingResponse:
        """The upstream's answer with memory. A copy of a request being answered, or answered
        already (the same ``Idempotency-Key`` in this thread, or without a key a double submit),
        answers that answer again and stores nothing (``copies``)."""
        settled = await copies.settle(
            self.memory, self._scope(who), body.model_dump(mode="json", exclude_none=True), key,
            window=self.double_submit_window, waiting=lambda: self.metrics.copies.labels("waited").inc(),
        )  # fmt: skip
        if isinstance(settled, copies.Replay):
            self.metrics.copies.labels("replayed").inc()
            return self._replay(who, body, settled.response, keyed=key is not None)
        over = await self.memory.run_sync(self.memory.memory.ceiling.answer_wait, who.tenant, who.user_id)
        if over is not None:
            await settled.release()
            return over_budget(over.reason, over.retry_in)
        try:
            return await self._answer(who, body, settled)
        except BaseException:
            await settled.release()
            raise

    async def _answer(self, who: Who, body: ChatRequest, held: copies.Held) -> JSONResponse | StreamingResponse:
        prepared = await self.prepare(who, body)
        headers = {
            "X-Memstack-User": quote(who.user_id, safe=""),
            "X-Memstack-Thread": quote(who.thread_id, safe=""),
            "X-Memstack-Memory-Tokens": str(prepared.outgoing.memory_tokens),
        }
        params = body.params()
        started = time.perf_counter()
        try:
            if body.stream:
                chunks = await self.upstream.open_stream(prepared.outgoing.messages, params)
                return StreamingResponse(
                    self._relay(who, chunks, prepared, started, held),
                    media_type="text/event-stream",
                    headers={**headers, "Cache-Control": "no-cache"},
                )
            answer = await self.upstream.complete(prepared.outgoing.messages, params)
        except MemstackError as exc:
            self._observe(exc, started)
            raise
        self._observe(None, started)
        counted = answer.get("usage") or {}
        await self._meter(who, prepared, counted.get("prompt_tokens"), counted.get("completion_tokens"), started, _text_of(answer))
        if prepared.store_answer:
            message = ((answer.get("choices") or [{}])[0]).get("message") or {}
            kept = await self._store_answer(who, message.get("content") or "", message.get("tool_calls") or [], prepared)
            if kept is not None:  # a copy of this request answered first (its claim was lost, see copies)
                answer = answering_with(answer, kept)
        await held.finish(answer)
        return JSONResponse(answer, headers=headers)

    def _scope(self, who: Who) -> Scope:
        return self.memory.scope(who.user_id, who.thread_id, tenant=who.tenant)

    def _replay(self, who: Who, body: ChatRequest, answer: dict[str, Any], *, keyed: bool) -> JSONResponse | StreamingResponse:
        """The answer of another copy of this request, sent again (``Idempotent-Replayed: true``
        for a retried key, ``X-Memstack-Double-Submit: true`` for an unkeyed copy)."""
        headers = {
            "X-Memstack-User": quote(who.user_id, safe=""),
            "X-Memstack-Thread": quote(who.thread_id, safe=""),
            (idempotency.REPLAYED if keyed else DOUBLE_SUBMIT): "true",
        }
        if not body.stream:
            return JSONResponse(answer, headers=headers)

        async def events() -> AsyncIterator[str]:
            async for chunk in chunks_of(answer, include_usage=False):
                yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream", headers={**headers, "Cache-Control": "no-cache"})

    async def _relay(
        self, who: Who, chunks: AsyncIterator[dict[str, Any]], prepared: Prepared, started: float, held: copies.Held
    ) -> AsyncIterator[str]:
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        try:
            async for chunk in chunks:
                _collect(chunk, text, calls)
                yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
            self._observe(None, started)
            await self._meter(who, prepared, None, None, started, "".join(text))
            kept = None
            if prepared.store_answer:
                kept = await self._store_answer(who, "".join(text), [calls[i] for i in sorted(calls)], prepared)
            message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
            if calls:
                message["tool_calls"] = [calls[i] for i in sorted(calls)]
            whole = {
                "id": f"chatcmpl-{who.thread_id}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "memstack",
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            }
            await held.finish(answering_with(whole, kept) if kept is not None else whole)
        except MemstackError as exc:  # the stream has started: the error is its last event
            self._observe(exc, started)
            log.warning("stream for %s/%s failed: %s: %s", who.user_id, who.thread_id, type(exc).__name__, exc)
            yield f"data: {json.dumps(error_body(exc.code, str(exc)), ensure_ascii=False)}\n\n"
            return
        finally:
            if not held.done:  # failed, or the client went away mid-stream: a waiting copy answers instead
                await held.release()
        yield "data: [DONE]\n\n"

    async def _store_answer(self, who: Who, text: str, tool_calls: list[dict[str, Any]], prepared: Prepared) -> Message | None:
        """Store the answer after the message it answers. When the thread has grown since (a
        double submit: the same request twice at once, in any process), the answer is stored
        only if no answer followed that message meanwhile: the first answer stays, the second
        is the client's discarded one; anything else that arrived keeps its place. Returns the
        first answer when this one is discarded, else None."""
        if not (text.strip() or tool_calls):
            return None
        message = {"role": "assistant", "content": text, **({"tool_calls": tool_calls} if tool_calls else {})}
        if prepared.replaces:
            message["metadata"] = {REPLACES: list(prepared.replaces)}
        try:
            await self.memory.add(message, **who.ids(), expect_last=prepared.answers)
        except Conflict:
            since = await self.memory.run_sync(self.memory.store.history.read, self._scope(who), after=prepared.answers or 0)
            first = next((m for m in since if m.role == "assistant"), None)
            if first is not None:
                log.info("not storing a second answer to %s/%s (a double submit)", who.user_id, who.thread_id)
                return first
            await self.memory.add(message, **who.ids())
        return None

    async def _meter(self, who: Who, prepared: Prepared, prompt: int | None, completion: int | None, started: float, text: str) -> None:
        """Log the answer's tokens as layer ``answer`` (the upstream's counts, else counted here),
        on a store with a usage log: what the answer budget and ``memstack usage`` read."""
        log_ = getattr(self.memory.store, "usage", None)
        if log_ is None:
            return
        count = self.memory.counter.count
        if prompt is None:
            prompt = sum(count(m["content"]) for m in prepared.outgoing.messages if isinstance(m.get("content"), str))
        if completion is None:
            completion = count(text)
        row = UsageRecord(
            self._scope(who), ANSWER_LAYER, self.upstream.model, int(prompt), int(completion), (time.perf_counter() - started) * 1000
        )
        await self.memory.run_sync(log_.record, [row])

    def _observe(self, error: MemstackError | None, started: float) -> None:
        outcome = "ok" if error is None else "timeout" if isinstance(error, UpstreamTimeout) else "error"
        self.metrics.upstream.labels(outcome).inc()
        self.metrics.upstream_latency.observe(time.perf_counter() - started)


def answering_with(answer: dict[str, Any], kept: Message) -> dict[str, Any]:
    """The completion ``answer`` with the thread's ``kept`` answer as its message: what a keyed
    request answers when a copy of it answered first (its Idempotency-Key promises one answer)."""
    message = {k: v for k, v in kept.to_openai().items() if k in ("role", "content", "tool_calls")}
    choices = [{**(answer.get("choices") or [{}])[0], "message": message}]
    return {**answer, "choices": choices}


def over_budget(reason: str, retry_in: float) -> JSONResponse:
    """429 in the error shape (with OpenAI's ``type``), ``Retry-After`` the seconds to the period's
    end, and ``x-should-retry: false`` so that the openai SDK does not retry for hours."""
    body = error_body("answer_budget_exceeded", reason)
    body["error"]["type"] = "insufficient_quota"
    headers = {"Retry-After": str(max(1, math.ceil(retry_in))), "x-should-retry": "false"}
    return JSONResponse(body, status_code=429, headers=headers)


def _text_of(answer: dict[str, Any]) -> str:
    return str((((answer.get("choices") or [{}])[0]).get("message") or {}).get("content") or "")


def earlier_turns(context: Sequence[Message], client_from: int | None) -> list[Message]:
    """The conversation of ``Memory.context()`` stored before the client's own history (seq below
    ``client_from``; all of it when the client sent no history): what the thread said that this
    request does not carry. The query and the memory message (no seq) are never among them."""
    return [m for m in context if m.role != "system" and m.seq is not None and (client_from is None or m.seq < client_from)]


def _collect(chunk: dict[str, Any], text: list[str], calls: dict[int, dict[str, Any]]) -> None:
    """Gather a streamed answer: its text and its tool calls (whose arguments arrive in pieces)."""
    for choice in chunk.get("choices") or []:
        if choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta") or {}
        if delta.get("content"):
            text.append(delta["content"])
        for part in delta.get("tool_calls") or []:
            call = calls.setdefault(part.get("index", 0), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
            call["id"] = part.get("id") or call["id"]
            fn = part.get("function") or {}
            call["function"]["name"] += fn.get("name") or ""
            call["function"]["arguments"] += fn.get("arguments") or ""


def proxy_of(request: Request) -> Proxy:
    return request.app.state.proxy


def who_of(tenant: str, body: ChatRequest, user_header: str | None, thread_header: str | None) -> Who:
    user = user_header or body.user
    if not user:
        raise ApiError(
            400, "missing_user", "say whose memory this is: the request's 'user' field or the X-Memstack-User header", field="user"
        )
    return Who(tenant, user, thread_header or utcnow().date().isoformat())


@router.get("/models", summary="The upstream model, as OpenAI's model list")
async def list_models(request: Request, tenant: Tenant) -> ModelList:
    return ModelList.of(proxy_of(request).upstream.model)


@router.post(
    "/chat/completions",
    summary="A chat completion with the user's memory (streamed as SSE when stream=true)",
    responses={
        200: {
            "description": "a chat.completion object, or with stream=true a text/event-stream of chat.completion.chunk objects",
            "content": {"text/event-stream": {}},
        }
    },
)
async def chat_completions(
    request: Request,
    body: ChatRequest,
    tenant: Tenant,
    x_memstack_user: Annotated[str | None, Header(description="the user (else the request's 'user' field)")] = None,
    x_memstack_thread: Annotated[str | None, Header(description="the thread (default: one per user per UTC day, YYYY-MM-DD)")] = None,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=idempotency.HEADER,
            description="a retried request with the same key (in the same thread) stores nothing and answers what the first one did",
        ),
    ] = None,
) -> Any:
    return await proxy_of(request).answer(
        who_of(tenant, body, x_memstack_user, x_memstack_thread), body, idempotency.checked(idempotency_key)
    )
