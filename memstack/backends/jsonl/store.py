"""The JSON lines store: each thread is one append-only, human-readable .jsonl file, under one file lock.

The layout under the root (every id encoded by ``encode_name`` into one safe file name)::

    .lock                                        the lock every operation holds (filelock)
    _seq                                         the last message seq handed out, store-wide
    _deletion_key                                the key of the deletion notes' hashes (deletions.py)
    <tenant>/_deletions.jsonl                    the tenant's deletion notes, one per line
    <tenant>/<user>/_jobs.json                   the user's job rows
    <tenant>/<user>/<agent|_>/threads/<thread>.jsonl           one message per line, with its seq
    <tenant>/<user>/<agent|_>/state/<thread|_>/<name>.json     one JSON document
    <tenant>/<user>/<agent|_>/checkpoints/<thread>.json        retained snapshots, oldest first

Names starting with '_' belong to the store and names starting with '.' to the lock and temporary
files; an encoded id starts with neither. JSON documents are replaced atomically (temp file, fsync,
os.replace). A message line counts once its newline is written: a torn last line left by a killed
process is ignored on read and cut off by the next append. ``append`` reserves seqs, then requests
its jobs, then writes its lines, so a crash can leave an extra job request but never messages
without one. Deleting a user removes the ``<tenant>/<user>`` directory and leaves a note. Semantics follow MemoryStore.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Unpack

from filelock import FileLock, Timeout

from ...errors import StoreError
from ...stores import ANY, ReadOptions, check_last
from ...types import Checkpoint, Deletion, Expiry, Job, JobCursor, Message, Scope, StateDocument, ThreadInfo, aware, utcnow
from ..rules.checkpoints import check_keep
from ..rules.expiry import check
from ..rules.history import read_filter
from . import deletions
from .files import (
    append_lines,
    dump_json,
    make_directories,
    read_bytes,
    read_document,
    remove_file,
    remove_tree,
    subdirectories,
    write_atomically,
    write_document,
)
from .jobs import JOBS_FILE, JobRow, find_row, is_claimable, is_row_of, job_of, new_job_row
from .logs import count_records, expire_log, message_line, read_log, thread_infos, unseen
from .names import decode_name, decode_optional, encode_name, encode_optional

SEQ_FILE = "_seq"
LOCK_TIMEOUT_SECONDS = 60.0
LOCK_POLL_SECONDS = 0.005  # filelock polls for the lock; its 0.05 s default lets busy writers starve waiting ones


class JsonlStore:
    """All four stores over one directory tree (it satisfies each Protocol through its attributes)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self.url = f"jsonl://{self.root.as_posix()}"
        self._lock = FileLock(self.root / ".lock", timeout=LOCK_TIMEOUT_SECONDS, poll_interval=LOCK_POLL_SECONDS)
        with self.io_errors():
            make_directories(self.root)
        self.history = _History(self)
        self.state = _State(self)
        self.checkpoints = _Checkpoints(self)
        self.jobs = _Jobs(self)
        self.profiles = _Profiles(self)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's lock (across threads and processes), turning I/O failures into StoreError."""
        with self.io_errors(), self._lock:
            yield

    @contextmanager
    def io_errors(self) -> Iterator[None]:
        try:
            yield
        except Timeout as exc:
            raise StoreError(f"{self.url}: the lock is still held after {LOCK_TIMEOUT_SECONDS:g}s") from exc
        except OSError as exc:
            raise StoreError(f"{self.url}: {exc}") from exc

    # paths

    def user_dir(self, scope: Scope) -> Path:
        return self.root / encode_name(scope.tenant) / encode_name(scope.user_id)

    def agent_dir(self, scope: Scope) -> Path:
        return self.user_dir(scope) / encode_optional(scope.agent_id)

    def thread_path(self, scope: Scope) -> Path:
        return self.agent_dir(scope) / "threads" / f"{encode_optional(scope.require_thread().thread_id)}.jsonl"

    def state_dir(self, scope: Scope) -> Path:
        return self.agent_dir(scope) / "state" / encode_optional(scope.thread_id)

    def state_path(self, scope: Scope, name: str) -> Path:
        return self.state_dir(scope) / f"{encode_name(name)}.json"

    def checkpoint_path(self, scope: Scope) -> Path:
        return self.agent_dir(scope) / "checkpoints" / f"{encode_optional(scope.require_thread().thread_id)}.json"

    def agent_dirs(self, scope: Scope) -> list[Path]:
        """The scope's agent directory, or all of the user's when the scope names no agent."""
        return [self.agent_dir(scope)] if scope.agent_id is not None else subdirectories(self.user_dir(scope))

    def user_dirs(self, scope: Scope | None) -> list[Path]:
        """The scope's user directory, or every user's when there is no scope."""
        if scope is not None:
            return [self.user_dir(scope)]
        return [user for tenant in subdirectories(self.root) for user in subdirectories(tenant)]

    # shared steps, called with the lock held

    def _reserve_seqs(self, count: int) -> range:
        if not count:
            return range(0)
        path = self.root / SEQ_FILE
        last = int(read_bytes(path) or b"0")
        write_atomically(path, f"{last + count}\n".encode())
        return range(last + 1, last + count + 1)

    def _request_jobs(self, scope: Scope, layers: Sequence[str]) -> None:
        path = self.user_dir(scope) / JOBS_FILE
        rows = read_document(path) or []
        for layer in layers:
            row = find_row(rows, scope, layer)
            if row is None:
                row = new_job_row(scope, layer)
                rows.append(row)
            if row["requested"] <= row["done"]:
                row["since"] = utcnow().isoformat()  # when undone work last appeared: a quiet thread's batch runs
            row["requested"] += 1
        write_document(path, rows)

    def _drop_jobs(self, scope: Scope) -> int:
        path = self.user_dir(scope) / JOBS_FILE
        rows = read_document(path) or []
        kept = [row for row in rows if not is_row_of(row, scope)]
        if len(kept) < len(rows):
            write_document(path, kept)
        return len(rows) - len(kept)

    def delete_user(self, scope: Scope, *, layer: str = "library") -> int:
        user_dir = self.user_dir(scope)
        with self.locked():
            counts = count_records(user_dir)
            remove_tree(user_dir)
            return deletions.record(self.root, scope.user(), "user", counts, layer=layer).rows

    def expire(self, tenant: str, expiry: Expiry, *, layer: str = "retention") -> list[Deletion]:
        """Delete the tenant's messages dated before ``expiry.messages``, rewriting each thread file
        that held one (atomically), with one note per user. The store keeps no model-made memory,
        audit trail or model calls, so nothing else expires."""
        check(tenant, expiry)
        notes: list[Deletion] = []
        with self.locked():
            if expiry.messages is None:
                return notes
            for user_dir in subdirectories(self.root / encode_name(tenant)):
                expired = sum(expire_log(path, expiry.messages) for path in sorted(user_dir.glob("*/threads/*.jsonl")))
                if expired:
                    user = Scope(user_id=decode_name(user_dir.name), tenant=tenant)
                    notes.append(deletions.record(self.root, user, "expired", {"messages": expired}, layer=layer))
        return notes

    def note_deletion(self, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None) -> Deletion:
        """Note a deletion made outside delete_user and delete_thread (a saved memory's)."""
        with self.locked():
            return deletions.record(self.root, scope, kind, counts, layer=layer, name=name)

    def tenants(self) -> list[str]:
        """The tenant directories that hold a user (a name starting with '_' or '.' is the store's),
        and the tenants with a profile."""
        with self.locked():
            held = {decode_name(d.name) for d in subdirectories(self.root) if d.name[:1] not in "_." and subdirectories(d)}
            held |= set(read_document(self.root / "profiles.json") or {})
        return sorted(held)

    def deletions(self, tenant: str, *, user_id: str | None = None) -> list[Deletion]:
        """The tenant's deletion notes (of one user: ``user_id``), oldest first."""
        with self.locked():
            return deletions.read(self.root, tenant, user_id)

    def noted_tenants(self) -> list[str]:
        with self.locked():
            return sorted(decode_name(path.parent.name) for path in self.root.glob(f"*/{deletions.NOTES_FILE}") if path.stat().st_size)

    def deletion_key(self) -> bytes | None:
        """The key of the deletion notes' hashes (None: nothing deleted yet); a secret."""
        with self.locked():
            return deletions.secret(self.root, make=False)

    def restore_deletions(self, key: bytes, notes: Sequence[Deletion]) -> int:
        """Store notes made under ``key`` verbatim, adopting it (``rules.deletions.adopts``)."""
        with self.locked():
            return deletions.restore(self.root, key, notes)

    def close(self) -> None:
        """Nothing to release: files are opened per operation and the lock is held only inside one."""


class _History:
    def __init__(self, store: JsonlStore) -> None:
        self._s = store

    def append(
        self, scope: Scope, messages: Sequence[Message], *, enqueue: Sequence[str] = (), expect_last: int | None | object = ANY
    ) -> list[Message]:
        path = self._s.thread_path(scope)
        with self._s.locked():
            existing, complete = read_log(path)
            check_last(expect_last, max((m.seq or 0 for m in existing), default=None))
            fresh = unseen(messages, {m.id for m in existing})
            stored = [replace(m, seq=seq) for m, seq in zip(fresh, self._s._reserve_seqs(len(fresh)), strict=True)]
            lines = b"".join(message_line(m) for m in stored)
            if enqueue:
                self._s._request_jobs(scope, enqueue)
            if lines:
                append_lines(path, lines, keep=complete)
            return stored

    def read(self, scope: Scope, **options: Unpack[ReadOptions]) -> list[Message]:
        path = self._s.thread_path(scope)
        with self._s.locked():
            log, _ = read_log(path)
        return read_filter(log, **options)

    def users(self, tenant: str) -> list[str]:
        with self._s.locked():
            root = self._s.root / encode_name(tenant)
            return sorted(decode_name(d.name) for d in subdirectories(root) if any(thread_infos(a) for a in subdirectories(d)))

    def threads(self, scope: Scope) -> list[ThreadInfo]:
        with self._s.locked():
            infos = [info for agent_dir in self._s.agent_dirs(scope) for info in thread_infos(agent_dir)]
        return sorted(infos, key=lambda t: (t.last_at, t.thread_id), reverse=True)

    def delete_thread(self, scope: Scope, *, layer: str = "library") -> int:
        s = self._s
        path = s.thread_path(scope)
        with s.locked():
            messages, _ = read_log(path)
            others = len(read_document(s.checkpoint_path(scope)) or []) + sum(1 for _ in s.state_dir(scope).glob("*.json"))
            remove_file(path)
            remove_file(s.checkpoint_path(scope))
            remove_tree(s.state_dir(scope))
            others += s._drop_jobs(scope)
            deletions.record(s.root, scope, "thread", {"messages": len(messages), "other": others}, layer=layer)
            return len(messages)


class _State:
    def __init__(self, store: JsonlStore) -> None:
        self._s = store

    def get(self, scope: Scope, name: str = "state") -> dict[str, Any] | None:
        path = self._s.state_path(scope, name)
        with self._s.locked():
            return read_document(path)

    def put(self, scope: Scope, value: Mapping[str, Any], name: str = "state") -> None:
        path, data = self._s.state_path(scope, name), dump_json(value, indent=2) + b"\n"
        with self._s.locked():
            write_atomically(path, data)

    def delete(self, scope: Scope, name: str = "state") -> bool:
        path = self._s.state_path(scope, name)
        with self._s.locked():
            return remove_file(path)

    def swap(self, scope: Scope, value: Mapping[str, Any] | None, *, expect: Mapping[str, Any] | None, name: str = "state") -> bool:
        path = self._s.state_path(scope, name)
        data = None if value is None else dump_json(value, indent=2) + b"\n"
        wanted = None if expect is None else json.loads(dump_json(expect))
        with self._s.locked():  # the store's lock is a file lock: one step across processes
            if read_document(path) != wanted:
                return False
            if data is None:
                remove_file(path)
            else:
                write_atomically(path, data)
            return True

    def dump(self, scope: Scope) -> list[StateDocument]:
        user, found = scope.user(), []
        with self._s.locked():
            for agent_dir in subdirectories(self._s.user_dir(user)):
                for thread_dir in subdirectories(agent_dir / "state"):
                    at = replace(user, agent_id=decode_optional(agent_dir.name), thread_id=decode_optional(thread_dir.name))
                    for path in sorted(thread_dir.glob("*.json")):
                        value = read_document(path)
                        if value is not None:
                            found.append(StateDocument(at, decode_name(path.stem), value))
        return found


class _Profiles:
    """profiles.json at the root: {tenant: profile}."""

    def __init__(self, store: JsonlStore) -> None:
        self._s = store
        self._path = store.root / "profiles.json"

    def get(self, tenant: str) -> dict[str, Any] | None:
        with self._s.locked():
            return (read_document(self._path) or {}).get(tenant)

    def put(self, tenant: str, value: Mapping[str, Any], *, replace: bool = False) -> dict[str, Any]:
        with self._s.locked():
            profiles = read_document(self._path) or {}
            if replace or tenant not in profiles:
                profiles[tenant] = json.loads(dump_json(value))
                write_atomically(self._path, dump_json(profiles, indent=2) + b"\n")
            return profiles[tenant]


class _Checkpoints:
    def __init__(self, store: JsonlStore) -> None:
        self._s = store

    def save(self, scope: Scope, data: Mapping[str, Any], *, keep: int = 10, at: datetime | None = None) -> Checkpoint:
        check_keep(keep)
        cp = Checkpoint(uuid.uuid4().hex, scope.require_thread(), aware(at) if at else utcnow(), json.loads(dump_json(data)))
        path = self._s.checkpoint_path(scope)
        with self._s.locked():
            records = read_document(path) or []
            records.append({"id": cp.id, "created_at": cp.created_at.isoformat(), "data": cp.data})
            write_document(path, records[-keep:])
        return cp

    def latest(self, scope: Scope) -> Checkpoint | None:
        lst = self.list(scope)
        return lst[0] if lst else None

    def list(self, scope: Scope) -> list[Checkpoint]:
        path = self._s.checkpoint_path(scope)
        with self._s.locked():
            records = read_document(path) or []
        return [Checkpoint(r["id"], scope, datetime.fromisoformat(r["created_at"]), r["data"]) for r in reversed(records)]


class _Jobs:
    def __init__(self, store: JsonlStore) -> None:
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
        with self._s.locked():
            for user_dir in self._s.user_dirs(scope):
                rows = read_document(user_dir / JOBS_FILE) or []
                row = next((row for row in rows if is_claimable(row, now, waiting=waiting, idle_seconds=idle_seconds)), None)
                if row is not None:
                    row.update(owner=worker, lease_until=(now + timedelta(seconds=lease_seconds)).isoformat())
                    write_document(user_dir / JOBS_FILE, rows)
                    return job_of(user_dir, row)
        return None

    def complete(self, job: Job, *, cursor: int, waiting: bool = False) -> bool:
        return self._update(
            job,
            lambda row: row.update(
                done=max(row["done"], job.version),
                cursor=max(row["cursor"], cursor),
                attempts=0,
                last_error=None,
                not_before=None,
                waiting=waiting,
            ),
            owners=(job.worker,),
        )

    def renew(self, job: Job, *, lease_seconds: float) -> bool:
        lease_until = (utcnow() + timedelta(seconds=lease_seconds)).isoformat()
        return self._update(job, lambda row: row.update(lease_until=lease_until), owners=(job.worker,), release=False)

    def fail(self, job: Job, error: str, *, retry_in: float) -> None:
        self._update(
            job,
            lambda row: row.update(
                attempts=row["attempts"] + 1, last_error=error, not_before=(utcnow() + timedelta(seconds=retry_in)).isoformat()
            ),
            owners=(None, job.worker),
        )

    def pending(self, scope: Scope | None = None) -> int:
        with self._s.locked():
            return sum(
                1
                for user_dir in self._s.user_dirs(scope)
                for row in read_document(user_dir / JOBS_FILE) or []
                if row["requested"] > row["done"]
            )

    def cursors(self, scope: Scope) -> list[JobCursor]:
        with self._s.locked():
            rows = read_document(self._s.user_dir(scope) / JOBS_FILE) or []
        user = scope.user()
        return [
            JobCursor(
                replace(user, agent_id=r["agent_id"], thread_id=r["thread_id"]),
                r["layer"],
                r["cursor"],
                r["requested"] > r["done"],
                bool(r.get("waiting")),
            )
            for r in rows
        ]

    def restore(self, cursors: Sequence[JobCursor]) -> None:
        with self._s.locked():
            for c in cursors:
                path = self._s.user_dir(c.scope) / JOBS_FILE
                rows = read_document(path) or []
                row = find_row(rows, c.scope, c.layer)
                if row is None:
                    row = new_job_row(c.scope, c.layer)
                    rows.append(row)
                row.update(cursor=c.cursor, waiting=c.waiting, requested=row["done"] + int(c.pending))
                write_document(path, rows)

    def _update(self, job: Job, change: Callable[[JobRow], None], *, owners: tuple[str | None, ...], release: bool = True) -> bool:
        """Change the job's row if one of ``owners`` holds it, releasing the lease unless not to
        ``release``; a row deleted meanwhile stays deleted. Whether the row was changed."""
        path = self._s.user_dir(job.scope) / JOBS_FILE
        with self._s.locked():
            rows = read_document(path) or []
            row = find_row(rows, job.scope, job.layer)
            if row is None or row["owner"] not in owners:
                return False
            change(row)
            if release:
                row.update(owner=None, lease_until=None)
            write_document(path, rows)
            return True
