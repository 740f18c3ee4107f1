"""SQLite record store and usage log: versioned records, their audit trail and model calls.

The rules (what a put or delete does, namespaces, what deleting removes) are those of
``memory_records``, whose ``step`` decides every change here too. Tables:

- ``records``: every version of every key, unique on (key columns, kind, key, version), with a
  partial unique index on the current ones (``invalid_at IS NULL``): at most one current record
  per key, and ``current`` reads that index in key order;
- ``record_audit``: one row per event, read per user newest first through (tenant, user_id, n);
- ``model_usage``: one row per model call, read per user oldest first through (tenant, user_id, at_us);
- ``deletions`` (migration ``005_deletions``): one row per deletion note (``types.Deletion``):
  tenant, a keyed hash of the user id (``backends.deletions``: the key in ``deletion_key``,
  migration ``008_deletion_key``), when and how many rows went; since ``009_deletion_notes`` also
  the kind (user, thread, note), the keyed hash of the thread or note, the rows by what they were
  (JSON) and the layer that deleted; nothing else.

Values are JSON text (``ensure_ascii=False``: Chinese is stored as is); times are ISO text in UTC,
with UTC microseconds beside the usage rows' time for ``since``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ..types import AuditEvent, Change, Deletion, Record, Scope, UsageRecord, utcnow
from . import deletions
from .deletions import keyed, new_secret
from .memory_records import Step, check_kind, check_layer, check_limit, check_usage, prepare, scope_of_key, step, utc

if TYPE_CHECKING:
    from .sqlite import SQLiteStore

_SCHEMA = (
    """CREATE TABLE records (
        n INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
        kind TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, id TEXT NOT NULL,
        value TEXT NOT NULL, source_ids TEXT NOT NULL,
        valid_from TEXT, invalid_at TEXT, created TEXT NOT NULL,
        UNIQUE (tenant, user_id, agent_id, thread_id, kind, key, version)
    )""",
    """CREATE UNIQUE INDEX records_current ON records (tenant, user_id, agent_id, thread_id, kind, key)
        WHERE invalid_at IS NULL""",
    """CREATE TABLE record_audit (
        n INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
        id TEXT NOT NULL, layer TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, action TEXT NOT NULL,
        before TEXT, after TEXT, source_ids TEXT NOT NULL, at TEXT NOT NULL
    )""",
    "CREATE INDEX record_audit_user ON record_audit (tenant, user_id, n)",
    """CREATE TABLE model_usage (
        n INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT NOT NULL,
        layer TEXT NOT NULL, model TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
        latency_ms REAL NOT NULL, ok INTEGER NOT NULL, error TEXT, at TEXT NOT NULL, at_us INTEGER NOT NULL
    )""",
    "CREATE INDEX model_usage_user ON model_usage (tenant, user_id, at_us)",
)

_DELETIONS = (
    """CREATE TABLE deletions (
        n INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL, user_hash TEXT NOT NULL, at TEXT NOT NULL, rows_deleted INTEGER NOT NULL
    )""",
    "CREATE INDEX deletions_tenant ON deletions (tenant, n)",
)


def _m004_records(db: sqlite3.Connection) -> None:
    for statement in _SCHEMA:
        db.execute(statement)


def _m005_deletions(db: sqlite3.Connection) -> None:
    for statement in _DELETIONS:
        db.execute(statement)


def _m008_deletion_key(db: sqlite3.Connection) -> None:
    """The store's secret for the deletion notes' keyed hash; notes that held a bare sha256 are
    rehashed under it."""
    db.execute("CREATE TABLE deletion_key (id INTEGER PRIMARY KEY CHECK (id = 1), secret BLOB NOT NULL)")
    notes = db.execute("SELECT n, tenant, user_hash FROM deletions").fetchall()
    if notes:
        secret = _deletion_secret(db)
        db.executemany(
            "UPDATE deletions SET user_hash = ? WHERE n = ?", [(keyed(secret, tenant, digest), n) for n, tenant, digest in notes]
        )


def _deletion_secret(db: sqlite3.Connection) -> bytes:
    """The store's deletion key, made on first use (in the caller's transaction)."""
    row = db.execute("SELECT secret FROM deletion_key WHERE id = 1").fetchone()
    if row is None:
        db.execute("INSERT INTO deletion_key (id, secret) VALUES (1, ?)", (new_secret(),))
        row = db.execute("SELECT secret FROM deletion_key WHERE id = 1").fetchone()
    return bytes(row[0])


def _m009_deletion_notes(db: sqlite3.Connection) -> None:
    """Notes of threads and saved memories too, with counts and who deleted (older notes: a user's,
    counts unknown, by an unknown layer)."""
    for statement in (
        "ALTER TABLE deletions ADD COLUMN kind TEXT NOT NULL DEFAULT 'user'",
        "ALTER TABLE deletions ADD COLUMN target_hash TEXT",
        "ALTER TABLE deletions ADD COLUMN counts TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE deletions ADD COLUMN layer TEXT",
        "CREATE INDEX deletions_user ON deletions (tenant, user_hash, n)",
    ):
        db.execute(statement)


RECORD_MIGRATIONS = [("004_records", _m004_records), ("005_deletions", _m005_deletions)]
#: after the core's 006 and 007 (sqlite.MIGRATIONS)
DELETION_KEY_MIGRATION = ("008_deletion_key", _m008_deletion_key)
DELETION_NOTES_MIGRATION = ("009_deletion_notes", _m009_deletion_notes)
#: delete_user and delete_thread clear these (the audit trail of a thread goes with the thread);
#: ``deletions`` is in neither: it is the record that a user was deleted.
RECORD_TABLES = ["records", "record_audit", "model_usage"]

KEY = "tenant = ? AND user_id = ? AND agent_id = ? AND thread_id = ?"
RECORD_COLUMNS = "tenant, user_id, agent_id, thread_id, id, kind, key, value, source_ids, valid_from, invalid_at, created, version"
AUDIT_COLUMNS = "tenant, user_id, agent_id, thread_id, id, layer, kind, key, action, before, after, source_ids, at"
USAGE_COLUMNS = "tenant, user_id, agent_id, thread_id, layer, model, prompt_tokens, completion_tokens, latency_ms, ok, error, at"
CHUNK = 500  # keys per statement, well under SQLite's limit on bound parameters
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _us(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _record(row: Sequence[Any]) -> Record:
    *key, id_, kind, name, value, source_ids, valid_from, invalid_at, created, version = row
    return Record(
        id=id_,
        scope=scope_of_key(key),
        kind=kind,
        key=name,
        value=json.loads(value),
        source_ids=tuple(json.loads(source_ids)),
        valid_from=_time(valid_from),
        invalid_at=_time(invalid_at),
        created_at=datetime.fromisoformat(created),
        version=version,
    )


def _event(row: Sequence[Any]) -> AuditEvent:
    *key, id_, layer, kind, name, action, before, after, source_ids, at = row
    return AuditEvent(
        id_,
        scope_of_key(key),
        layer,
        kind,
        name,
        action,
        _load(before),
        _load(after),
        tuple(json.loads(source_ids)),
        datetime.fromisoformat(at),
    )


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _usage(row: Sequence[Any]) -> UsageRecord:
    *key, layer, model, prompt, completion, latency, ok, error, at = row
    return UsageRecord(scope_of_key(key), layer, model, prompt, completion, latency, bool(ok), error, datetime.fromisoformat(at))


def _chunks(keys: Sequence[str]) -> Iterator[list[str]]:
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), CHUNK):
        yield unique[start : start + CHUNK]


def _user(scope: Scope, kind: str | None = None) -> tuple[str, list[Any]]:
    """The per-user condition of the audit and usage reads: the scope's agent if it names one."""
    sql, params = "tenant = ? AND user_id = ?", [scope.tenant, scope.user_id]
    if scope.agent_id is not None:
        sql += " AND agent_id = ?"
        params.append(scope.agent_id)
    if kind is not None:
        sql += " AND kind = ?"
        params.append(check_kind(kind))
    return sql, params


class SQLiteRecords:
    """The RecordStore of a SQLiteStore (its connection, lock and write transactions)."""

    def __init__(self, store: SQLiteStore) -> None:
        self._s = store

    def current(self, scope: Scope, kind: str, keys: Sequence[str] | None = None) -> list[Record]:
        sql = f"SELECT {RECORD_COLUMNS} FROM records WHERE {KEY} AND kind = ? AND invalid_at IS NULL"
        params = [*scope.key, check_kind(kind)]
        if keys is None:
            return [_record(r) for r in self._s.query(sql + " ORDER BY key", params)]
        rows = [r for chunk in _chunks(keys) for r in self._s.query(f"{sql} AND key IN ({','.join('?' * len(chunk))})", [*params, *chunk])]
        return sorted((_record(r) for r in rows), key=lambda r: r.key)

    def history(self, scope: Scope, kind: str, key: str) -> list[Record]:
        rows = self._s.query(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE {KEY} AND kind = ? AND key = ? ORDER BY version",
            [*scope.key, check_kind(kind), key],
        )
        return [_record(r) for r in rows]

    def apply(self, scope: Scope, changes: Sequence[Change], *, layer: str) -> list[AuditEvent]:
        check_layer(layer)
        prepared = prepare(changes)
        if not prepared:
            return []
        scope = scope_of_key(scope.key)
        now = utcnow()
        events = []
        with self._s.write() as db:
            for change in prepared:
                latest = db.execute(
                    f"SELECT {RECORD_COLUMNS}, n FROM records WHERE {KEY} AND kind = ? AND key = ? ORDER BY version DESC LIMIT 1",
                    (*scope.key, change.kind, change.key),
                ).fetchone()
                done = step(scope, change, _record(latest[:-1]) if latest else None, layer=layer, now=now)
                _write(db, done, latest[-1] if latest else None)
                if done.event is not None:
                    events.append(done.event)
        return events

    def audit(self, scope: Scope, *, kind: str | None = None, limit: int | None = None) -> list[AuditEvent]:
        check_limit(limit)
        where, params = _user(scope, kind)
        rows = self._s.query(
            f"SELECT {AUDIT_COLUMNS} FROM record_audit WHERE {where} ORDER BY n DESC LIMIT ?", [*params, -1 if limit is None else limit]
        )
        return [_event(r) for r in rows]

    def users(self, tenant: str) -> list[str]:
        return [
            r[0]
            for r in self._s.query(
                "SELECT DISTINCT user_id FROM records WHERE tenant = ? AND invalid_at IS NULL ORDER BY user_id", (tenant,)
            )
        ]

    def delete(self, scope: Scope, kind: str | None = None) -> int:
        sql, params = f"DELETE FROM records WHERE {KEY}", list(scope.key)
        if kind is not None:
            sql += " AND kind = ?"
            params.append(check_kind(kind))
        with self._s.write() as db:
            return db.execute(sql, params).rowcount


def _write(db: sqlite3.Connection, done: Step, latest: int | None) -> None:
    """Carry out a ``step`` on the key whose latest version is row ``latest``."""
    if done.retire is not None:
        db.execute("UPDATE records SET invalid_at = ? WHERE n = ?", (_iso(done.retire), latest))
    if done.sources is not None:
        db.execute("UPDATE records SET source_ids = ? WHERE n = ?", (_json(list(done.sources)), latest))
    if (r := done.insert) is not None:
        db.execute(
            f"INSERT INTO records ({RECORD_COLUMNS}) VALUES ({','.join('?' * 13)})",
            (
                *r.scope.key,
                r.id,
                r.kind,
                r.key,
                _json(r.value),
                _json(list(r.source_ids)),
                _iso(r.valid_from),
                None,
                _iso(r.created_at),
                r.version,
            ),
        )
    if (e := done.event) is not None:
        db.execute(
            f"INSERT INTO record_audit ({AUDIT_COLUMNS}) VALUES ({','.join('?' * 13)})",
            (*e.scope.key, e.id, e.layer, e.kind, e.key, e.action, _json(e.before), _json(e.after), _json(list(e.source_ids)), _iso(e.at)),
        )


class SQLiteUsage:
    """The UsageLog of a SQLiteStore."""

    def __init__(self, store: SQLiteStore) -> None:
        self._s = store

    def record(self, rows: Sequence[UsageRecord]) -> None:
        checked = check_usage(rows)
        if not checked:
            return
        with self._s.write() as db:
            db.executemany(
                f"INSERT INTO model_usage ({USAGE_COLUMNS}, at_us) VALUES ({','.join('?' * 13)})",
                [
                    (
                        *r.scope.key,
                        r.layer,
                        r.model,
                        r.prompt_tokens,
                        r.completion_tokens,
                        r.latency_ms,
                        int(r.ok),
                        r.error,
                        _iso(r.at),
                        _us(r.at),
                    )
                    for r in checked
                ],
            )

    def read(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        """Oldest first by ``at`` (then in recording order); ``since`` is inclusive."""
        where, params = _user(scope)
        if since is not None:
            where += " AND at_us >= ?"
            params.append(_us(utc(since, field_name="since")))
        return [_usage(r) for r in self._s.query(f"SELECT {USAGE_COLUMNS} FROM model_usage WHERE {where} ORDER BY at_us, n", params)]


def record_deletion(
    db: sqlite3.Connection, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None
) -> Deletion:
    """Note, in the caller's transaction, a deletion in the scope (no content, no id)."""
    d = deletions.note(_deletion_secret(db), scope, kind, counts, layer=layer, name=name)
    db.execute(
        "INSERT INTO deletions (tenant, user_hash, at, rows_deleted, kind, target_hash, counts, layer) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (d.tenant, d.user_hash, d.at.isoformat(), d.rows, d.kind, d.target_hash, json.dumps(d.counts), d.layer),
    )
    return d


def read_deletions(store: SQLiteStore, tenant: str, user_id: str | None = None) -> list[Deletion]:
    """The tenant's notes (of one user), oldest first."""
    sql, params = "SELECT tenant, user_hash, at, rows_deleted, kind, target_hash, counts, layer FROM deletions WHERE tenant = ?", [tenant]
    if user_id is not None:
        key = store.query("SELECT secret FROM deletion_key WHERE id = 1")
        if not key:
            return []  # no key: nothing was ever deleted
        sql += " AND user_hash = ?"
        params.append(deletions.user_hash(bytes(key[0][0]), tenant, user_id))
    rows = store.query(sql + " ORDER BY n", params)
    return [
        Deletion(t, kind, u, target, datetime.fromisoformat(at), n, json.loads(counts), layer)
        for t, u, at, n, kind, target, counts, layer in rows
    ]
