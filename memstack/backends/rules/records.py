"""The rules every RecordStore follows: what a change does, input checks, the per-user match.

What a change does is decided by one pure function, ``step``, from the key's latest version; every
record store (memory, SQLite, PostgreSQL) reads that version, calls ``step`` and writes what it
returns, so the backends agree by construction:

- ``put`` of a key with no current record inserts a version (``add``); of the value already
  current (``json_equal``) writes nothing and audits nothing, but merges the new source ids into
  the current record's (order kept, no duplicates); of another value retires the current record
  (``invalid_at`` = the change's time, or now) and inserts the next version (``supersede``).
- ``delete`` retires the current record (``delete``); of a key with no current record it is a no-op.

Versions count every version a key has had, so a key put again after a delete continues its
count. ``valid_from`` is the change's time (None when it has none: never the clock's);
``created_at`` and the audit events' ``at`` are when the change was recorded. Every time is
stored and returned in UTC.

Namespaces: records live at exactly the scope's (tenant, user, agent, thread) key, so a scope
without an agent and one with agent "a" hold different records under the same key, as a thread
and the user level do. The audit trail and the usage log are read per user: every thread and the
user level, of the scope's agent when it names one, else of every agent.

Deleting: ``delete(scope, kind)`` removes records and keeps the audit trail; a store's
``delete_thread`` removes the thread's records, audit events and usage rows (everything keyed to
the thread); ``delete_user`` removes all of the user's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ...errors import InvalidInput
from ...types import RECORD_KINDS, AuditEvent, Change, Record, Scope, UsageRecord, new_id
from .json_values import json_copy
from .time import utc

Key = tuple[str, str, str, str]


def check_kind(kind: object) -> str:
    if kind not in RECORD_KINDS:
        raise InvalidInput(f"unknown record kind {kind!r}; expected one of {', '.join(RECORD_KINDS)}", field="kind")
    return kind  # type: ignore[return-value]


def check_layer(layer: object) -> str:
    if not isinstance(layer, str) or not layer.strip():
        raise InvalidInput("layer must be a non-empty string", field="layer")
    return layer


def check_limit(limit: int | None) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise InvalidInput("limit must be a non-negative integer", field="limit")


def scope_of_key(key: Sequence[str]) -> Scope:
    tenant, user_id, agent_id, thread_id = key
    return Scope(tenant=tenant, user_id=user_id, agent_id=agent_id or None, thread_id=thread_id or None)


def json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values: numbers by value (1 == 1.0), but true is not 1, and key order is free."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def merge_ids(old: Sequence[str], new: Sequence[str]) -> tuple[str, ...]:
    """``old`` followed by the ids of ``new`` it lacks, in order, without duplicates."""
    return tuple(dict.fromkeys([*old, *new]))


@dataclass(frozen=True, slots=True)
class Prepared:
    """A validated change: its value a JSON copy, its time in UTC."""

    action: str
    kind: str
    key: str
    value: dict[str, Any] | None
    source_ids: tuple[str, ...]
    at: datetime | None


def prepare(changes: Sequence[Change]) -> list[Prepared]:
    """Validate every change before anything is written (so a bad one leaves the batch unapplied)."""
    out = []
    for change in changes:
        if not isinstance(change, Change):
            raise InvalidInput(f"expected Change, got {type(change).__name__}", field="changes")
        if not isinstance(change.key, str) or not change.key:
            raise InvalidInput("a change needs a non-empty key", field="key")
        if not all(isinstance(i, str) for i in change.source_ids):
            raise InvalidInput("source_ids must be strings", field="source_ids")
        value = json_copy(change.value) if change.action == "put" else None
        at = utc(change.at, field_name="at") if change.at is not None else None
        out.append(Prepared(change.action, change.kind, change.key, value, tuple(change.source_ids), at))
    return out


def checked(scope: Scope, changes: Sequence[Change], layer: object) -> tuple[Scope, list[Prepared]]:
    """``RecordStore.apply``'s checks before any I/O: the layer's name, every change (``prepare``),
    and the scope as its key names it (what the records are stored under)."""
    check_layer(layer)
    return scope_of_key(scope.key), prepare(changes)


@dataclass(frozen=True, slots=True)
class Step:
    """What one change does to its key: retire the current record at ``retire``, insert ``insert``,
    set the current record's source ids to ``sources`` (a no-op put), audit ``event``."""

    retire: datetime | None = None
    insert: Record | None = None
    sources: tuple[str, ...] | None = None
    event: AuditEvent | None = None


def step(scope: Scope, change: Prepared, latest: Record | None, *, layer: str, now: datetime) -> Step:
    """Decide a change from the key's latest version (current or not): pure, shared by every backend."""
    current = latest if latest is not None and latest.current else None
    if change.action == "delete":
        if current is None:
            return Step()
        return Step(retire=change.at or now, event=_event(scope, change, "delete", current.value, None, layer, now))
    assert change.value is not None
    if current is not None and json_equal(current.value, change.value):
        merged = merge_ids(current.source_ids, change.source_ids)
        return Step(sources=merged if merged != current.source_ids else None)
    record = Record(
        id=new_id(),
        scope=scope,
        kind=change.kind,
        key=change.key,
        value=change.value,
        source_ids=change.source_ids,
        valid_from=change.at,
        created_at=now,
        version=latest.version + 1 if latest is not None else 1,
    )
    if current is None:
        return Step(insert=record, event=_event(scope, change, "add", None, change.value, layer, now))
    return Step(retire=change.at or now, insert=record, event=_event(scope, change, "supersede", current.value, change.value, layer, now))


def _event(scope: Scope, change: Prepared, action: str, before: Any, after: Any, layer: str, now: datetime) -> AuditEvent:
    return AuditEvent(new_id(), scope, layer, change.kind, change.key, action, before, after, change.source_ids, now)


def check_usage(rows: Sequence[UsageRecord]) -> list[UsageRecord]:
    """The rows to log, their times in UTC; InvalidInput for anything not a UsageRecord."""
    out = []
    for row in rows:
        if not isinstance(row, UsageRecord):
            raise InvalidInput(f"expected UsageRecord, got {type(row).__name__}", field="rows")
        check_layer(row.layer)
        out.append(replace(row, at=utc(row.at, field_name="at")))
    return out


def user_match(key: Key, scope: Scope) -> bool:
    """In the scope's user, and its agent when it names one (for the per-user audit and usage reads)."""
    return key[:2] == scope.key[:2] and (scope.agent_id is None or key[2] == scope.agent_id)
