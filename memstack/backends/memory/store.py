"""The in-memory store: every store in Python dicts behind one lock; lost when the process ends.

It is the reference the durable backends are held to (``memstack.testing``'s contracts run on
all of them), with the same rules (``rules``) and no I/O."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Unpack

from ...stores import ANY, ReadOptions, check_last
from ...types import Checkpoint, Deletion, Expiry, Job, JobCursor, Message, Scope, StateDocument, ThreadInfo, utcnow
from ..rules import deletions
from ..rules.checkpoints import check_keep, new_checkpoint
from ..rules.deletions import new_secret, tally
from ..rules.expiry import check, stood_on
from ..rules.history import read_filter
from ..rules.json_values import json_copy
from ..rules.records import scope_of_key
from .records import MemoryRecords, MemoryUsage
from .side import delete_side_checkpoints
from .units import MemoryUnits
from .vectors import MemoryEmbeddingCache, NumpyVectorIndex

Key = tuple[str, str, str, str]


@dataclass
class _JobRow:
    requested: int = 0
    done: int = 0
    cursor: int = 0
    attempts: int = 0
    owner: str | None = None
    lease_until: datetime | None = None
    not_before: datetime | None = None
    last_error: str | None = None
    since: datetime | None = None
    waiting: bool = False


def _user_match(key: Key, scope: Scope) -> bool:
    return key[0] == scope.tenant and key[1] == scope.user_id


class MemoryStore:
    """All four stores in one object (it satisfies each Protocol through its attributes)."""

    def __init__(self) -> None:
        self.url = "memory://"
        self._lock = threading.RLock()
        self._messages: dict[Key, list[Message]] = {}
        self._ids: dict[Key, set[str]] = {}
        self._seq = 0
        self._state: dict[tuple[Key, str], dict[str, Any]] = {}
        self._checkpoints: dict[Key, list[Checkpoint]] = {}
        self._jobs: dict[tuple[Key, str], _JobRow] = {}
        self.history = _History(self)
        self.state = _State(self)
        self.checkpoints = _Checkpoints(self)
        self.jobs = _Jobs(self)
        self.profiles = _Profiles(self._lock)
        self.units = MemoryUnits()
        self.vectors = NumpyVectorIndex()
        self.embeddings = MemoryEmbeddingCache()
        self.records = MemoryRecords()
        self.usage = MemoryUsage()
        self._deletions: list[Deletion] = []
        #: the key of the deletion notes' user hash (rules.deletions), this store's own, made on
        #: the first deletion (None before, as the other backends keep it)
        self._deletion_key: bytes | None = None

    def delete_user(self, scope: Scope, *, layer: str = "library") -> int:
        with self._lock:
            user = Scope(user_id=scope.user_id, tenant=scope.tenant)  # every agent of the user
            counts = [("units", self.units.delete(user)), ("vectors", self.vectors.delete(user) + self.embeddings.delete(user))]
            for key in [k for k in self._messages if _user_match(k, scope)]:
                counts.append(("messages", len(self._messages.pop(key))))
                self._ids.pop(key, None)
            for table in (self._state, self._jobs):
                for k in [k for k in table if _user_match(k[0], scope)]:
                    del table[k]
                    counts.append(("other", 1))
            for k in [k for k in self._checkpoints if _user_match(k, scope)]:
                counts.append(("other", len(self._checkpoints.pop(k))))
            records, events = self.records.forget(user)
            counts += [("memories", records), ("audit", events), ("usage", self.usage.forget(user))]
            counts.append(("other", delete_side_checkpoints(self, scope)))  # the LangGraph saver's, if any
            return self._note(deletions.note(self._key(), user, "user", tally(counts), layer=layer)).rows

    def expire(self, tenant: str, expiry: Expiry, *, layer: str = "retention") -> list[Deletion]:
        """Delete what of the tenant ``expiry`` says is too old, user by user (``stores.Store``)."""
        check(tenant, expiry)
        notes = []
        with self._lock:
            users = {k[1] for k in self._messages if k[0] == tenant} | self.records.user_ids(tenant) | self.usage.user_ids(tenant)
            for user_id in sorted(users):
                user = Scope(user_id=user_id, tenant=tenant)
                counts = tally(self._expire_user(user, expiry))
                if counts:
                    notes.append(self._note(deletions.note(self._key(), user, "expired", counts, layer=layer)))
        return notes

    def _expire_user(self, user: Scope, expiry: Expiry) -> list[tuple[str, int]]:
        """One user's expired rows deleted (the store's lock held), counted as a note counts them."""
        expired: set[str] = set()
        kept: set[str] = set()
        for key in [k for k in self._messages if _user_match(k, user)]:
            log = self._messages[key]
            old = {m.id for m in log if expiry.messages is not None and m.timestamp < expiry.messages}
            if old:
                self._messages[key] = [m for m in log if m.id not in old]
                self._ids[key] -= old
            expired |= old
            kept |= self._ids.get(key, set())
        counts = [("messages", len(expired))]
        doomed = (lambda sources: stood_on(sources, expired, kept)) if expiry.derived and expired else None
        if doomed is not None:
            gone: dict[str | None, list[str]] = {}
            for batch in self.units.iterate(user):
                for unit in batch:
                    if doomed(unit.source_ids):
                        gone.setdefault(unit.scope.agent_id, []).append(unit.id)
            for agent, ids in gone.items():
                scope = replace(user, agent_id=agent)
                counts += [("units", self.units.delete(scope, ids)), ("vectors", self.vectors.delete(scope, ids))]
        records, events = self.records.expire(user.tenant, user.user_id, audit_before=expiry.audit, doomed=doomed)
        counts += [("memories", records), ("audit", events)]
        if expiry.usage is not None:
            counts.append(("usage", self.usage.expire(user.tenant, user.user_id, expiry.usage)))
        return counts

    def _key(self) -> bytes:
        with self._lock:
            if self._deletion_key is None:
                self._deletion_key = new_secret()
            return self._deletion_key

    def noted_tenants(self) -> list[str]:
        with self._lock:
            return sorted({d.tenant for d in self._deletions})

    def deletion_key(self) -> bytes | None:
        """The key of the deletion notes' hashes (None: nothing deleted yet); a secret."""
        return self._deletion_key

    def restore_deletions(self, key: bytes, notes: Sequence[Deletion]) -> int:
        """Store notes made under ``key`` verbatim, adopting it (``rules.deletions.adopts``)."""
        with self._lock:
            if deletions.adopts(self._deletion_key, key, holds_notes=bool(self._deletions)):
                self._deletion_key = key
            tenants = {d.tenant for d in notes}
            new = deletions.missing([d for d in self._deletions if d.tenant in tenants], notes)
            self._deletions += new
            return len(new)

    def _note(self, d: Deletion) -> Deletion:
        with self._lock:
            self._deletions.append(d)
        return d

    def note_deletion(self, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None) -> Deletion:
        """Note a deletion made outside delete_user and delete_thread (a saved memory's)."""
        return self._note(deletions.note(self._key(), scope, kind, counts, layer=layer, name=name))

    def tenants(self) -> list[str]:
        with self._lock:
            held = {k[0] for k in self._messages} | {k[0][0] for k in self._state} | set(self.profiles.tenants())
        return sorted(held | self.records.tenants() | self.units.tenants() | self.usage.tenants())

    def deletions(self, tenant: str, *, user_id: str | None = None) -> list[Deletion]:
        """The tenant's deletion notes (of one user: ``user_id``), oldest first."""
        with self._lock:
            notes = [d for d in self._deletions if d.tenant == tenant]
        return deletions.of_user(notes, self._deletion_key, tenant, user_id)

    def close(self) -> None:
        pass


class _History:
    def __init__(self, store: MemoryStore) -> None:
        self._s = store

    def append(
        self, scope: Scope, messages: Sequence[Message], *, enqueue: Sequence[str] = (), expect_last: int | None | object = ANY
    ) -> list[Message]:
        key = scope.require_thread().key
        s = self._s
        with s._lock:
            log = s._messages.setdefault(key, [])
            check_last(expect_last, log[-1].seq if log else None)
            ids = s._ids.setdefault(key, set())
            stored = []
            for m in messages:
                if m.id in ids:
                    continue
                s._seq += 1
                stored_m = replace(m, seq=s._seq)
                log.append(stored_m)
                ids.add(m.id)
                stored.append(stored_m)
            for layer in enqueue:
                row = s._jobs.setdefault((key, layer), _JobRow())
                if row.requested <= row.done:
                    row.since = utcnow()
                row.requested += 1
            return stored

    def read(self, scope: Scope, **options: Unpack[ReadOptions]) -> list[Message]:
        key = scope.require_thread().key
        with self._s._lock:
            log = list(self._s._messages.get(key, ()))
        return read_filter(log, **options)

    def users(self, tenant: str) -> list[str]:
        with self._s._lock:
            return sorted({k[1] for k, v in self._s._messages.items() if k[0] == tenant and v})

    def threads(self, scope: Scope) -> list[ThreadInfo]:
        with self._s._lock:
            items = [(k, list(v)) for k, v in self._s._messages.items() if _user_match(k, scope) and v]
        infos = [
            ThreadInfo(k[3], k[2] or None, len(v), min(m.timestamp for m in v), max(m.timestamp for m in v))
            for k, v in items
            if scope.agent_id is None or k[2] == scope.agent_id
        ]
        return sorted(infos, key=lambda t: (t.last_at, t.thread_id), reverse=True)

    def delete_thread(self, scope: Scope, *, layer: str = "library") -> int:
        key = scope.require_thread().key
        s = self._s
        with s._lock:
            n = len(s._messages.pop(key, []))
            s._ids.pop(key, None)
            counts = [("messages", n), ("other", len(s._checkpoints.pop(key, [])))]
            counts += [("units", s.units.delete(scope)), ("vectors", s.vectors.delete(scope) + s.embeddings.delete(scope))]
            records, events = s.records.forget(scope)
            counts += [("memories", records), ("audit", events), ("usage", s.usage.forget(scope))]
            for table in (s._state, s._jobs):
                for k in [k for k in table if k[0] == key]:
                    del table[k]
                    counts.append(("other", 1))
            counts.append(("other", delete_side_checkpoints(s, scope, thread_id=scope.thread_id)))
            s._note(deletions.note(s._key(), scope, "thread", tally(counts), layer=layer))
            return n


class _State:
    def __init__(self, store: MemoryStore) -> None:
        self._s = store

    def get(self, scope: Scope, name: str = "state") -> dict[str, Any] | None:
        with self._s._lock:
            value = self._s._state.get((scope.key, name))
            return copy.deepcopy(value) if value is not None else None

    def put(self, scope: Scope, value: Mapping[str, Any], name: str = "state") -> None:
        data = json_copy(value)
        with self._s._lock:
            self._s._state[(scope.key, name)] = data

    def delete(self, scope: Scope, name: str = "state") -> bool:
        with self._s._lock:
            return self._s._state.pop((scope.key, name), None) is not None

    def swap(self, scope: Scope, value: Mapping[str, Any] | None, *, expect: Mapping[str, Any] | None, name: str = "state") -> bool:
        data = None if value is None else json_copy(value)
        wanted = None if expect is None else json_copy(expect)
        with self._s._lock:
            if self._s._state.get((scope.key, name)) != wanted:
                return False
            if data is None:
                self._s._state.pop((scope.key, name), None)
            else:
                self._s._state[(scope.key, name)] = data
            return True

    def dump(self, scope: Scope) -> list[StateDocument]:
        with self._s._lock:
            return [
                StateDocument(scope_of_key(key), name, json_copy(value))
                for (key, name), value in self._s._state.items()
                if _user_match(key, scope)
            ]


class _Checkpoints:
    def __init__(self, store: MemoryStore) -> None:
        self._s = store

    def save(self, scope: Scope, data: Mapping[str, Any], *, keep: int = 10, at: datetime | None = None) -> Checkpoint:
        check_keep(keep)
        cp = new_checkpoint(scope, data, at)
        with self._s._lock:
            lst = self._s._checkpoints.setdefault(scope.key, [])
            lst.append(cp)
            del lst[:-keep]
        return cp

    def latest(self, scope: Scope) -> Checkpoint | None:
        lst = self.list(scope)
        return lst[0] if lst else None

    def list(self, scope: Scope) -> list[Checkpoint]:
        with self._s._lock:
            return list(reversed(self._s._checkpoints.get(scope.require_thread().key, [])))


class _Jobs:
    def __init__(self, store: MemoryStore) -> None:
        self._s = store

    def claim(
        self,
        *,
        worker: str,
        lease_seconds: float = 300.0,
        scope: Scope | None = None,
        waiting: bool = False,
        idle_seconds: float | None = None,
    ) -> Job | None:
        now = utcnow()
        quiet = now - timedelta(seconds=idle_seconds) if idle_seconds is not None else None
        with self._s._lock:
            ready = [
                (row.since or now, key, layer, row)
                for (key, layer), row in self._s._jobs.items()
                if (scope is None or _user_match(key, scope))
                and (row.lease_until is None or row.lease_until <= now)
                and (row.not_before is None or row.not_before <= now)
                and (row.requested > row.done or (row.waiting and (waiting or (quiet is not None and (row.since or now) <= quiet))))
            ]
            if not ready:
                return None
            _, key, layer, row = min(ready, key=lambda r: r[0])
            row.owner, row.lease_until = worker, now + timedelta(seconds=lease_seconds)
            sc = Scope(tenant=key[0], user_id=key[1], agent_id=key[2] or None, thread_id=key[3] or None)
            return Job(sc, layer, row.requested, row.cursor, row.attempts, worker, row.last_error, row.requested <= row.done)

    def complete(self, job: Job, *, cursor: int, waiting: bool = False) -> bool:
        with self._s._lock:
            row = self._s._jobs.get((job.scope.key, job.layer))
            if row is None or row.owner != job.worker:  # deleted meanwhile, or another worker's now
                return False
            row.done = max(row.done, job.version)
            row.waiting = waiting
            row.cursor = max(row.cursor, cursor)
            row.attempts, row.last_error, row.not_before = 0, None, None
            row.owner, row.lease_until = None, None
            return True

    def renew(self, job: Job, *, lease_seconds: float) -> bool:
        with self._s._lock:
            row = self._s._jobs.get((job.scope.key, job.layer))
            if row is None or row.owner != job.worker:
                return False
            row.lease_until = utcnow() + timedelta(seconds=lease_seconds)
            return True

    def fail(self, job: Job, error: str, *, retry_in: float) -> None:
        with self._s._lock:
            row = self._s._jobs.get((job.scope.key, job.layer))
            if row is None or row.owner not in (None, job.worker):
                return
            row.attempts += 1
            row.last_error = error
            row.not_before = utcnow() + timedelta(seconds=retry_in)
            if row.owner == job.worker:
                row.owner, row.lease_until = None, None

    def pending(self, scope: Scope | None = None) -> int:
        with self._s._lock:
            return sum(
                1 for (key, _), row in self._s._jobs.items() if row.requested > row.done and (scope is None or _user_match(key, scope))
            )

    def cursors(self, scope: Scope) -> list[JobCursor]:
        with self._s._lock:
            return [
                JobCursor(scope_of_key(key), layer, row.cursor, row.requested > row.done, row.waiting)
                for (key, layer), row in self._s._jobs.items()
                if _user_match(key, scope)
            ]

    def restore(self, cursors: Sequence[JobCursor]) -> None:
        with self._s._lock:
            for c in cursors:
                row = self._s._jobs.setdefault((c.scope.key, c.layer), _JobRow())
                row.cursor, row.waiting, row.requested = c.cursor, c.waiting, row.done + int(c.pending)
                if c.pending and row.since is None:
                    row.since = utcnow()


class _Profiles:
    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._by_tenant: dict[str, dict[str, Any]] = {}

    def tenants(self) -> list[str]:
        with self._lock:
            return list(self._by_tenant)

    def get(self, tenant: str) -> dict[str, Any] | None:
        with self._lock:
            value = self._by_tenant.get(tenant)
            return json_copy(value) if value is not None else None

    def put(self, tenant: str, value: Mapping[str, Any], *, replace: bool = False) -> dict[str, Any]:
        with self._lock:
            if replace or tenant not in self._by_tenant:
                self._by_tenant[tenant] = json_copy(value)
            return json_copy(self._by_tenant[tenant])
