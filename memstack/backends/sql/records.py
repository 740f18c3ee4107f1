"""The record store's and usage log's SQL that SQLite and PostgreSQL write alike, for a ``Dialect``.

What differs between the two is the Dialect's: table names, placeholders, and how JSON, times and
flags are held (``Dialect.json_mark``, ``json_of``, ``time_value``, ``time_of``, ``flag``;
SQLite's usage rows keep UTC microseconds in ``at_us`` beside ``at``). Each backend keeps its own
transactions, locks (PostgreSQL's advisory lock on a namespace) and the reads that differ (the
collation ``current`` sorts by, SQLite's chunked key lists). The functions run their statements
on the caller's runner (``Run``: ``db.execute`` of a sqlite3 connection, ``cur.execute`` of a
psycopg cursor).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from ...types import AuditEvent, Record, Scope, UsageRecord, UsageTotal
from ..rules.json_values import json_text
from ..rules.records import Prepared, Step, check_kind, check_usage, scope_of_key, step
from ..rules.time import utc
from .adapter_rows import Run
from .dialect import Dialect, Fetch
from .where import user

AUDIT_COLUMNS = "tenant, user_id, agent_id, thread_id, id, layer, kind, key, action, before, after, source_ids, at"
USAGE_COLUMNS = "tenant, user_id, agent_id, thread_id, layer, model, prompt_tokens, completion_tokens, latency_ms, ok, error, at"


def record_of(d: Dialect, row: Sequence[Any]) -> Record:
    """A ``records`` row (its columns in the order of the backend's RECORD_COLUMNS) as a Record."""
    *key, id_, kind, name, value, source_ids, valid_from, invalid_at, created_at, version = row
    return Record(
        id=id_,
        scope=scope_of_key(key),
        kind=kind,
        key=name,
        value=d.json_of(value),
        source_ids=tuple(d.json_of(source_ids)),
        valid_from=d.time_of(valid_from),
        invalid_at=d.time_of(invalid_at),
        created_at=d.time_of(created_at),
        version=version,
    )


def event_of(d: Dialect, row: Sequence[Any]) -> AuditEvent:
    """A ``record_audit`` row (AUDIT_COLUMNS) as an AuditEvent."""
    *key, id_, layer, kind, name, action, before, after, source_ids, at = row
    return AuditEvent(
        id_,
        scope_of_key(key),
        layer,
        kind,
        name,
        action,
        d.json_of(before),
        d.json_of(after),
        tuple(d.json_of(source_ids)),
        d.time_of(at),
    )


def usage_of(d: Dialect, row: Sequence[Any]) -> UsageRecord:
    """A ``model_usage`` row (USAGE_COLUMNS) as a UsageRecord."""
    *key, layer, model, prompt, completion, latency, ok, error, at = row
    return UsageRecord(scope_of_key(key), layer, model, prompt, completion, latency, bool(ok), error, d.time_of(at))


def apply_steps(
    run: Run, d: Dialect, columns: str, scope: Scope, prepared: Sequence[Prepared], *, layer: str, now: datetime
) -> list[AuditEvent]:
    """Decide (``rules.records.step``) and write each prepared change in ``run``'s transaction, in
    order, from its key's latest version; the events written."""
    events = []
    for change in prepared:
        latest = run(
            f"SELECT {columns}, n FROM {d.table('records')} WHERE {d.key} AND kind = {d.mark} AND key = {d.mark} "
            "ORDER BY version DESC LIMIT 1",
            (*scope.key, change.kind, change.key),
        ).fetchone()
        done = step(scope, change, record_of(d, latest[:-1]) if latest else None, layer=layer, now=now)
        write_step(run, d, columns, done, latest[-1] if latest else None)
        if done.event is not None:
            events.append(done.event)
    return events


def insert_record(run: Run, d: Dialect, columns: str, r: Record) -> None:
    """One record version, verbatim."""
    m, j = d.mark, d.json_mark
    run(
        f"INSERT INTO {d.table('records')} ({columns}) VALUES ({d.marks(7)}, {j}, {j}, {m}, {m}, {m}, {m})",
        (
            *r.scope.key,
            r.id,
            r.kind,
            r.key,
            json_text(r.value),
            json_text(list(r.source_ids)),
            d.time_value(r.valid_from),
            d.time_value(r.invalid_at),
            d.time_value(r.created_at),
            r.version,
        ),
    )


def insert_event(run: Run, d: Dialect, e: AuditEvent) -> None:
    """One audit event, verbatim."""
    m, j = d.mark, d.json_mark
    run(
        f"INSERT INTO {d.table('record_audit')} ({AUDIT_COLUMNS}) VALUES ({d.marks(9)}, {j}, {j}, {j}, {m})",
        (
            *e.scope.key,
            e.id,
            e.layer,
            e.kind,
            e.key,
            e.action,
            json_text(e.before),
            json_text(e.after),
            json_text(list(e.source_ids)),
            d.time_value(e.at),
        ),
    )


def write_step(run: Run, d: Dialect, columns: str, done: Step, latest: int | None) -> None:
    """Carry out a ``step`` on the key whose latest version is row ``latest``."""
    m, j, records = d.mark, d.json_mark, d.table("records")
    if done.retire is not None:
        run(f"UPDATE {records} SET invalid_at = {m} WHERE n = {m}", (d.time_value(done.retire), latest))
    if done.sources is not None:
        run(f"UPDATE {records} SET source_ids = {j} WHERE n = {m}", (json_text(list(done.sources)), latest))
    if (r := done.insert) is not None:
        insert_record(run, d, columns, r)  # (a version is inserted current: invalid_at None)
    if (e := done.event) is not None:
        insert_event(run, d, e)


def current_query(d: Dialect, columns: str, scope: Scope, kind: str) -> tuple[str, list[Any]]:
    """The scope's current records of ``kind`` (the caller adds the keys and the order)."""
    sql = f"SELECT {columns} FROM {d.table('records')} WHERE {d.key} AND kind = {d.mark} AND invalid_at IS NULL"
    return sql, [*scope.key, check_kind(kind)]


def current(fetch: Fetch, d: Dialect, columns: str, scope: Scope, kind: str, keys: Sequence[str] | None) -> list[Record]:
    """``RecordStore.current``: the scope's current records of ``kind`` (only ``keys`` when
    given), by key in code point order (UTF-8 byte order, as both dialects' binary collation)."""
    sql, params = current_query(d, columns, scope, kind)
    if keys is None:
        rows = list(fetch(sql, params))
    else:
        rows = []
        for group in d.groups(keys):
            condition, values = d.any_of("key", group)
            rows += fetch(f"{sql} AND {condition}", [*params, *values])
    return sorted((record_of(d, r) for r in rows), key=lambda r: r.key)


def history_query(d: Dialect, columns: str, scope: Scope, kind: str, key: str) -> tuple[str, list[Any]]:
    """Every version of one key, oldest first."""
    sql = f"SELECT {columns} FROM {d.table('records')} WHERE {d.key} AND kind = {d.mark} AND key = {d.mark} ORDER BY version"
    return sql, [*scope.key, check_kind(kind), key]


def audit_query(d: Dialect, scope: Scope, kind: str | None, limit: int | None) -> tuple[str, list[Any]]:
    """The user's audit events (of ``kind``, if given), newest first, at most ``limit``."""
    where, params = user(d, scope, kind)
    sql = f"SELECT {AUDIT_COLUMNS} FROM {d.table('record_audit')} WHERE {where} ORDER BY n DESC"
    if limit is not None:
        sql += f" LIMIT {d.mark}"
        params.append(limit)
    return sql, params


def users_query(d: Dialect, tenant: str) -> tuple[str, list[Any]]:
    """The tenant's users with a current record, in order."""
    return f"SELECT DISTINCT user_id FROM {d.table('records')} WHERE tenant = {d.mark} AND invalid_at IS NULL ORDER BY user_id", [tenant]


def delete_query(d: Dialect, scope: Scope, kind: str | None) -> tuple[str, list[Any]]:
    """Every version of the scope's records (of ``kind``, if given)."""
    sql, params = f"DELETE FROM {d.table('records')} WHERE {d.key}", list(scope.key)
    if kind is not None:
        sql += f" AND kind = {d.mark}"
        params.append(check_kind(kind))
    return sql, params


def dump_queries(d: Dialect, columns: str, scope: Scope) -> tuple[tuple[str, list[Any]], tuple[str, list[Any]]]:
    """The user's record versions and audit events (every agent and thread), each in stored order."""
    where, params = f"tenant = {d.mark} AND user_id = {d.mark}", [scope.tenant, scope.user_id]
    return (
        (f"SELECT {columns} FROM {d.table('records')} WHERE {where} ORDER BY n", list(params)),
        (f"SELECT {AUDIT_COLUMNS} FROM {d.table('record_audit')} WHERE {where} ORDER BY n", list(params)),
    )


def restore(run: Run, d: Dialect, columns: str, records: Sequence[Record], events: Sequence[AuditEvent]) -> int:
    """``RecordStore.restore`` in ``run``'s transaction: insert the versions and events whose id
    the user does not hold yet, verbatim; the count stored."""
    m, n = d.mark, 0
    for r in records:
        held = f"SELECT 1 FROM {d.table('records')} WHERE tenant = {m} AND user_id = {m} AND id = {m}"
        if run(held, (r.scope.tenant, r.scope.user_id, r.id)).fetchone():
            continue
        insert_record(run, d, columns, r)
        n += 1
    for e in events:
        held = f"SELECT 1 FROM {d.table('record_audit')} WHERE tenant = {m} AND user_id = {m} AND id = {m}"
        if run(held, (e.scope.tenant, e.scope.user_id, e.id)).fetchone():
            continue
        insert_event(run, d, e)
        n += 1
    return n


def usage_insert(d: Dialect, rows: Sequence[UsageRecord]) -> tuple[str, list[tuple[Any, ...]]]:
    """The INSERT of checked usage rows (``rules.records.check_usage``), and each row's parameters."""
    instant = d.instant_column("at")
    columns = USAGE_COLUMNS if instant == "at" else f"{USAGE_COLUMNS}, {instant}"
    sql = f"INSERT INTO {d.table('model_usage')} ({columns}) VALUES ({d.marks(columns.count(',') + 1)})"
    params = []
    for r in rows:
        row = (
            *r.scope.key,
            r.layer,
            r.model,
            r.prompt_tokens,
            r.completion_tokens,
            r.latency_ms,
            d.flag(r.ok),
            r.error,
            d.time_value(r.at),
        )
        params.append(row if instant == "at" else (*row, d.instant(r.at)))
    return sql, params


def usage_query(d: Dialect, scope: Scope, since: datetime | None) -> tuple[str, list[Any]]:
    """The user's usage rows oldest first by ``at`` (then in recording order); ``since`` is inclusive."""
    where, params = user(d, scope)
    instant = d.instant_column("at")
    if since is not None:
        where += f" AND {instant} >= {d.mark}"
        params.append(d.instant(utc(since, field_name="since")))
    return f"SELECT {USAGE_COLUMNS} FROM {d.table('model_usage')} WHERE {where} ORDER BY {instant}, n", params


def totals_query(d: Dialect, tenant: str, since: datetime | None, until: datetime | None, user_id: str | None) -> tuple[str, list[Any]]:
    """The tenant's usage summed per (user, layer) with ``since`` <= at < ``until``."""
    instant = d.instant_column("at")
    where, params = f"tenant = {d.mark}", [tenant]
    if user_id is not None:
        where += f" AND user_id = {d.mark}"
        params.append(user_id)
    if since is not None:
        where += f" AND {instant} >= {d.mark}"
        params.append(d.instant(utc(since, field_name="since")))
    if until is not None:
        where += f" AND {instant} < {d.mark}"
        params.append(d.instant(utc(until, field_name="until")))
    sums = "count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0)"
    table = d.table("model_usage")
    return f"SELECT user_id, layer, {sums} FROM {table} WHERE {where} GROUP BY user_id, layer ORDER BY user_id, layer", params


class SQLUsage:
    """The UsageLog both SQL backends share: checks, the statements and the row codec here; the
    backend's ``transaction(doing)`` (its connection or cursor has ``executemany``) for a record,
    and its ``fetch`` for a read."""

    def __init__(self, d: Dialect, transaction: Callable[[str], AbstractContextManager[Any]], fetch: Fetch) -> None:
        self._dialect, self._transaction, self._fetch = d, transaction, fetch

    def record(self, rows: Sequence[UsageRecord]) -> None:
        checked = check_usage(rows)
        if checked:
            with self._transaction("recording model usage") as db:
                db.executemany(*usage_insert(self._dialect, checked))

    def read(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        """Oldest first by ``at`` (then in recording order); ``since`` is inclusive."""
        return [usage_of(self._dialect, r) for r in self._fetch(*usage_query(self._dialect, scope, since))]

    def totals(
        self, tenant: str, *, since: datetime | None = None, until: datetime | None = None, user_id: str | None = None
    ) -> list[UsageTotal]:
        """Summed per (user, layer), sorted by user then layer (``stores.UsageLog.totals``)."""
        rows = self._fetch(*totals_query(self._dialect, tenant, since, until, user_id))
        return [UsageTotal(u, layer, int(n), int(p), int(c)) for u, layer, n, p, c in rows]
