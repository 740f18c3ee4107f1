"""The service's JSON answers as the library's values (``memstack.types``): pure functions.

What a REST answer does not carry is filled as the library would for a value it did not store:
a search hit's unit has no ``round`` nor metadata, a record no creation time (its ``created_at``
is when it was read), an audit event no id. A context's messages are what its answer carries,
the OpenAI fields (``to_openai`` gives them back exactly): they get new ids and the time of
reading, as a message made in the app does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..types import AuditEvent, Context, Dropped, Hit, Message, Record, Scope, ThreadInfo, Unit, UsageRecord


def time(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def message(data: dict[str, Any]) -> Message:
    return Message.from_dict(data, seq=data.get("seq"))


def context(data: dict[str, Any]) -> Context:
    return Context(
        messages=tuple(Message.from_dict(m) for m in data["messages"]),
        tokens=data["tokens"],
        sections=dict(data["sections"]),
        dropped=tuple(Dropped(d["layer"], d["reason"], tuple(d["message_ids"]), d["tokens"]) for d in data["dropped"]),
        max_tokens=data["max_tokens"],
        counter=data["counter"],
    )


def hit(data: dict[str, Any], user: Scope) -> Hit:
    unit = Unit(
        id=data["id"],
        scope=user.thread(data["thread_id"]),
        text=data["text"],
        timestamp=time(data["timestamp"]),
        kind=data.get("kind") or "round",
        category=data.get("category"),
        source_ids=tuple(data["source_ids"]),
    )
    return Hit(unit, float(data["score"]), dict(data["ranks"]))


def record(data: dict[str, Any], scope: Scope) -> Record:
    """A record as the library holds it: a state record's value wrapped as every writer stores it."""
    value = {"value": data["value"]} if data["kind"] == "state" else dict(data["value"])
    return Record(
        id=data.get("id") or "",
        scope=scope,
        kind=data["kind"],
        key=data["key"],
        value=value,
        source_ids=tuple(data["source_ids"]),
        valid_from=time(data["valid_from"]) if data.get("valid_from") else None,
        version=data["version"],
    )


def thread(data: dict[str, Any]) -> ThreadInfo:
    return ThreadInfo(data["thread_id"], data.get("agent_id"), data["messages"], time(data["first_at"]), time(data["last_at"]))


def audit(data: dict[str, Any], user: Scope) -> AuditEvent:
    return AuditEvent(
        id="",
        scope=user.thread(data["thread_id"]) if data.get("thread_id") else user,
        layer=data["layer"],
        kind=data["kind"],
        key=data["key"],
        action=data["action"],
        before=data.get("before"),
        after=data.get("after"),
        source_ids=tuple(data["source_ids"]),
        at=time(data["at"]),
    )


def usage(data: dict[str, Any], user: Scope) -> UsageRecord:
    return UsageRecord(
        scope=user.thread(data["thread_id"]) if data.get("thread_id") else user,
        layer=data["layer"],
        model=data["model"],
        prompt_tokens=data["prompt_tokens"],
        completion_tokens=data["completion_tokens"],
        latency_ms=float(data["latency_ms"]),
        ok=bool(data["ok"]),
        error=data.get("error"),
        at=time(data["at"]),
    )


def saved(data: dict[str, Any], user: Scope, thread: str) -> Unit:
    return Unit(
        id=data["id"],
        scope=user.thread(thread),
        text=data["text"],
        timestamp=time(data["timestamp"]),
        kind="note",
        category=data.get("category"),
        metadata=dict(data.get("metadata") or {}),
    )
