"""PostgreSQL unit store: units with a per-user inverted index for exact BM25 in SQL.

The design of the SQLite unit store, in PostgreSQL: ``memstack_units`` holds each unit with its terms
(jsonb ``{term: tf}``) and length; ``memstack_unit_terms`` (key owner, term, n) holds the postings;
``memstack_unit_owners`` holds each (tenant, user, agent)'s unit and token counts. Statement-level
triggers keep the last two in step with inserts and deletes of units, so the store's
``delete_user`` and ``delete_thread`` clear the index in their transaction. Ranking is the shared
BM25 of ``rules.units`` over the user's own statistics (not ``ts_rank``, which is not BM25), with
ties ordered by unit id in code-point order (``COLLATE "C"``), as in Python.

A unit's timestamp is stored as timestamptz plus its UTC offset, so it comes back with the offset
it was stored with. Text PostgreSQL cannot store (NUL characters) is InvalidInput.

The postings' primary key carries tf and length, so a query reads the index only (visiting the
heap for them was several times slower), at the price of room on disk.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta, timezone
from typing import TYPE_CHECKING, Any

from ...types import Scope, Scored, SearchFilter, Unit
from ..rules.units import K1, SCALE, B, best_score, check_batch, check_units, idf, query_terms, term_counts
from ..sql.dialect import POSTGRES
from ..sql.units import in_order, in_rounds, pages, users_query
from ..sql.where import corpus as where_corpus
from ..sql.where import filters as where_filters
from ..sql.where import with_agent
from .database import Database, to_json

if TYPE_CHECKING:
    from psycopg import Cursor

COLUMNS = "tenant, user_id, agent_id, thread_id, id, text, ts, ts_offset, kind, round, category, source_ids, metadata"
INSERT_COLUMNS = f"{COLUMNS}, terms, length, owner"
ROWS_PER_INSERT = 500


def _row(unit: Unit) -> tuple[Any, ...]:
    """Values for ``INSERT_COLUMNS`` but the owner (segmenting the text: done before the transaction)."""
    counts = term_counts(unit)
    offset = unit.timestamp.utcoffset()
    return (
        *unit.scope.key,
        unit.id,
        unit.text,
        unit.timestamp,
        int(offset.total_seconds()) if offset is not None else 0,
        unit.kind,
        unit.round,
        unit.category,
        to_json(list(unit.source_ids), field="source_ids", what="unit source_ids"),
        to_json(dict(unit.metadata), field="metadata", what="unit metadata"),
        to_json(counts, field="terms", what="unit terms"),
        counts.total(),
    )


def _unit(row: Sequence[Any]) -> Unit:
    tenant, user_id, agent_id, thread_id, id_, text, ts, offset, kind, round_, category, source_ids, metadata = row[:13]
    return Unit(
        id=id_,
        scope=Scope(tenant=tenant, user_id=user_id, agent_id=agent_id or None, thread_id=thread_id),
        text=text,
        timestamp=ts.astimezone(timezone(timedelta(seconds=offset))),
        kind=kind,
        round=round_,
        category=category,
        source_ids=tuple(source_ids),
        metadata=metadata,
    )


class PostgresUnits:
    """The UnitStore of a PostgresStore (one transaction per call, errors translated)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def put(self, units: Sequence[Unit]) -> None:
        units = check_units(units)
        if not units:
            return
        values = [_row(unit) for unit in units]
        with self._db.transaction("storing units") as cur:
            keys = list(zip(*(unit.scope.key[:3] + (unit.id,) for unit in units), strict=True))
            cur.execute(
                "DELETE FROM memstack_units WHERE (tenant, user_id, agent_id, id) IN "
                "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]))",
                [list(column) for column in keys],
            )
            owners = {key: _owner(cur, key) for key in sorted({unit.scope.key[:3] for unit in units})}
            rows = [(*row, owners[unit.scope.key[:3]]) for unit, row in zip(units, values, strict=True)]
            marks = "(" + ", ".join(["%s"] * 11 + ["%s::jsonb"] * 3 + ["%s", "%s"]) + ")"
            for start in range(0, len(rows), ROWS_PER_INSERT):
                chunk = rows[start : start + ROWS_PER_INSERT]
                cur.execute(
                    f"INSERT INTO memstack_units ({INSERT_COLUMNS}) VALUES {', '.join([marks] * len(chunk))}", [v for r in chunk for v in r]
                )

    def get(self, scope: Scope, ids: Sequence[str]) -> list[Unit]:
        """Units in the order of ``ids``; an id several of the user's agents hold gives each of them."""
        corpus, params = where_corpus(POSTGRES, scope)
        with self._db.transaction("reading units") as cur:
            cur.execute(
                f'SELECT {COLUMNS} FROM memstack_units WHERE {corpus} AND id = ANY(%s) ORDER BY agent_id COLLATE "C"', [*params, list(ids)]
            )
            return in_order(ids, cur.fetchall(), _unit)

    def in_rounds(self, scope: Scope, rounds: Sequence[int]) -> list[Unit]:
        return in_rounds(self._fetch, POSTGRES, COLUMNS, _unit, scope, rounds)

    def users(self, tenant: str, *, thread_id: str | None = None) -> list[str]:
        with self._db.transaction("listing users with units") as cur:
            cur.execute(*users_query(POSTGRES, tenant, thread_id))
            return [r[0] for r in cur.fetchall()]

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        """By id in the user (the scope's agent, or every agent when it names none); with ids None,
        the scope's thread (its exact key, as the history store's) or else all of the user's."""
        corpus, params = where_corpus(POSTGRES, scope)
        with self._db.transaction("deleting units") as cur:
            if ids is not None:
                cur.execute(f"DELETE FROM memstack_units WHERE {corpus} AND id = ANY(%s)", [*params, list(ids)])
            elif scope.thread_id is not None:
                cur.execute("DELETE FROM memstack_units WHERE tenant = %s AND user_id = %s AND agent_id = %s AND thread_id = %s", scope.key)
            else:
                cur.execute(f"DELETE FROM memstack_units WHERE {corpus}", params)
            return cur.rowcount

    def iterate(self, scope: Scope | None = None, *, batch: int = 500, thread_id: str | None = None) -> Iterator[list[Unit]]:
        """Batches in insertion order (per agent for a user), read page by page: units put during
        iteration may or may not be seen, and none is seen twice."""
        check_batch(batch)
        yield from pages(self._fetch, POSTGRES, COLUMNS, _unit, scope, batch=batch, thread_id=thread_id)

    def _fetch(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """One statement's rows, in a transaction of its own."""
        with self._db.transaction("reading units") as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def keyword_search(self, scope: Scope, query: str, *, k: int, where: SearchFilter | None = None) -> list[Scored]:
        """Best first, ties by id (then agent); see ``rules.units`` for the scores."""
        terms = query_terms(query, k)
        if not terms:
            return []
        filters, filter_params = where_filters(POSTGRES, where, alias="u.")
        with self._db.transaction("searching units") as cur:
            cur.execute(
                *with_agent(POSTGRES, "SELECT owner, units, tokens FROM memstack_unit_owners WHERE tenant = %s AND user_id = %s", scope)
            )
            owners = cur.fetchall()
            units = sum(row[1] for row in owners)
            if not units:
                return []
            ids = [row[0] for row in owners]
            cur.execute(
                "SELECT term, count(*) FROM memstack_unit_terms WHERE owner = ANY(%s) AND term = ANY(%s) GROUP BY term", [ids, terms]
            )
            df = dict(cur.fetchall())
            weights = [idf(df.get(t, 0), units) for t in terms]
            # without filters, only units scoring at least the k-th best score need their id read
            keep = (
                f"WHERE {filters}"
                if filters
                else "WHERE s.score >= coalesce((SELECT score FROM s ORDER BY score DESC LIMIT 1 OFFSET %s), 0)"
            )
            cur.execute(
                f"""WITH w(term, idf) AS (SELECT * FROM unnest(%s::text[], %s::float8[])),
                    s AS MATERIALIZED (
                        SELECT t.n, round(sum(w.idf * t.tf * %s / (t.tf + %s * (%s + %s * t.length / %s))) / %s * {SCALE}) / {SCALE} AS score
                        FROM w JOIN memstack_unit_terms t ON t.owner = ANY(%s) AND t.term = w.term
                        GROUP BY t.n)
                    SELECT u.id, s.score FROM s JOIN memstack_units u ON u.n = s.n {keep}
                    ORDER BY s.score DESC, u.id COLLATE "C", u.agent_id COLLATE "C" LIMIT %s""",
                [
                    terms,
                    weights,
                    K1 + 1,
                    K1,
                    1 - B,
                    B,
                    sum(row[2] for row in owners) / units or 1.0,
                    best_score(weights),
                    ids,
                    *(filter_params if filters else [k - 1]),
                    k,
                ],
            )
            return [Scored(unit_id, score) for unit_id, score in cur.fetchall()]


def _owner(cur: Cursor[Any], key: tuple[str, str, str]) -> int:
    """The owner id of (tenant, user, agent), created if new; its row stays locked until commit,
    so a concurrent delete of the owner's last unit cannot remove it under this transaction."""
    cur.execute(
        """INSERT INTO memstack_unit_owners (tenant, user_id, agent_id) VALUES (%s, %s, %s)
           ON CONFLICT (tenant, user_id, agent_id) DO UPDATE SET units = memstack_unit_owners.units RETURNING owner""",
        key,
    )
    row = cur.fetchone()
    assert row is not None  # INSERT ... ON CONFLICT DO UPDATE always returns the row
    return row[0]
