"""PostgreSQL record store and usage log: versioned records, their audit trail and model calls.

The rules (what a put or delete does, namespaces, what deleting removes) are those of
``memory_records``, whose ``step`` decides every change here too. Tables:

- ``memstack_records``: every version of every key, unique on (key columns, kind, key, version),
  with a partial unique index on the current ones (``invalid_at IS NULL``, key in ``"C"``
  collation): at most one current record per key, and ``current`` reads it in code-point order;
- ``memstack_record_audit``: one row per event, read per user newest first through (tenant, user_id, n);
- ``memstack_model_usage``: one row per model call, read per user oldest first through (tenant, user_id, at, n);
- ``memstack_deletions`` (migration ``0005_deletions``): one row per deletion note
  (``types.Deletion``): tenant, a keyed hash of the user id (``backends.deletions``: the key in
  ``memstack_deletion_key``, migration ``0008_deletion_key``), when and how many rows went; since
  ``0009_deletion_notes`` also the kind (user, thread, note), the keyed hash of the thread or
  note, the rows by what they were and the layer that deleted; nothing else.

``apply`` holds an advisory lock on the scope's record namespace for its transaction, so two
writers of one key take turns instead of both inserting a version (the partial unique index
would refuse the second). Values are jsonb; times come back in UTC. Text PostgreSQL cannot store
(NUL characters) is InvalidInput, through the store's error translation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..types import AuditEvent, Change, Deletion, Record, Scope, UsageRecord, utcnow
from . import deletions
from .deletions import keyed, new_secret
from .memory_records import Step, check_kind, check_layer, check_limit, check_usage, prepare, scope_of_key, step, utc

if TYPE_CHECKING:
    from psycopg import Cursor

    from .postgres import _Database

RECORD_SCHEMA = """
CREATE TABLE memstack_records (
    n          BIGSERIAL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    thread_id  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    key        TEXT NOT NULL,
    version    INTEGER NOT NULL,
    id         TEXT NOT NULL,
    value      JSONB NOT NULL,
    source_ids JSONB NOT NULL,
    valid_from TIMESTAMPTZ,           -- when it became true (the source messages' time), if known
    invalid_at TIMESTAMPTZ,           -- when it stopped being current; NULL while current
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (tenant, user_id, agent_id, thread_id, kind, key, version)
);
CREATE UNIQUE INDEX memstack_records_current ON memstack_records (tenant, user_id, agent_id, thread_id, kind, key COLLATE "C")
    WHERE invalid_at IS NULL;

CREATE TABLE memstack_record_audit (
    n          BIGSERIAL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    thread_id  TEXT NOT NULL,
    id         TEXT NOT NULL,
    layer      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    key        TEXT NOT NULL,
    action     TEXT NOT NULL,         -- add, supersede or delete
    before     JSONB,
    after      JSONB,
    source_ids JSONB NOT NULL,
    at         TIMESTAMPTZ NOT NULL   -- when it was recorded
);
CREATE INDEX memstack_record_audit_user ON memstack_record_audit (tenant, user_id, n);

CREATE TABLE memstack_model_usage (
    n                 BIGSERIAL PRIMARY KEY,
    tenant            TEXT NOT NULL,
    user_id           TEXT NOT NULL,
    agent_id          TEXT NOT NULL,
    thread_id         TEXT NOT NULL,
    layer             TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_ms        DOUBLE PRECISION NOT NULL,
    ok                BOOLEAN NOT NULL,
    error             TEXT,
    at                TIMESTAMPTZ NOT NULL
);
CREATE INDEX memstack_model_usage_user ON memstack_model_usage (tenant, user_id, at, n);
"""

DELETIONS_SCHEMA = """
CREATE TABLE memstack_deletions (
    n            BIGSERIAL PRIMARY KEY,
    tenant       TEXT NOT NULL,
    user_hash    TEXT NOT NULL,
    at           TIMESTAMPTZ NOT NULL,
    rows_deleted BIGINT NOT NULL
);
CREATE INDEX memstack_deletions_tenant ON memstack_deletions (tenant, n);
"""

RECORD_MIGRATIONS: list[tuple[str, str]] = [("0004_records", RECORD_SCHEMA), ("0005_deletions", DELETIONS_SCHEMA)]


def _m0008_deletion_key(cur: Cursor[Any]) -> None:
    """The store's secret for the deletion notes' keyed hash; notes that held a bare sha256 are
    rehashed under it."""
    cur.execute("CREATE TABLE memstack_deletion_key (id INTEGER PRIMARY KEY CHECK (id = 1), secret BYTEA NOT NULL)")
    cur.execute("SELECT n, tenant, user_hash FROM memstack_deletions")
    notes = cur.fetchall()
    if notes:
        secret = _deletion_secret(cur)
        cur.executemany(
            "UPDATE memstack_deletions SET user_hash = %s WHERE n = %s", [(keyed(secret, tenant, digest), n) for n, tenant, digest in notes]
        )


def _deletion_secret(cur: Cursor[Any]) -> bytes:
    """The store's deletion key, made on first use (in the caller's transaction; of two
    processes making it at once, the second waits for the first and reads its key)."""
    cur.execute("INSERT INTO memstack_deletion_key (id, secret) VALUES (1, %s) ON CONFLICT (id) DO NOTHING", (new_secret(),))
    cur.execute("SELECT secret FROM memstack_deletion_key WHERE id = 1")
    return bytes(cur.fetchone()[0])


#: after the core's 0006 and 0007 (postgres.MIGRATIONS)
DELETION_KEY_MIGRATION = ("0008_deletion_key", _m0008_deletion_key)
#: notes of threads and saved memories too, with counts and who deleted (older notes: a user's,
#: counts unknown, by an unknown layer)
DELETION_NOTES_MIGRATION = (
    "0009_deletion_notes",
    """ALTER TABLE memstack_deletions ADD COLUMN kind TEXT NOT NULL DEFAULT 'user', ADD COLUMN target_hash TEXT,
        ADD COLUMN counts JSONB NOT NULL DEFAULT '{}', ADD COLUMN layer TEXT;
    CREATE INDEX memstack_deletions_user ON memstack_deletions (tenant, user_hash, n)""",
)
#: delete_user and delete_thread clear these (the audit trail of a thread goes with the thread);
#: memstack_deletions is in neither: it is the record that a user was deleted.
RECORD_TABLES = ["memstack_records", "memstack_record_audit", "memstack_model_usage"]

KEY = "tenant = %s AND user_id = %s AND agent_id = %s AND thread_id = %s"
RECORD_COLUMNS = "tenant, user_id, agent_id, thread_id, id, kind, key, value, source_ids, valid_from, invalid_at, created_at, version"
AUDIT_COLUMNS = "tenant, user_id, agent_id, thread_id, id, layer, kind, key, action, before, after, source_ids, at"
USAGE_COLUMNS = "tenant, user_id, agent_id, thread_id, layer, model, prompt_tokens, completion_tokens, latency_ms, ok, error, at"


def _json(value: Any) -> str | None:
    """JSON text for a jsonb parameter (values were checked by ``prepare``: NaN cannot reach here)."""
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _record(row: Sequence[Any]) -> Record:
    *key, id_, kind, name, value, source_ids, valid_from, invalid_at, created_at, version = row
    return Record(
        id=id_,
        scope=scope_of_key(key),
        kind=kind,
        key=name,
        value=value,
        source_ids=tuple(source_ids),
        valid_from=valid_from,
        invalid_at=invalid_at,
        created_at=created_at,
        version=version,
    )


def _event(row: Sequence[Any]) -> AuditEvent:
    *key, id_, layer, kind, name, action, before, after, source_ids, at = row
    return AuditEvent(id_, scope_of_key(key), layer, kind, name, action, before, after, tuple(source_ids), at)


def _usage(row: Sequence[Any]) -> UsageRecord:
    *key, layer, model, prompt, completion, latency, ok, error, at = row
    return UsageRecord(scope_of_key(key), layer, model, prompt, completion, latency, ok, error, at)


def _user(scope: Scope, kind: str | None = None) -> tuple[str, list[Any]]:
    """The per-user condition of the audit and usage reads: the scope's agent if it names one."""
    sql, params = "tenant = %s AND user_id = %s", [scope.tenant, scope.user_id]
    if scope.agent_id is not None:
        sql += " AND agent_id = %s"
        params.append(scope.agent_id)
    if kind is not None:
        sql += " AND kind = %s"
        params.append(check_kind(kind))
    return sql, params


def _lock_namespace(cur: Cursor[Any], schema: str, scope: Scope) -> None:
    """Serialise writers of the scope's records until the transaction ends."""
    cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("\x1f".join(("memstack.records", schema, *scope.key)),))


class PostgresRecords:
    """The RecordStore of a PostgresStore (one transaction per call, errors translated)."""

    def __init__(self, db: _Database) -> None:
        self._db = db

    def current(self, scope: Scope, kind: str, keys: Sequence[str] | None = None) -> list[Record]:
        sql = f"SELECT {RECORD_COLUMNS} FROM memstack_records WHERE {KEY} AND kind = %s AND invalid_at IS NULL"
        params: list[Any] = [*scope.key, check_kind(kind)]
        if keys is not None:
            sql += " AND key = ANY(%s)"
            params.append(list(keys))
        with self._db.transaction("reading records") as cur:
            cur.execute(sql + ' ORDER BY key COLLATE "C"', params)
            return [_record(r) for r in cur.fetchall()]

    def history(self, scope: Scope, kind: str, key: str) -> list[Record]:
        with self._db.transaction("reading a record's history") as cur:
            cur.execute(
                f"SELECT {RECORD_COLUMNS} FROM memstack_records WHERE {KEY} AND kind = %s AND key = %s ORDER BY version",
                [*scope.key, check_kind(kind), key],
            )
            return [_record(r) for r in cur.fetchall()]

    def apply(self, scope: Scope, changes: Sequence[Change], *, layer: str) -> list[AuditEvent]:
        check_layer(layer)
        prepared = prepare(changes)
        if not prepared:
            return []
        scope = scope_of_key(scope.key)
        now = utcnow()
        events = []
        with self._db.transaction("applying record changes") as cur:
            _lock_namespace(cur, self._db.schema, scope)
            for change in prepared:
                cur.execute(
                    f"SELECT {RECORD_COLUMNS}, n FROM memstack_records WHERE {KEY} AND kind = %s AND key = %s ORDER BY version DESC LIMIT 1",
                    (*scope.key, change.kind, change.key),
                )
                latest = cur.fetchone()
                done = step(scope, change, _record(latest[:-1]) if latest else None, layer=layer, now=now)
                _write(cur, done, latest[-1] if latest else None)
                if done.event is not None:
                    events.append(done.event)
        return events

    def audit(self, scope: Scope, *, kind: str | None = None, limit: int | None = None) -> list[AuditEvent]:
        check_limit(limit)
        where, params = _user(scope, kind)
        with self._db.transaction("reading the audit trail") as cur:
            cur.execute(f"SELECT {AUDIT_COLUMNS} FROM memstack_record_audit WHERE {where} ORDER BY n DESC LIMIT %s", [*params, limit])
            return [_event(r) for r in cur.fetchall()]

    def users(self, tenant: str) -> list[str]:
        with self._db.transaction("listing users with records") as cur:
            cur.execute(
                "SELECT DISTINCT user_id FROM memstack_records WHERE tenant = %s AND invalid_at IS NULL ORDER BY user_id", (tenant,)
            )
            return [r[0] for r in cur.fetchall()]

    def delete(self, scope: Scope, kind: str | None = None) -> int:
        sql, params = f"DELETE FROM memstack_records WHERE {KEY}", list(scope.key)
        if kind is not None:
            sql += " AND kind = %s"
            params.append(check_kind(kind))
        with self._db.transaction("deleting records") as cur:
            _lock_namespace(cur, self._db.schema, scope)
            cur.execute(sql, params)
            return cur.rowcount


def _write(cur: Cursor[Any], done: Step, latest: int | None) -> None:
    """Carry out a ``step`` on the key whose latest version is row ``latest``."""
    if done.retire is not None:
        cur.execute("UPDATE memstack_records SET invalid_at = %s WHERE n = %s", (done.retire, latest))
    if done.sources is not None:
        cur.execute("UPDATE memstack_records SET source_ids = %s::jsonb WHERE n = %s", (_json(list(done.sources)), latest))
    if (r := done.insert) is not None:
        cur.execute(
            f"""INSERT INTO memstack_records ({RECORD_COLUMNS})
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, NULL, %s, %s)""",
            (*r.scope.key, r.id, r.kind, r.key, _json(r.value), _json(list(r.source_ids)), r.valid_from, r.created_at, r.version),
        )
    if (e := done.event) is not None:
        cur.execute(
            f"""INSERT INTO memstack_record_audit ({AUDIT_COLUMNS})
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s)""",
            (*e.scope.key, e.id, e.layer, e.kind, e.key, e.action, _json(e.before), _json(e.after), _json(list(e.source_ids)), e.at),
        )


class PostgresUsage:
    """The UsageLog of a PostgresStore."""

    def __init__(self, db: _Database) -> None:
        self._db = db

    def record(self, rows: Sequence[UsageRecord]) -> None:
        checked = check_usage(rows)
        if not checked:
            return
        with self._db.transaction("recording model usage") as cur:
            cur.executemany(
                f"INSERT INTO memstack_model_usage ({USAGE_COLUMNS}) VALUES ({', '.join(['%s'] * 12)})",
                [
                    (*r.scope.key, r.layer, r.model, r.prompt_tokens, r.completion_tokens, r.latency_ms, r.ok, r.error, r.at)
                    for r in checked
                ],
            )

    def read(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        """Oldest first by ``at`` (then in recording order); ``since`` is inclusive."""
        where, params = _user(scope)
        if since is not None:
            where += " AND at >= %s"
            params.append(utc(since, field_name="since"))
        with self._db.transaction("reading model usage") as cur:
            cur.execute(f"SELECT {USAGE_COLUMNS} FROM memstack_model_usage WHERE {where} ORDER BY at, n", params)
            return [_usage(r) for r in cur.fetchall()]


def record_deletion(
    cur: Cursor[Any], scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None
) -> Deletion:
    """Note, in the caller's transaction, a deletion in the scope (no content, no id)."""
    d = deletions.note(_deletion_secret(cur), scope, kind, counts, layer=layer, name=name)
    cur.execute(
        "INSERT INTO memstack_deletions (tenant, user_hash, at, rows_deleted, kind, target_hash, counts, layer) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s)",
        (d.tenant, d.user_hash, d.at, d.rows, d.kind, d.target_hash, json.dumps(d.counts), d.layer),
    )
    return d


def read_deletions(db: _Database, tenant: str, user_id: str | None = None) -> list[Deletion]:
    """The tenant's notes (of one user), oldest first."""
    with db.transaction("reading deletions") as cur:
        sql, params = (
            "SELECT tenant, user_hash, at, rows_deleted, kind, target_hash, counts, layer FROM memstack_deletions WHERE tenant = %s",
            [tenant],
        )
        if user_id is not None:
            cur.execute("SELECT secret FROM memstack_deletion_key WHERE id = 1")
            key = cur.fetchone()
            if key is None:
                return []  # no key: nothing was ever deleted
            sql += " AND user_hash = %s"
            params.append(deletions.user_hash(bytes(key[0]), tenant, user_id))
        cur.execute(sql + " ORDER BY n", params)
        return [Deletion(t, kind, u, target, at, n, dict(counts), layer) for t, u, at, n, kind, target, counts, layer in cur.fetchall()]
