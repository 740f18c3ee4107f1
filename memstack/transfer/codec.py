"""The JSON form of every stored value a transfer carries: dicts of JSON types, times as ISO 8601
with their offset, a scope as its four fields. ``decode_*`` inverts ``encode_*`` exactly."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..types import AuditEvent, Checkpoint, Message, Record, Scope, Unit, UsageRecord, parse_time

SCOPE_FIELDS = ("tenant", "user_id", "agent_id", "thread_id")


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse(value: Any, name: str) -> datetime | None:
    return parse_time(str(value), field_name=name) if value is not None else None


def encode_scope(scope: Scope) -> dict[str, Any]:
    return {"tenant": scope.tenant, "user_id": scope.user_id, "agent_id": scope.agent_id, "thread_id": scope.thread_id}


def decode_scope(data: Mapping[str, Any]) -> Scope:
    return Scope(user_id=data["user_id"], thread_id=data.get("thread_id"), tenant=data["tenant"], agent_id=data.get("agent_id"))


def encode_message(scope: Scope, message: Message) -> dict[str, Any]:
    return encode_scope(scope) | message.to_dict()


def decode_message(data: Mapping[str, Any]) -> tuple[Scope, Message]:
    return decode_scope(data), Message.from_dict({k: v for k, v in data.items() if k not in SCOPE_FIELDS})


def encode_record(r: Record) -> dict[str, Any]:
    return encode_scope(r.scope) | {
        "id": r.id,
        "kind": r.kind,
        "key": r.key,
        "value": dict(r.value),
        "source_ids": list(r.source_ids),
        "valid_from": _time(r.valid_from),
        "invalid_at": _time(r.invalid_at),
        "created_at": _time(r.created_at),
        "version": r.version,
    }


def decode_record(d: Mapping[str, Any]) -> Record:
    return Record(
        id=d["id"],
        scope=decode_scope(d),
        kind=d["kind"],
        key=d["key"],
        value=dict(d["value"]),
        source_ids=tuple(d.get("source_ids") or ()),
        valid_from=_parse(d.get("valid_from"), "valid_from"),
        invalid_at=_parse(d.get("invalid_at"), "invalid_at"),
        created_at=_parse(d["created_at"], "created_at") or datetime.min,
        version=int(d["version"]),
    )


def encode_event(e: AuditEvent) -> dict[str, Any]:
    return encode_scope(e.scope) | {
        "id": e.id,
        "layer": e.layer,
        "kind": e.kind,
        "key": e.key,
        "action": e.action,
        "before": e.before,
        "after": e.after,
        "source_ids": list(e.source_ids),
        "at": _time(e.at),
    }


def decode_event(d: Mapping[str, Any]) -> AuditEvent:
    at = _parse(d["at"], "at")
    assert at is not None
    return AuditEvent(
        d["id"], decode_scope(d), d["layer"], d["kind"], d["key"], d["action"], d.get("before"), d.get("after"), tuple(d["source_ids"]), at
    )


def encode_usage(u: UsageRecord) -> dict[str, Any]:
    return encode_scope(u.scope) | {
        "layer": u.layer,
        "model": u.model,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "latency_ms": u.latency_ms,
        "ok": u.ok,
        "error": u.error,
        "at": _time(u.at),
    }


def decode_usage(d: Mapping[str, Any]) -> UsageRecord:
    at = _parse(d["at"], "at")
    assert at is not None
    return UsageRecord(
        decode_scope(d),
        d["layer"],
        d["model"],
        int(d["prompt_tokens"]),
        int(d["completion_tokens"]),
        float(d["latency_ms"]),
        bool(d["ok"]),
        d.get("error"),
        at,
    )


def encode_unit(u: Unit) -> dict[str, Any]:
    return encode_scope(u.scope) | {
        "id": u.id,
        "text": u.text,
        "timestamp": _time(u.timestamp),
        "unit_kind": u.kind,
        "round": u.round,
        "category": u.category,
        "source_ids": list(u.source_ids),
        "metadata": dict(u.metadata),
    }


def decode_unit(d: Mapping[str, Any]) -> Unit:
    ts = _parse(d["timestamp"], "timestamp")
    assert ts is not None
    return Unit(
        id=d["id"],
        scope=decode_scope(d),
        text=d["text"],
        timestamp=ts,
        kind=d["unit_kind"],
        round=d.get("round"),
        category=d.get("category"),
        source_ids=tuple(d.get("source_ids") or ()),
        metadata=dict(d.get("metadata") or {}),
    )


def encode_checkpoint(c: Checkpoint) -> dict[str, Any]:
    return encode_scope(c.scope) | {"id": c.id, "created_at": _time(c.created_at), "data": dict(c.data)}
