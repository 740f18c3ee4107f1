"""Every method of the client as a sans-IO step (``transport.Step``): ``Memory``'s signature, the
route it calls, and the answer turned into the library's values. ``Client`` and ``AsyncClient``
derive their methods from these, so the two cannot drift apart.

What differs from ``Memory``, by decision:

- The tenant is the API key's: ``tenant=`` is accepted for the signature's sake, None or the
  key's own (another is InvalidInput); ``agent_id=`` (which the REST API has not) and
  ``add(expect_last=)`` are refused unless None, as are a ``context``'s layer options other than
  ``k``, ``top_k``, ``buffer_tokens`` and ``hops``.
- Where ``Memory`` answers empty for a user or thread the tenant does not have (``history``,
  ``threads``, ``memories``, ``audit``, ``usage``, ``export``; ``forget``: 0), so does the client:
  the REST API's 404 ``user_not_found``/``thread_not_found`` becomes that empty answer.
- ``forget`` of a whole user counts the rows deleted, which through the service include the
  answer the server kept for each of the user's adds (their ``Idempotency-Key``).
- ``import_`` sends each user's records in one request (the route is per user): each user's are
  validated before any of them is written, and an error names the record's place in the whole list.
- ``flush`` runs the user's ready jobs on the server (a user is required: the tenant's other
  users are not the client's to run); ``pending()`` without a user is the server's whole queue.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ..errors import InvalidInput, NotFound
from ..jobs import JobReport
from ..replaced import check_replaced
from ..saved import NOTES_THREAD
from ..stores import ANY
from ..tokens import TokenCounter
from ..types import AuditEvent, Context, Hit, Message, Record, Scope, SearchFilter, ThreadInfo, Unit, UsageRecord, in_range
from . import values
from .transport import Keyed, Request, Step

MessageLike = Message | Mapping[str, Any] | str
#: a context's layer options that the REST API takes
CONTEXT_OPTIONS = ("k", "top_k", "buffer_tokens", "hops")
_UNSET: Any = object()
_RECORD = re.compile(r"^record (\d+): ")
_FIELD = re.compile(r"^records\[(\d+)\]")


# ---- the scope and the wire ---------------------------------------------------------------------


def _own(tenant: str | None, agent_id: str | None) -> Step[None]:
    """Nothing, for the client's own tenant (None, or the one its key names) and no agent."""
    if agent_id is not None:
        raise InvalidInput("the REST API keeps no agent_id: a Client works without one", field="agent_id")
    if tenant is not None:
        info = yield Request("GET", "/v1/retention", cached=True)
        if tenant != info["tenant"]:
            raise InvalidInput(f"a Client's tenant is its API key's ({info['tenant']!r}), not {tenant!r}", field="tenant")


def _user_path(user_id: str, thread_id: str | None = None) -> str:
    """The route prefix of a user (and thread), their ids checked as the library checks them."""
    Scope(user_id=user_id, thread_id=thread_id)  # InvalidInput naming user_id or thread_id
    path = f"/v1/users/{quote(user_id, safe='')}"
    return path if thread_id is None else f"{path}/threads/{quote(thread_id, safe='')}"


def _thread_path(user_id: str, thread_id: str) -> str:
    if thread_id is None:
        raise InvalidInput("thread_id is required here", field="thread_id")
    return _user_path(user_id, thread_id)


def _time(at: datetime | None, name: str = "at") -> str | None:
    return None if at is None else in_range(at, field_name=name).isoformat()


def _scope(user_id: str, thread_id: str | None = None) -> Step[Scope]:
    """The user's scope in the client's tenant (asked of the service once)."""
    info = yield Request("GET", "/v1/retention", cached=True)
    return Scope(user_id=user_id, thread_id=thread_id, tenant=info["tenant"])


def _wire(value: Any) -> dict[str, Any]:
    """A message as the REST API takes it (Memory.add's forms: a Message, a dict, a string)."""
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, str):
        return {"role": "user", "content": value}
    if isinstance(value, Mapping):
        out = dict(value)
        if isinstance(out.get("timestamp"), datetime):
            out["timestamp"] = in_range(out["timestamp"]).isoformat()
        if isinstance(out.get("tool_calls"), (list, tuple)):
            out["tool_calls"] = [tc.to_openai() if hasattr(tc, "to_openai") else tc for tc in out["tool_calls"]]
        return out
    raise InvalidInput(f"cannot make a message from {type(value).__name__}", field="messages")


def _sendable(message: dict[str, Any], i: int) -> dict[str, Any]:
    """The message, if JSON can carry it: else InvalidInput naming it (a NaN in its metadata, a
    lone surrogate in its text), as ``Memory.add`` refuses it, before anything is sent."""
    try:
        Request("POST", "", json=message).body()
    except InvalidInput as exc:
        raise InvalidInput(f"messages[{i}]: {exc}".replace("the request", "the message"), field=f"messages[{i}]") from None
    return message


def _as_list(messages: MessageLike | Iterable[MessageLike]) -> list[Any]:
    return [messages] if isinstance(messages, (Message, str, Mapping)) else list(messages)


# ---- writing and reading a thread ------------------------------------------------------------------


def add(
    messages: MessageLike | Iterable[MessageLike],
    *,
    user_id: str,
    thread_id: str,
    tenant: str | None = None,
    agent_id: str | None = None,
    at: datetime | None = None,
    expect_last: int | None | object = ANY,
) -> Step[list[Message]]:
    """``Memory.add`` through ``POST .../threads/{t}/messages``, with an ``Idempotency-Key`` made
    for this call: a try that is retried after the connection broke stores nothing twice."""
    yield from _own(tenant, agent_id)
    if expect_last is not ANY:
        raise InvalidInput("the REST API adds without a condition: expect_last is for a Memory", field="expect_last")
    path = _thread_path(user_id, thread_id) + "/messages"
    body: dict[str, Any] = {"messages": [_sendable(_wire(m), i) for i, m in enumerate(_as_list(messages))]}
    if at is not None:
        body["at"] = _time(at)
    reply: Keyed = yield Request("POST", path, json=body, keyed=True)
    return [] if reply.stale else [values.message(m) for m in reply.answer["stored"]]


def history(
    *,
    user_id: str,
    thread_id: str,
    tenant: str | None = None,
    agent_id: str | None = None,
    at: datetime | None = None,
    last: int | None = None,
    order: str = "time",
    replaced: str = "exclude",
) -> Step[list[Message]]:
    """``Memory.history`` through ``GET .../threads/{t}/messages``: without the answers a
    regenerated one replaced, unless ``replaced="include"``; [] for a thread the user lacks."""
    yield from _own(tenant, agent_id)
    if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 0):
        raise InvalidInput("last must be a whole number of at least 0", field="last")
    if order not in ("time", "append"):
        raise InvalidInput(f"order must be time or append, not {order!r}", field="order")
    check_replaced(replaced)
    params = {
        "at": _time(at),
        "last": last,
        "order": None if order == "time" else order,
        "replaced": None if replaced == "exclude" else replaced,
    }
    if last == 0:
        return []
    try:
        answer = yield Request("GET", _thread_path(user_id, thread_id) + "/messages", params=params)
    except NotFound:
        return []
    return [values.message(m) for m in answer]


def threads(*, user_id: str, tenant: str | None = None, agent_id: str | None = None) -> Step[list[ThreadInfo]]:
    """``Memory.threads`` through ``GET .../threads``, most recent activity first."""
    yield from _own(tenant, agent_id)
    try:
        answer = yield Request("GET", _user_path(user_id) + "/threads")
    except NotFound:
        return []
    return [values.thread(t) for t in answer]


def context(
    *,
    user_id: str,
    thread_id: str,
    query: str | None = None,
    at: datetime | None = None,
    strategy: str | Sequence[str] | None = None,
    max_tokens: int | None = _UNSET,
    counter: str | TokenCounter | None = None,
    tenant: str | None = None,
    agent_id: str | None = None,
    preset: str | None = None,
    **options: Any,
) -> Step[Context]:
    """``Memory.context`` through ``POST .../threads/{t}/context``: the same ``Context``.
    ``max_tokens`` left out: the server's budget; None: unbounded."""
    yield from _own(tenant, agent_id)
    unknown = sorted(set(options) - set(CONTEXT_OPTIONS))
    if unknown:
        raise InvalidInput(f"the service takes the layer options {', '.join(CONTEXT_OPTIONS)}; not {', '.join(unknown)}", field=unknown[0])
    body: dict[str, Any] = {"query": query, "at": _time(at), "preset": preset, **{k: v for k, v in options.items() if v is not None}}
    body["strategy"] = strategy if strategy is None or isinstance(strategy, str) else ",".join(strategy)
    body["counter"] = counter if counter is None or isinstance(counter, str) else counter.name
    if max_tokens is not _UNSET:
        body["max_tokens"] = max_tokens
    answer = yield Request(
        "POST",
        _thread_path(user_id, thread_id) + "/context",
        json={k: v for k, v in body.items() if v is not None or k == "max_tokens"},
        safe=True,
    )
    return values.context(answer)


def search(
    query: str,
    *,
    user_id: str,
    k: int | None = None,
    at: datetime | None = None,
    where: SearchFilter | None = None,
    tenant: str | None = None,
    agent_id: str | None = None,
    **options: Any,
) -> Step[list[Hit]]:
    """``Memory.search`` through ``POST .../search``; ``where`` may name threads only."""
    yield from _own(tenant, agent_id)
    if options:
        raise InvalidInput(
            f"the service searches with its own retrieval options; not {', '.join(sorted(options))}", field=sorted(options)[0]
        )
    if where is not None and (where.categories or where.kinds or where.since or where.until):
        raise InvalidInput("the service filters a search by thread_ids only", field="where")
    path = _user_path(user_id) + "/search"
    body = {"query": query, "k": k, "at": _time(at), "thread_ids": list(where.thread_ids) if where and where.thread_ids else None}
    answer = yield Request("POST", path, json={k: v for k, v in body.items() if v is not None}, safe=True)
    user = yield from _scope(user_id)
    return [values.hit(h, user) for h in answer]


# ---- model-made memory and its corrections ---------------------------------------------------------


def memories(
    kind: str, *, user_id: str, thread_id: str | None = None, tenant: str | None = None, agent_id: str | None = None
) -> Step[list[Record]]:
    """``Memory.memories`` through ``GET .../memories/{kind}``."""
    yield from _own(tenant, agent_id)
    try:
        answer = yield Request("GET", f"{_user_path(user_id)}/memories/{quote(kind, safe='')}", params={"thread_id": thread_id})
    except NotFound:
        return []
    scope = yield from _scope(user_id, thread_id if kind == "summary" else None)
    return [values.record(r, scope) for r in answer]


def delete_memory(kind: str, key: str, *, user_id: str, thread_id: str | None = None) -> Step[int]:
    """Retire the current record of a kind (audited; its history is kept): 1, or NotFound."""
    path = f"{_user_path(user_id)}/memories/{quote(kind, safe='')}/{quote(key, safe='')}"
    answer = yield Request("DELETE", path, params={"thread_id": thread_id})
    return int(answer["deleted"])


def get_state(*, user_id: str, key: str | None = None) -> Step[Any]:
    """The user's JSON state as one object (key -> value), or one key's value (None: not set)."""
    base = _user_path(user_id) + "/state"
    try:
        answer = yield Request("GET", base if key is None else f"{base}/{quote(key, safe='')}")
    except NotFound:
        return {} if key is None else None
    return answer if key is None else answer["value"]


def set_state(key: str, value: Any, *, user_id: str) -> Step[Record]:
    """Set a key of the user's state (audited); the current record, its value wrapped as stored."""
    answer = yield Request("PUT", f"{_user_path(user_id)}/state/{quote(key, safe='')}", json={"value": value})
    scope = yield from _scope(user_id)
    return values.record(answer, scope)


def set_attribute(entity: str, attribute: str, value: str, *, user_id: str) -> Step[Record]:
    """Make ``value`` the entity's attribute's one current value (``memstack.edits``); the entity."""
    path = f"{_user_path(user_id)}/memories/entity/{quote(entity, safe='')}/attributes/{quote(attribute, safe='')}"
    answer = yield Request("PUT", path, json={"value": value})
    scope = yield from _scope(user_id)
    return values.record(answer, scope)


def delete_attribute(entity: str, attribute: str, *, user_id: str) -> Step[Record]:
    """Remove an attribute of the entity (its values stay in the history); the entity."""
    path = f"{_user_path(user_id)}/memories/entity/{quote(entity, safe='')}/attributes/{quote(attribute, safe='')}"
    answer = yield Request("DELETE", path)
    scope = yield from _scope(user_id)
    return values.record(answer, scope)


def edit_note(index: int, text: str, *, expect: str, user_id: str, thread_id: str) -> Step[Record]:
    """Rewrite one note of the thread's summary; Conflict if it changed since read as ``expect``."""
    path = f"{_thread_path(user_id, thread_id)}/summary/notes/{index}"
    answer = yield Request("PUT", path, json={"text": text, "expect": expect})
    scope = yield from _scope(user_id, thread_id)
    return values.record(answer, scope)


def delete_note(index: int, *, expect: str, user_id: str, thread_id: str) -> Step[Record]:
    """Remove one note of the thread's summary; Conflict if it changed since read as ``expect``."""
    answer = yield Request("DELETE", f"{_thread_path(user_id, thread_id)}/summary/notes/{index}", params={"expect": expect})
    scope = yield from _scope(user_id, thread_id)
    return values.record(answer, scope)


def audit(
    *, user_id: str, tenant: str | None = None, agent_id: str | None = None, kind: str | None = None, limit: int | None = None
) -> Step[list[AuditEvent]]:
    """``Memory.audit`` through ``GET .../audit``, newest first (``limit`` None: up to 10,000)."""
    yield from _own(tenant, agent_id)
    try:
        answer = yield Request("GET", _user_path(user_id) + "/audit", params={"kind": kind, "limit": 10_000 if limit is None else limit})
    except NotFound:
        return []
    user = yield from _scope(user_id)
    return [values.audit(e, user) for e in answer]


def usage(*, user_id: str, tenant: str | None = None, agent_id: str | None = None) -> Step[list[UsageRecord]]:
    """``Memory.usage`` through ``GET .../usage``: the model calls made for the user."""
    yield from _own(tenant, agent_id)
    try:
        answer = yield Request("GET", _user_path(user_id) + "/usage")
    except NotFound:
        return []
    user = yield from _scope(user_id)
    return [values.usage(c, user) for c in answer["calls"]]


# ---- deleting, export, import -------------------------------------------------------------------


def forget(
    *, user_id: str, thread_id: str | None = None, tenant: str | None = None, agent_id: str | None = None, by: str = "api"
) -> Step[int]:
    """``Memory.forget`` through ``DELETE .../threads/{t}`` or ``DELETE /v1/users/{u}``: the rows
    deleted, 0 for what is not there. The deletion note names the API (``by`` is the server's)."""
    yield from _own(tenant, agent_id)
    try:
        answer = yield Request("DELETE", _user_path(user_id, thread_id))
    except NotFound:
        return 0
    return int(answer["deleted"])


def forget_saved(memory_id: str, *, user_id: str, tenant: str | None = None, agent_id: str | None = None, by: str = "api") -> Step[Unit]:
    """``Memory.forget_saved`` through ``DELETE .../saved/{id}``: what was deleted."""
    yield from _own(tenant, agent_id)
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise InvalidInput("memory_id is empty", field="memory_id")
    answer = yield Request("DELETE", f"{_user_path(user_id)}/saved/{quote(memory_id, safe='')}")
    user = yield from _scope(user_id)
    return values.saved(answer, user, NOTES_THREAD)


def export(*, user_id: str, tenant: str | None = None) -> Step[Iterator[dict[str, Any]]]:
    """``Memory.export`` through ``GET .../export``: every record of the user."""
    yield from _own(tenant, None)
    try:
        answer = yield Request("GET", _user_path(user_id) + "/export")
    except NotFound:
        return iter([])
    return iter(answer["records"])


def import_(records: Iterable[Mapping[str, Any]], *, tenant: str | None = None) -> Step[int]:
    """``Memory.import_`` through ``POST .../import``, one request per user of the records (in the
    order each user first appears); re-importing adds nothing. Returns what was stored."""
    yield from _own(tenant, None)
    by_user: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, record in enumerate(records):
        if not isinstance(record, Mapping) or not isinstance(record.get("user_id"), str):
            raise InvalidInput(f"record {i + 1}: user_id is required", field=f"records[{i}].user_id")
        _user_path(record["user_id"])
        by_user.setdefault(record["user_id"], []).append((i, {k: v for k, v in record.items() if k != "tenant"}))
    stored = 0
    for user_id, numbered in by_user.items():
        try:
            answer = yield Request("POST", _user_path(user_id) + "/import", json={"records": [r for _, r in numbered]}, safe=True)
        except InvalidInput as exc:
            raise _renumbered(exc, [i for i, _ in numbered]) from None
        stored += int(answer["imported"])
    return stored


def _renumbered(exc: InvalidInput, places: list[int]) -> InvalidInput:
    """An import error of one user's request, naming the record's place in the caller's whole list."""

    def place(match: re.Match[str], offset: int) -> str:
        n = int(match.group(1)) - offset
        return match.group(0).replace(match.group(1), str(places[n] + offset)) if 0 <= n < len(places) else match.group(0)

    out = InvalidInput(_RECORD.sub(lambda m: place(m, 1), str(exc)), field=_FIELD.sub(lambda m: place(m, 0), exc.field or "") or None)
    out.code = exc.code
    return out


# ---- the write queue ---------------------------------------------------------------------------


def pending(*, user_id: str | None = None, tenant: str | None = None) -> Step[int]:
    """``Memory.pending``: the user's jobs not run yet (``GET .../pending``), or without a user the
    server's whole queue (``GET /health``)."""
    yield from _own(tenant, None)
    if user_id is None:
        health = yield Request("GET", "/health")
        return int(health["pending_jobs"])
    answer = yield Request("GET", _user_path(user_id) + "/pending")
    return int(answer["pending"])


def flush(*, user_id: str | None = None, tenant: str | None = None) -> Step[JobReport]:
    """``Memory.flush`` for one user, on the server (``POST .../flush``): the user's ready jobs
    run now; what they did."""
    yield from _own(tenant, None)
    if user_id is None:
        raise InvalidInput("a Client runs one user's jobs: give user_id (the server's worker runs everyone's)", field="user_id")
    answer = yield Request("POST", _user_path(user_id) + "/flush", safe=True)
    return JobReport(ran=answer["ran"], failed=answer["failed"], errors=tuple(answer["errors"]), waited=answer["waited"])


# ---- the tenant, the tools, the service ------------------------------------------------------------


def deletions(*, user_id: str | None = None, limit: int = 100) -> Step[list[dict[str, Any]]]:
    """The tenant's deletion notes (or one user's), newest first: no content."""
    return (yield Request("GET", "/v1/deletions", params={"user_id": user_id, "limit": limit}))  # type: ignore[no-any-return]


def retention() -> Step[dict[str, Any]]:
    """The tenant's retention policy and its last pass."""
    return (yield Request("GET", "/v1/retention"))  # type: ignore[no-any-return]


def tenant_usage(*, user_id: str | None = None, since: datetime | None = None) -> Step[dict[str, Any]]:
    """The tenant's model calls and tokens per user, its budget and spend (``memstack usage --json``)."""
    return (yield Request("GET", "/v1/usage", params={"user_id": user_id, "since": _time(since, "since")}))  # type: ignore[no-any-return]


def tenant() -> Step[str]:
    """The client's tenant, as its API key names it."""
    info = yield Request("GET", "/v1/retention", cached=True)
    return str(info["tenant"])


def openai_tools(*, form: str = "notes") -> Step[list[dict[str, Any]]]:
    """The memory tools as OpenAI function-calling schemas (``MemoryTools.openai_tools``)."""
    return (yield Request("GET", "/v1/tools", params={"form": form}))  # type: ignore[no-any-return]


def call_tool(
    name: str, arguments: str | Mapping[str, Any] | None = None, *, user_id: str, thread_id: str | None = None, form: str = "notes"
) -> Step[str]:
    """Run one memory tool for the user (``MemoryTools.call``): its text for the model; a model's
    mistake (an unknown tool, arguments that are not one JSON object or do not fit) comes back as
    "error: ...". ``arguments``: a mapping, or a model's JSON text."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            return f"error: invalid arguments for {name}: not valid JSON ({exc})"
    if arguments is not None and not isinstance(arguments, Mapping):
        return f"error: invalid arguments for {name}: arguments must be a JSON object, got {type(arguments).__name__}"
    path = f"{_user_path(user_id)}/tools/{quote(name, safe='')}"
    answer = yield Request("POST", path, params={"thread_id": thread_id, "form": form}, json={"arguments": dict(arguments or {})})
    return str(answer["result"])


def health() -> Step[dict[str, Any]]:
    """``GET /health``: {"status": "ok", "pending_jobs": n} when the server is ready."""
    return (yield Request("GET", "/health"))  # type: ignore[no-any-return]
