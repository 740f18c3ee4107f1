"""SQLite backend, the embedded default: every store in one WAL-mode file, append-only migrations.

Writes run in ``BEGIN IMMEDIATE`` transactions with a busy timeout, so several processes can
append to the same file; ``append`` inserts the messages and bumps the layers' job rows in one
transaction. Timestamps are kept twice: the ISO text as given (exact round trip, offset
included) and UTC microseconds for filtering.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import InvalidInput, SchemaError, StoreError
from ..stores import ANY, check_last
from ..types import Checkpoint, Deletion, Job, Message, Scope, ThreadInfo, ToolCall, aware, by_time, utcnow
from .adapter_rows import delete_checkpoints, sqlite_runner
from .deletions import counted_as, tally
from .memory import json_copy

Migration = tuple[str, Callable[[sqlite3.Connection], None]]


def _statements(db: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated DDL inside the caller's transaction (executescript would commit it)."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _m001_core(db: sqlite3.Connection) -> None:
    _statements(
        db,
        """
        CREATE TABLE messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, parts INTEGER NOT NULL,
            name TEXT, tool_calls TEXT, tool_call_id TEXT,
            ts TEXT NOT NULL, ts_us INTEGER NOT NULL, metadata TEXT,
            UNIQUE (tenant, user_id, agent_id, thread_id, id)
        );
        CREATE INDEX messages_thread ON messages (tenant, user_id, agent_id, thread_id, seq);
        CREATE TABLE state (
            tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            name TEXT NOT NULL, value TEXT NOT NULL, updated_us INTEGER NOT NULL,
            PRIMARY KEY (tenant, user_id, agent_id, thread_id, name)
        );
        CREATE TABLE checkpoints (
            n INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            id TEXT NOT NULL UNIQUE, created TEXT NOT NULL, data TEXT NOT NULL
        );
        CREATE INDEX checkpoints_thread ON checkpoints (tenant, user_id, agent_id, thread_id, n);
        CREATE TABLE jobs (
            tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            layer TEXT NOT NULL,
            requested INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0,
            cursor INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,
            owner TEXT, lease_us INTEGER, not_before_us INTEGER, last_error TEXT,
            pending_since_us INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, user_id, agent_id, thread_id, layer)
        );
        CREATE INDEX jobs_open ON jobs (pending_since_us) WHERE requested > done;
        """,
    )


#: Append-only: never edit or reorder an entry; add a new one at the end.
def _m006_job_waiting(db: sqlite3.Connection) -> None:
    _statements(
        db,
        "ALTER TABLE jobs ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0; CREATE INDEX jobs_waiting ON jobs (pending_since_us) WHERE waiting = 1;",
    )


MIGRATIONS: list[Migration] = [
    ("001_core", _m001_core),
]

#: Tables with (tenant, user_id, agent_id, thread_id) columns: delete_user and delete_thread
#: clear them all in one transaction. Modules that add tables extend these lists.
USER_TABLES: list[str] = ["messages", "state", "checkpoints", "jobs"]
THREAD_TABLES: list[str] = ["state", "checkpoints", "jobs"]

KEY = "tenant = ? AND user_id = ? AND agent_id = ? AND thread_id = ?"
USER = "tenant = ? AND user_id = ?"


def _us(value: datetime) -> int:
    delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return delta // _ONE_US


_ONE_US = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc) - datetime(1970, 1, 1, tzinfo=timezone.utc)


def _from_us(value: int) -> datetime:
    """The instant ``value`` microseconds after 1970 UTC; one past what a datetime holds (stored
    before timestamps were kept to years 1900..9000, e.g. 9999-12-31T23:59:59-14:00) reads as the
    first or last datetime instead of failing every read of its user."""
    try:
        return datetime(1970, 1, 1, tzinfo=timezone.utc) + value * _ONE_US
    except OverflowError:
        return datetime.max.replace(tzinfo=timezone.utc) if value > 0 else datetime.min.replace(tzinfo=timezone.utc)


def apply_migrations(db: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
    """Apply the migrations this database lacks, in order, each in its own transaction."""
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    known = [name for name, _ in migrations]
    applied = [row[0] for row in db.execute("SELECT name FROM _migrations ORDER BY rowid")]
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise SchemaError(f"database has migrations unknown to this memstack version: {', '.join(unknown)}; upgrade memstack")
    done = []
    for name, migrate in migrations:
        if name in applied:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone() is None:
                migrate(db)
                db.execute("INSERT INTO _migrations VALUES (?, ?)", (name, utcnow().isoformat()))
                done.append(name)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return done


@contextmanager
def write_transaction(db: sqlite3.Connection, lock: Any) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT on ``db`` under ``lock``; rolled back on any error, SQLite's
    own errors raised as StoreError."""
    with lock:
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite write failed: {exc}") from exc
        try:
            yield db
        except sqlite3.Error as exc:
            db.execute("ROLLBACK")
            raise StoreError(f"SQLite write failed: {exc}") from exc
        except BaseException:
            db.execute("ROLLBACK")
            raise
        else:
            db.execute("COMMIT")


class SQLiteStore:
    """All four stores over one SQLite file (``":memory:"`` for a private in-process database)."""

    def __init__(self, path: str | Path, *, timeout: float = 30.0, synchronous: str = "NORMAL") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self.url = f"sqlite:///{self.path}"
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
            self._db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {synchronous}")
            self._db.execute("PRAGMA foreign_keys = ON")
            apply_migrations(self._db)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path}: {exc}") from exc
        self.history = _History(self)
        self.state = _State(self)
        self.checkpoints = _Checkpoints(self)
        self.jobs = _Jobs(self)
        self.profiles = _Profiles(self)
        self.units = SQLiteUnits(self)
        self.vectors = SQLiteVectorIndex(self)
        self.embeddings = SQLiteEmbeddingCache(self)
        self.records = SQLiteRecords(self)
        self.usage = SQLiteUsage(self)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE: the file's write lock is taken up front)."""
        with write_transaction(self._db, self._lock) as db:
            yield db

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite read failed: {exc}") from exc

    def delete_user(self, scope: Scope, *, layer: str = "library") -> int:
        with self.write() as db:
            counts = [
                (counted_as(t), db.execute(f"DELETE FROM {t} WHERE {USER}", (scope.tenant, scope.user_id)).rowcount) for t in USER_TABLES
            ]
            counts.append(("other", delete_checkpoints(sqlite_runner(db), "sqlite", scope)))  # the LangGraph saver's, if any
            return record_deletion(db, scope.user(), "user", tally(counts), layer=layer).rows

    def note_deletion(self, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None) -> Deletion:
        """Note a deletion made outside delete_user and delete_thread (a saved memory's)."""
        with self.write() as db:
            return record_deletion(db, scope, kind, counts, layer=layer, name=name)

    def deletions(self, tenant: str, *, user_id: str | None = None) -> list[Deletion]:
        """The tenant's deletion notes (of one user: ``user_id``), oldest first."""
        return read_deletions(self, tenant, user_id)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _row_to_message(row: tuple) -> Message:
    seq, id_, role, content, parts, name, tool_calls, tool_call_id, ts, metadata = row
    return Message(
        role=role,
        content=tuple(json.loads(content)) if parts else content,
        name=name,
        tool_calls=tuple(ToolCall(**tc) for tc in json.loads(tool_calls)) if tool_calls else (),
        tool_call_id=tool_call_id,
        id=id_,
        timestamp=datetime.fromisoformat(ts),
        metadata=json.loads(metadata) if metadata else {},
        seq=seq,
    )


def _message_row(scope: Scope, m: Message) -> tuple:
    parts = not isinstance(m.content, str)
    return (
        *scope.key,
        m.id,
        m.role,
        json.dumps([dict(p) for p in m.content], ensure_ascii=False) if parts else m.content,
        int(parts),
        m.name,
        json.dumps([{"id": t.id, "name": t.name, "arguments": t.arguments} for t in m.tool_calls], ensure_ascii=False)
        if m.tool_calls
        else None,
        m.tool_call_id,
        m.timestamp.isoformat(),
        _us(m.timestamp),
        json.dumps(dict(m.metadata), ensure_ascii=False) if m.metadata else None,
    )


MESSAGE_COLUMNS = "seq, id, role, content, parts, name, tool_calls, tool_call_id, ts, metadata"


def _time_ordered(store: SQLiteStore, sql: str, params: list[Any], last: int | None) -> list[Message]:
    """The messages ``sql`` selects, oldest first by instant then seq: read newest first, so that
    LIMIT keeps the last n."""
    if last is not None and last <= 0:
        return []
    limit = " LIMIT ?" if last is not None else ""
    rows = store.query(sql + " ORDER BY ts_us DESC, seq DESC" + limit, [*params, last] if limit else params)
    return [_row_to_message(r) for r in reversed(rows)]


class _History:
    def __init__(self, store: SQLiteStore) -> None:
        self._s = store

    def append(
        self, scope: Scope, messages: Sequence[Message], *, enqueue: Sequence[str] = (), expect_last: int | None | object = ANY
    ) -> list[Message]:
        key = scope.require_thread().key
        rows = [_message_row(scope, m) for m in messages]
        stored: list[Message] = []
        with self._s.write() as db:
            if expect_last is not ANY:  # under the write lock: nobody appends in between
                check_last(expect_last, db.execute(f"SELECT max(seq) FROM messages WHERE {KEY}", key).fetchone()[0])
            for m, row in zip(messages, rows, strict=True):
                cur = db.execute(
                    "INSERT INTO messages (tenant, user_id, agent_id, thread_id, id, role, content, parts, name, tool_calls, tool_call_id, ts, ts_us, metadata) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                    row,
                )
                if cur.rowcount:
                    stored.append(replace(m, seq=cur.lastrowid))
            now = _us(utcnow())
            for layer in enqueue:
                db.execute(
                    "INSERT INTO jobs (tenant, user_id, agent_id, thread_id, layer, requested, pending_since_us) VALUES (?,?,?,?,?,1,?) "
                    "ON CONFLICT DO UPDATE SET pending_since_us = CASE WHEN requested > done THEN pending_since_us ELSE excluded.pending_since_us END, "
                    "requested = requested + 1",
                    (*key, layer, now),
                )
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
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {KEY}"
        params: list[Any] = list(scope.require_thread().key)
        if after is not None:
            sql += " AND seq > ?"
            params.append(after)
        if until is not None:
            sql += " AND ts_us <= ?"
            params.append(_us(aware(until, field_name="until")))
        if roles is not None:
            sql += f" AND role IN ({','.join('?' * len(roles))})" if roles else " AND 0"
            params += list(roles)
        if by_time(order):  # ts_us is the instant, whatever offset the message was given with
            return _time_ordered(self._s, sql, params, last)
        if last is not None:
            if last <= 0:
                return []
            sql = f"SELECT * FROM ({sql} ORDER BY seq DESC LIMIT ?) ORDER BY seq"
            params.append(last)
        else:
            sql += " ORDER BY seq"
        return [_row_to_message(r) for r in self._s.query(sql, params)]

    def threads(self, scope: Scope) -> list[ThreadInfo]:
        sql = f"SELECT thread_id, agent_id, count(*), min(ts_us), max(ts_us) FROM messages WHERE {USER}"
        params: list[Any] = [scope.tenant, scope.user_id]
        if scope.agent_id is not None:
            sql += " AND agent_id = ?"
            params.append(scope.agent_id)
        sql += " GROUP BY agent_id, thread_id ORDER BY max(ts_us) DESC, thread_id DESC"
        return [ThreadInfo(t, a or None, n, _from_us(lo), _from_us(hi)) for t, a, n, lo, hi in self._s.query(sql, params)]

    def users(self, tenant: str) -> list[str]:
        return [row[0] for row in self._s.query("SELECT DISTINCT user_id FROM messages WHERE tenant = ? ORDER BY user_id", (tenant,))]

    def delete_thread(self, scope: Scope, *, layer: str = "library") -> int:
        key = scope.require_thread().key
        with self._s.write() as db:
            n = db.execute(f"DELETE FROM messages WHERE {KEY}", key).rowcount
            counts = [("messages", n)] + [(counted_as(t), db.execute(f"DELETE FROM {t} WHERE {KEY}", key).rowcount) for t in THREAD_TABLES]
            counts.append(("other", delete_checkpoints(sqlite_runner(db), "sqlite", scope, thread_id=scope.thread_id)))
            record_deletion(db, scope, "thread", tally(counts), layer=layer)
        return n


class _State:
    def __init__(self, store: SQLiteStore) -> None:
        self._s = store

    def get(self, scope: Scope, name: str = "state") -> dict[str, Any] | None:
        rows = self._s.query(f"SELECT value FROM state WHERE {KEY} AND name = ?", (*scope.key, name))
        return json.loads(rows[0][0]) if rows else None

    def put(self, scope: Scope, value: Mapping[str, Any], name: str = "state") -> None:
        text = json.dumps(json_copy(value), ensure_ascii=False)
        with self._s.write() as db:
            db.execute(
                "INSERT INTO state VALUES (?,?,?,?,?,?,?) ON CONFLICT DO UPDATE SET value = excluded.value, updated_us = excluded.updated_us",
                (*scope.key, name, text, _us(utcnow())),
            )

    def delete(self, scope: Scope, name: str = "state") -> bool:
        with self._s.write() as db:
            return db.execute(f"DELETE FROM state WHERE {KEY} AND name = ?", (*scope.key, name)).rowcount > 0

    def swap(self, scope: Scope, value: Mapping[str, Any] | None, *, expect: Mapping[str, Any] | None, name: str = "state") -> bool:
        text = None if value is None else json.dumps(json_copy(value), ensure_ascii=False)
        wanted = None if expect is None else json_copy(expect)
        with self._s.write() as db:  # BEGIN IMMEDIATE: no other writer between the read and the write
            row = db.execute(f"SELECT value FROM state WHERE {KEY} AND name = ?", (*scope.key, name)).fetchone()
            if (None if row is None else json.loads(row[0])) != wanted:
                return False
            if text is None:
                db.execute(f"DELETE FROM state WHERE {KEY} AND name = ?", (*scope.key, name))
            else:
                db.execute(
                    "INSERT INTO state VALUES (?,?,?,?,?,?,?) ON CONFLICT DO UPDATE SET value = excluded.value, updated_us = excluded.updated_us",
                    (*scope.key, name, text, _us(utcnow())),
                )
            return True


class _Profiles:
    def __init__(self, store: SQLiteStore) -> None:
        self._s = store

    def get(self, tenant: str) -> dict[str, Any] | None:
        rows = self._s.query("SELECT value FROM profiles WHERE tenant = ?", (tenant,))
        return json.loads(rows[0][0]) if rows else None

    def put(self, tenant: str, value: Mapping[str, Any], *, replace: bool = False) -> dict[str, Any]:
        text = json.dumps(json_copy(value), ensure_ascii=False)
        conflict = "DO UPDATE SET value = excluded.value, updated_us = excluded.updated_us" if replace else "DO NOTHING"
        with self._s.write() as db:
            db.execute(f"INSERT INTO profiles VALUES (?,?,?) ON CONFLICT (tenant) {conflict}", (tenant, text, _us(utcnow())))
            return json.loads(db.execute("SELECT value FROM profiles WHERE tenant = ?", (tenant,)).fetchone()[0])


class _Checkpoints:
    def __init__(self, store: SQLiteStore) -> None:
        self._s = store

    def save(self, scope: Scope, data: Mapping[str, Any], *, keep: int = 10, at: datetime | None = None) -> Checkpoint:
        if keep < 1:
            raise InvalidInput("keep must be at least 1", field="keep")
        cp = Checkpoint(uuid.uuid4().hex, scope.require_thread(), aware(at) if at else utcnow(), json_copy(data))
        with self._s.write() as db:
            db.execute(
                "INSERT INTO checkpoints (tenant, user_id, agent_id, thread_id, id, created, data) VALUES (?,?,?,?,?,?,?)",
                (*scope.key, cp.id, cp.created_at.isoformat(), json.dumps(cp.data, ensure_ascii=False)),
            )
            db.execute(
                f"DELETE FROM checkpoints WHERE {KEY} AND n NOT IN (SELECT n FROM checkpoints WHERE {KEY} ORDER BY n DESC LIMIT ?)",
                (*scope.key, *scope.key, keep),
            )
        return cp

    def latest(self, scope: Scope) -> Checkpoint | None:
        found = self._list(scope, limit=1)
        return found[0] if found else None

    def list(self, scope: Scope) -> list[Checkpoint]:
        return self._list(scope, limit=-1)

    def _list(self, scope: Scope, *, limit: int) -> list[Checkpoint]:
        rows = self._s.query(
            f"SELECT id, created, data FROM checkpoints WHERE {KEY} ORDER BY n DESC LIMIT ?", (*scope.require_thread().key, limit)
        )
        return [Checkpoint(i, scope, datetime.fromisoformat(c), json.loads(d)) for i, c, d in rows]


class _Jobs:
    def __init__(self, store: SQLiteStore) -> None:
        self._s = store

    def claim(self, *, worker: str, lease_seconds: float = 300.0, scope: Scope | None = None, waiting: bool = False) -> Job | None:
        now = _us(utcnow())
        sql = (
            "SELECT tenant, user_id, agent_id, thread_id, layer, requested, cursor, attempts, last_error FROM jobs "
            "WHERE (lease_us IS NULL OR lease_us <= ?) AND (not_before_us IS NULL OR not_before_us <= ?) AND (requested > done OR (? AND waiting = 1))"
        )
        params: list[Any] = [now, now, int(waiting)]
        if scope is not None:
            sql += f" AND {USER}"
            params += [scope.tenant, scope.user_id]
        with self._s.write() as db:
            row = db.execute(sql + " ORDER BY pending_since_us LIMIT 1", params).fetchone()
            if row is None:
                return None
            tenant, user_id, agent_id, thread_id, layer, requested, cursor, attempts, last_error = row
            db.execute(
                f"UPDATE jobs SET owner = ?, lease_us = ? WHERE {KEY} AND layer = ?",
                (worker, now + int(lease_seconds * 1_000_000), tenant, user_id, agent_id, thread_id, layer),
            )
        sc = Scope(tenant=tenant, user_id=user_id, agent_id=agent_id or None, thread_id=thread_id or None)
        return Job(sc, layer, requested, cursor, attempts, worker, last_error)

    def complete(self, job: Job, *, cursor: int, waiting: bool = False) -> bool:
        with self._s.write() as db:
            done = db.execute(
                "UPDATE jobs SET done = max(done, ?), cursor = max(cursor, ?), attempts = 0, last_error = NULL, not_before_us = NULL, waiting = ?, "
                f"lease_us = NULL, owner = NULL WHERE {KEY} AND layer = ? AND owner = ?",
                (job.version, cursor, int(waiting), *job.scope.key, job.layer, job.worker),
            )
            return done.rowcount == 1

    def renew(self, job: Job, *, lease_seconds: float) -> bool:
        with self._s.write() as db:
            renewed = db.execute(
                f"UPDATE jobs SET lease_us = ? WHERE {KEY} AND layer = ? AND owner = ?",
                (_us(utcnow()) + int(lease_seconds * 1_000_000), *job.scope.key, job.layer, job.worker),
            )
            return renewed.rowcount == 1

    def fail(self, job: Job, error: str, *, retry_in: float) -> None:
        with self._s.write() as db:
            db.execute(
                f"UPDATE jobs SET attempts = attempts + 1, last_error = ?, not_before_us = ?, lease_us = NULL, owner = NULL WHERE {KEY} AND layer = ? AND (owner IS NULL OR owner = ?)",
                (error, _us(utcnow()) + int(retry_in * 1_000_000), *job.scope.key, job.layer, job.worker),
            )

    def pending(self, scope: Scope | None = None) -> int:
        sql, params = "SELECT count(*) FROM jobs WHERE requested > done", []
        if scope is not None:
            sql += f" AND {USER}"
            params = [scope.tenant, scope.user_id]
        return self._s.query(sql, params)[0][0]


# Retrieval and record storage live in their own modules; their migrations follow the core's.
from .sqlite_records import (  # noqa: E402
    DELETION_KEY_MIGRATION,
    DELETION_NOTES_MIGRATION,
    RECORD_MIGRATIONS,
    RECORD_TABLES,
    SQLiteRecords,
    SQLiteUsage,
    read_deletions,
    record_deletion,
)
from .sqlite_units import UNIT_MIGRATIONS, UNIT_TABLES, SQLiteUnits  # noqa: E402
from .sqlite_vectors import VECTOR_MIGRATIONS, VECTOR_TABLES, SQLiteEmbeddingCache, SQLiteVectorIndex  # noqa: E402


def _m007_profiles(db: sqlite3.Connection) -> None:
    _statements(db, "CREATE TABLE profiles (tenant TEXT PRIMARY KEY, value TEXT NOT NULL, updated_us INTEGER NOT NULL)")


MIGRATIONS += (
    UNIT_MIGRATIONS
    + VECTOR_MIGRATIONS
    + RECORD_MIGRATIONS
    + [("006_job_waiting", _m006_job_waiting), ("007_profiles", _m007_profiles), DELETION_KEY_MIGRATION, DELETION_NOTES_MIGRATION]
)
USER_TABLES += UNIT_TABLES + VECTOR_TABLES + RECORD_TABLES
THREAD_TABLES += UNIT_TABLES + VECTOR_TABLES + RECORD_TABLES
