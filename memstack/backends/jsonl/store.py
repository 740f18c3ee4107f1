"""JSON-lines backend: each thread is one append-only, human-readable .jsonl file, under one file lock.

The layout under the root (every id encoded by ``encode_name`` into one safe file name)::

    .lock                                        the lock every operation holds (filelock)
    _seq                                         the last message seq handed out, store-wide
    _deletion_key                                the key of the deletion notes' hashes (jsonl_deletions)
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
import os
import shutil
import string
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from filelock import FileLock, Timeout

from ..errors import InvalidInput, SchemaError, StoreError
from ..stores import ANY, check_last
from ..types import Checkpoint, Deletion, Job, Message, Scope, ThreadInfo, aware, by_time, utcnow

PLACEHOLDER = "_"  # the directory name standing for "no agent" or "no thread"
JOBS_FILE = "_jobs.json"
SEQ_FILE = "_seq"
LOCK_TIMEOUT_SECONDS = 60.0
LOCK_POLL_SECONDS = 0.005  # filelock polls for the lock; its 0.05 s default lets busy writers starve waiting ones
MAX_ENCODED_LENGTH = 255 - len(".jsonl")  # file systems allow 255 bytes per name
_PLAIN = frozenset(string.ascii_lowercase + string.digits + "-_~")
_WINDOWS_DEVICES = frozenset(["con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))])

JobRow = dict[str, Any]


# ---- names -----------------------------------------------------------------------------------


def encode_name(name: str) -> str:
    """``name`` as one safe file name on any OS; ``decode_name`` reverses it.

    Every character but lowercase ASCII letters, digits, '-', '_' and '~' is percent-encoded
    (UTF-8), so an encoded name holds no separator or '.', and no two differ only by case (macOS
    and Windows fold case). The first character is encoded too where the name would start with '_'
    (kept for the store) or be a Windows device name (con, nul, com1...).
    """
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"a name must be a non-empty string, got {name!r}")
    try:
        encoded = "".join(c if c in _PLAIN else _percent(c) for c in name)
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{name!r} is not valid Unicode") from exc
    if encoded.startswith(PLACEHOLDER) or encoded in _WINDOWS_DEVICES:
        encoded = _percent(name[0]) + encoded[1:]
    if len(encoded) > MAX_ENCODED_LENGTH:
        raise InvalidInput(f"{name[:40]!r}... is too long for a file name once encoded ({len(encoded)} > {MAX_ENCODED_LENGTH} characters)")
    return encoded


def _percent(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))


def decode_name(encoded: str) -> str:
    return unquote(encoded, errors="strict")


def encode_optional(name: str | None) -> str:
    return PLACEHOLDER if name is None else encode_name(name)


def decode_optional(encoded: str) -> str | None:
    return None if encoded == PLACEHOLDER else decode_name(encoded)


# ---- files -----------------------------------------------------------------------------------


def dump_json(value: Any, *, indent: int | None = None) -> bytes:
    """``value`` as UTF-8 JSON with non-ASCII text left readable; InvalidInput if it is not JSON."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=indent).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"value is not JSON-serialisable: {exc}") from exc


def read_bytes(path: Path) -> bytes:
    """The file's contents; a missing file reads as empty."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def read_document(path: Path) -> Any:
    """The JSON document in ``path``, or None if there is none."""
    data = read_bytes(path)
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError as exc:
        raise SchemaError(f"{path}: not valid JSON: {exc}") from exc


def write_document(path: Path, value: Any) -> None:
    write_atomically(path, dump_json(value, indent=2) + b"\n")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` all at once: write a temp file beside it, fsync, os.replace."""
    make_directories(path.parent)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    sync_directory(path.parent)


def append_lines(path: Path, data: bytes, *, keep: int) -> None:
    """Cut the file to its first ``keep`` bytes (dropping a torn line), append ``data`` and fsync."""
    created = not path.exists()
    make_directories(path.parent)
    with open(path, "ab", opener=private_opener) as file:
        file.truncate(keep)
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    if created:
        sync_directory(path.parent)


def private_opener(path: str, flags: int) -> int:
    """Create files readable by their owner only, as mkstemp does for the JSON documents."""
    return os.open(path, flags, 0o600)


def make_directories(path: Path) -> None:
    """Create ``path`` and its missing parents, syncing each new directory's entry."""
    if path.is_dir():
        return
    make_directories(path.parent)
    with suppress(FileExistsError):
        path.mkdir()
    sync_directory(path.parent)


def sync_directory(path: Path) -> None:
    """Make the directory's entries durable (Windows cannot open a directory; NTFS journals them)."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_file(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    sync_directory(path.parent)
    return True


def remove_tree(path: Path) -> None:
    with suppress(FileNotFoundError):
        shutil.rmtree(path)
        sync_directory(path.parent)


def subdirectories(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())
    except FileNotFoundError:
        return []


# ---- message logs ----------------------------------------------------------------------------


def message_line(message: Message) -> bytes:
    return dump_json({"seq": message.seq, **message.to_dict()}) + b"\n"


def read_log(path: Path) -> tuple[list[Message], int]:
    """A thread file's messages and the byte length of its complete lines (a torn last line is left out)."""
    data = read_bytes(path)
    complete = data.rfind(b"\n") + 1
    lines = data[:complete].split(b"\n")[:-1]
    return [parse_line(path, number, line) for number, line in enumerate(lines, 1) if line.strip()], complete


def parse_line(path: Path, number: int, line: bytes) -> Message:
    try:
        record = json.loads(line)
        return Message.from_dict(record, seq=int(record["seq"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise SchemaError(f"{path}:{number}: not a stored message: {exc}") from exc


def unseen(messages: Sequence[Message], seen: set[str]) -> list[Message]:
    """The messages whose ids are not in ``seen`` (nor earlier in ``messages``), in order."""
    fresh = []
    for m in messages:
        if m.id not in seen:
            seen.add(m.id)
            fresh.append(m)
    return fresh


def thread_infos(agent_dir: Path) -> list[ThreadInfo]:
    """The non-empty threads stored under one agent directory."""
    agent_id = decode_optional(agent_dir.name)
    infos = []
    for path in sorted((agent_dir / "threads").glob("*.jsonl")):
        messages, _ = read_log(path)
        if messages:
            stamps = [m.timestamp for m in messages]
            infos.append(ThreadInfo(decode_name(path.name.removesuffix(".jsonl")), agent_id, len(messages), min(stamps), max(stamps)))
    return infos


def count_records(user_dir: Path) -> dict[str, int]:
    """Messages, and the other rows (state documents, checkpoints, job rows), under a user's
    directory, as a deletion note counts them."""
    messages = sum(len(read_log(path)[0]) for path in user_dir.glob("*/threads/*.jsonl"))
    states = sum(1 for _ in user_dir.glob("*/state/*/*.json"))
    checkpoints = sum(len(read_document(path) or []) for path in user_dir.glob("*/checkpoints/*.json"))
    return {"messages": messages, "other": states + checkpoints + len(read_document(user_dir / JOBS_FILE) or [])}


# ---- job rows --------------------------------------------------------------------------------


def new_job_row(scope: Scope, layer: str) -> JobRow:
    return {
        "agent_id": scope.agent_id,
        "thread_id": scope.thread_id,
        "layer": layer,
        "requested": 0,
        "done": 0,
        "cursor": 0,
        "attempts": 0,
        "owner": None,
        "lease_until": None,
        "not_before": None,
        "last_error": None,
    }


def is_row_of(row: JobRow, scope: Scope) -> bool:
    return row["agent_id"] == scope.agent_id and row["thread_id"] == scope.thread_id


def find_row(rows: list[JobRow], scope: Scope, layer: str) -> JobRow | None:
    return next((row for row in rows if is_row_of(row, scope) and row["layer"] == layer), None)


def is_claimable(row: JobRow, now: datetime, *, waiting: bool = False) -> bool:
    if is_later(row["lease_until"], now):
        return False
    if is_later(row["not_before"], now):
        return False
    return row["requested"] > row["done"] or (waiting and bool(row.get("waiting")))


def is_later(stamp: str | None, now: datetime) -> bool:
    return stamp is not None and datetime.fromisoformat(stamp) > now


def job_of(user_dir: Path, row: JobRow) -> Job:
    scope = Scope(
        tenant=decode_name(user_dir.parent.name), user_id=decode_name(user_dir.name), agent_id=row["agent_id"], thread_id=row["thread_id"]
    )
    return Job(scope, row["layer"], row["requested"], row["cursor"], row["attempts"], row["owner"], row["last_error"])


# ---- the store -------------------------------------------------------------------------------


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
            return jsonl_deletions.record(self.root, scope.user(), "user", counts, layer=layer).rows

    def note_deletion(self, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None) -> Deletion:
        """Note a deletion made outside delete_user and delete_thread (a saved memory's)."""
        with self.locked():
            return jsonl_deletions.record(self.root, scope, kind, counts, layer=layer, name=name)

    def deletions(self, tenant: str, *, user_id: str | None = None) -> list[Deletion]:
        """The tenant's deletion notes (of one user: ``user_id``), oldest first."""
        with self.locked():
            return jsonl_deletions.read(self.root, tenant, user_id)

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

    def read(
        self,
        scope: Scope,
        *,
        after: int | None = None,
        until: datetime | None = None,
        last: int | None = None,
        roles: Sequence[str] | None = None,
        order: str = "append",
    ) -> list[Message]:
        path = self._s.thread_path(scope)
        with self._s.locked():
            out, _ = read_log(path)
        if after is not None:
            out = [m for m in out if m.seq is not None and m.seq > after]
        if until is not None:
            until = aware(until, field_name="until")
            out = [m for m in out if m.timestamp <= until]
        if roles is not None:
            out = [m for m in out if m.role in roles]
        if by_time(order):
            out.sort(key=lambda m: (m.timestamp, m.seq or 0))
        if last is not None:
            out = out[-last:] if last > 0 else []
        return out

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
            jsonl_deletions.record(s.root, scope, "thread", {"messages": len(messages), "other": others}, layer=layer)
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
        if keep < 1:
            raise InvalidInput("keep must be at least 1", field="keep")
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

    def claim(self, *, worker: str, lease_seconds: float = 300.0, scope: Scope | None = None, waiting: bool = False) -> Job | None:
        now = utcnow()
        with self._s.locked():
            for user_dir in self._s.user_dirs(scope):
                rows = read_document(user_dir / JOBS_FILE) or []
                row = next((row for row in rows if is_claimable(row, now, waiting=waiting)), None)
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


from . import jsonl_deletions  # noqa: E402  (it uses this module's file helpers)
