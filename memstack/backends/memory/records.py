"""In-memory record store and usage log: the reference RecordStore and UsageLog, in dicts.

The rules (``rules.records``) decide every change; this module only keeps the versions, each
user's audit trail and usage rows in process memory, behind one lock per store.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from ...types import AuditEvent, Change, Record, Scope, UsageRecord, UsageTotal, utcnow
from ..rules.records import Key, check_kind, check_limit, check_usage, checked, step, user_match
from ..rules.time import utc


def _copy_record(record: Record) -> Record:
    return replace(record, value=copy.deepcopy(dict(record.value)))


def _copy_event(event: AuditEvent) -> AuditEvent:
    return replace(event, before=copy.deepcopy(event.before), after=copy.deepcopy(event.after))


class MemoryRecords:
    """RecordStore in dicts behind one lock: every version of every key, and each user's audit trail.
    Stored and returned values are copies."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._versions: dict[Key, dict[tuple[str, str], list[Record]]] = {}  # scope key -> (kind, key) -> versions
        self._audit: dict[tuple[str, str], list[AuditEvent]] = {}  # (tenant, user) -> events, oldest first

    def current(self, scope: Scope, kind: str, keys: Sequence[str] | None = None) -> list[Record]:
        check_kind(kind)
        wanted = set(keys) if keys is not None else None
        with self._lock:
            found = [
                versions[-1]
                for (k, name), versions in self._versions.get(scope.key, {}).items()
                if k == kind and versions[-1].current and (wanted is None or name in wanted)
            ]
            return [_copy_record(r) for r in sorted(found, key=lambda r: r.key)]

    def history(self, scope: Scope, kind: str, key: str) -> list[Record]:
        check_kind(kind)
        with self._lock:
            return [_copy_record(r) for r in self._versions.get(scope.key, {}).get((kind, key), ())]

    def apply(self, scope: Scope, changes: Sequence[Change], *, layer: str) -> list[AuditEvent]:
        scope, prepared = checked(scope, changes, layer)
        now = utcnow()
        events = []
        with self._lock:
            keys = self._versions.setdefault(scope.key, {})
            for change in prepared:
                versions = keys.setdefault((change.kind, change.key), [])
                done = step(scope, change, versions[-1] if versions else None, layer=layer, now=now)
                if done.retire is not None:
                    versions[-1] = replace(versions[-1], invalid_at=done.retire)
                if done.sources is not None:
                    versions[-1] = replace(versions[-1], source_ids=done.sources)
                if done.insert is not None:
                    versions.append(done.insert)
                if not versions:
                    del keys[(change.kind, change.key)]
                if done.event is not None:
                    self._audit.setdefault(scope.key[:2], []).append(done.event)
                    events.append(_copy_event(done.event))
            if not keys:
                del self._versions[scope.key]
        return events

    def audit(self, scope: Scope, *, kind: str | None = None, limit: int | None = None) -> list[AuditEvent]:
        if kind is not None:
            check_kind(kind)
        check_limit(limit)
        with self._lock:
            events = [
                e
                for e in reversed(self._audit.get(scope.key[:2], ()))
                if user_match(e.scope.key, scope) and (kind is None or e.kind == kind)
            ]
            return [_copy_event(e) for e in events[:limit]]

    def users(self, tenant: str) -> list[str]:
        with self._lock:
            return sorted(
                {key[1] for key, records in self._versions.items() if key[0] == tenant and any(v[-1].current for v in records.values())}
            )

    def delete(self, scope: Scope, kind: str | None = None) -> int:
        if kind is not None:
            check_kind(kind)
        with self._lock:
            keys = self._versions.get(scope.key, {})
            gone = [k for k in keys if kind is None or k[0] == kind]
            n = sum(len(keys.pop(k)) for k in gone)
            if not keys:
                self._versions.pop(scope.key, None)
            return n

    def dump(self, scope: Scope) -> tuple[list[Record], list[AuditEvent]]:
        with self._lock:
            records = [
                _copy_record(r)
                for key, keys in self._versions.items()
                if key[:2] == scope.key[:2]
                for versions in keys.values()
                for r in versions
            ]
            return records, [_copy_event(e) for e in self._audit.get(scope.key[:2], ())]

    def restore(self, records: Sequence[Record], events: Sequence[AuditEvent]) -> int:
        n = 0
        with self._lock:
            for r in records:
                versions = self._versions.setdefault(r.scope.key, {}).setdefault((r.kind, r.key), [])
                if all(v.id != r.id for v in versions):
                    versions.append(_copy_record(r))
                    versions.sort(key=lambda v: v.version)
                    n += 1
            for e in events:
                trail = self._audit.setdefault(e.scope.key[:2], [])
                if all(x.id != e.id for x in trail):
                    trail.append(_copy_event(e))
                    n += 1
        return n

    def forget(self, scope: Scope) -> tuple[int, int]:
        """Erase records and audit events of the scope's thread, or (thread_id None) of its whole
        user, every agent; returns the records and the events erased (for the store's
        delete_thread and delete_user)."""
        match = (lambda key: key == scope.key) if scope.thread_id is not None else (lambda key: key[:2] == scope.key[:2])
        with self._lock:
            n = 0
            for key in [k for k in self._versions if match(k)]:
                n += sum(len(v) for v in self._versions.pop(key).values())
            events = self._audit.get(scope.key[:2], [])
            kept = [e for e in events if not match(e.scope.key)]
            if kept:
                self._audit[scope.key[:2]] = kept
            else:
                self._audit.pop(scope.key[:2], None)
            return n, len(events) - len(kept)

    def expire(
        self, tenant: str, user_id: str, *, audit_before: datetime | None, doomed: Callable[[Sequence[str]], bool] | None
    ) -> tuple[int, int]:
        """For a retention pass (``Store.expire``): erase the user's record versions whose sources
        ``doomed`` says went (None: none), and audit events recorded before ``audit_before``;
        returns the versions and the events erased."""
        n = 0
        went = doomed if doomed is not None else (lambda sources: False)
        with self._lock:
            for key in [k for k in self._versions if k[:2] == (tenant, user_id)]:
                keys = self._versions[key]
                for name in list(keys):
                    kept = [r for r in keys[name] if not went(r.source_ids)]
                    n += len(keys[name]) - len(kept)
                    if kept:
                        keys[name] = kept
                    else:
                        del keys[name]
                if not keys:
                    del self._versions[key]
            events = self._audit.get((tenant, user_id), [])
            left = [e for e in events if audit_before is None or e.at >= audit_before]
            if left:
                self._audit[(tenant, user_id)] = left
            else:
                self._audit.pop((tenant, user_id), None)
            return n, len(events) - len(left)

    def tenants(self) -> set[str]:
        """The tenants with a record version or an audit event."""
        with self._lock:
            return {k[0] for k in self._versions} | {k[0] for k in self._audit}

    def user_ids(self, tenant: str) -> set[str]:
        """The tenant's users with a record version or an audit event (of any thread)."""
        with self._lock:
            return {k[1] for k in self._versions if k[0] == tenant} | {k[1] for k in self._audit if k[0] == tenant}


class MemoryUsage:
    """UsageLog in lists behind a lock, one per user."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[tuple[str, str], list[UsageRecord]] = {}

    def record(self, rows: Sequence[UsageRecord]) -> None:
        checked = check_usage(rows)
        with self._lock:
            for row in checked:
                self._rows.setdefault(row.scope.key[:2], []).append(row)

    def read(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        """Oldest first by ``at`` (then in recording order); ``since`` is inclusive."""
        start = utc(since, field_name="since") if since is not None else None
        with self._lock:
            rows = [r for r in self._rows.get(scope.key[:2], ()) if user_match(r.scope.key, scope) and (start is None or r.at >= start)]
        return sorted(rows, key=lambda r: r.at)

    def totals(
        self, tenant: str, *, since: datetime | None = None, until: datetime | None = None, user_id: str | None = None
    ) -> list[UsageTotal]:
        """Summed per (user, layer), sorted by user then layer (``stores.UsageLog.totals``)."""
        start = utc(since, field_name="since") if since is not None else None
        end = utc(until, field_name="until") if until is not None else None
        sums: dict[tuple[str, str], list[int]] = {}
        with self._lock:
            for (t, user), rows in self._rows.items():
                if t != tenant or (user_id is not None and user != user_id):
                    continue
                for r in rows:
                    if (start is None or r.at >= start) and (end is None or r.at < end):
                        s = sums.setdefault((user, r.layer), [0, 0, 0])
                        s[0] += 1
                        s[1] += r.prompt_tokens
                        s[2] += r.completion_tokens
        return [UsageTotal(u, layer, *s) for (u, layer), s in sorted(sums.items())]

    def forget(self, scope: Scope) -> int:
        """Erase the rows of the scope's thread, or (thread_id None) of its whole user, every agent."""
        with self._lock:
            rows = self._rows.get(scope.key[:2], [])
            kept = [r for r in rows if scope.thread_id is not None and r.scope.key != scope.key]
            if kept:
                self._rows[scope.key[:2]] = kept
            else:
                self._rows.pop(scope.key[:2], None)
            return len(rows) - len(kept)

    def expire(self, tenant: str, user_id: str, before: datetime) -> int:
        """Erase the user's rows made before ``before`` (a retention pass); returns the rows erased."""
        with self._lock:
            rows = self._rows.get((tenant, user_id), [])
            kept = [r for r in rows if r.at >= before]
            if kept:
                self._rows[(tenant, user_id)] = kept
            else:
                self._rows.pop((tenant, user_id), None)
            return len(rows) - len(kept)

    def user_ids(self, tenant: str) -> set[str]:
        with self._lock:
            return {k[1] for k in self._rows if k[0] == tenant}

    def tenants(self) -> set[str]:
        with self._lock:
            return {k[0] for k in self._rows}
