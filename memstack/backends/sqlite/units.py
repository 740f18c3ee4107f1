"""SQLite unit store: units in the store's file with a per-user inverted index for exact BM25.

Ranking is the shared BM25 of ``rules.units`` (per-user statistics, same scores and order),
computed in SQL over three tables kept consistent by triggers (``migrations``, ``002_units``):

- ``units``: one row per unit, with its terms as JSON ``{term: tf}`` and its length;
- ``unit_terms`` (WITHOUT ROWID, key owner, term, n): the postings, one row per distinct term
  of a unit, so a query reads only the user's postings of its own terms;
- ``unit_owners``: one row per (tenant, user, agent) holding units, with its unit and token counts.

Inserting or deleting a ``units`` row updates the other two in the same statement, so the store's
``delete_user`` and ``delete_thread`` (which delete from ``units``) clear the index too, and an
owner row goes when its last unit goes. Rows are never updated in place: ``put`` deletes and
inserts. FTS5 was measured and not used: its bm25() takes N, document frequencies and average
length over the whole table (every user's units), and it was slower than these postings for one
user's query among many users' units. The price is space and write time: the postings take more
room than an FTS5 table would.
Timestamps are kept as ISO text (exact round trip, offset included) and UTC microseconds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from ...types import Scope, Scored, SearchFilter, Unit
from ..rules.json_values import json_copy
from ..rules.time import epoch_us
from ..rules.units import K1, SCALE, B, best_score, check_batch, check_units, idf, query_terms, term_counts
from ..sql.dialect import SQLITE, chunks
from ..sql.units import in_order, in_rounds, pages, users_query
from ..sql.where import corpus as where_corpus
from ..sql.where import filters as where_filters
from ..sql.where import with_agent
from .database import Database

COLUMNS = "tenant, user_id, agent_id, thread_id, id, text, ts, kind, round, category, source_ids, metadata"
INSERT_COLUMNS = f"{COLUMNS}, ts_us, terms, length, owner"


def _row(unit: Unit) -> tuple[Any, ...]:
    """Values for ``INSERT_COLUMNS`` but the owner (segmenting the text: done before taking the lock)."""
    counts = term_counts(unit)
    return (
        *unit.scope.key,
        unit.id,
        unit.text,
        unit.timestamp.isoformat(),
        unit.kind,
        unit.round,
        unit.category,
        json.dumps(list(unit.source_ids), ensure_ascii=False),
        json.dumps(json_copy(unit.metadata), ensure_ascii=False),
        epoch_us(unit.timestamp),
        json.dumps(counts, ensure_ascii=False),
        counts.total(),
    )


def _unit(row: Sequence[Any]) -> Unit:
    tenant, user_id, agent_id, thread_id, id_, text, ts, kind, round_, category, source_ids, metadata = row[:12]
    return Unit(
        id=id_,
        scope=Scope(tenant=tenant, user_id=user_id, agent_id=agent_id or None, thread_id=thread_id),
        text=text,
        timestamp=datetime.fromisoformat(ts),
        kind=kind,
        round=round_,
        category=category,
        source_ids=tuple(json.loads(source_ids)),
        metadata=json.loads(metadata),
    )


class SQLiteUnits:
    """The UnitStore of a SQLiteStore (its connection, lock and write transactions)."""

    def __init__(self, db: Database) -> None:
        self._s = db

    def put(self, units: Sequence[Unit]) -> None:
        units = check_units(units)
        rows = [_row(unit) for unit in units]
        with self._s.write() as db:
            for unit in units:
                db.execute("DELETE FROM units WHERE tenant = ? AND user_id = ? AND agent_id = ? AND id = ?", (*unit.scope.key[:3], unit.id))
            owners = {unit.scope.key[:3]: 0 for unit in units}
            for key in owners:
                owners[key] = db.execute(
                    "INSERT INTO unit_owners (tenant, user_id, agent_id) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET units = units RETURNING owner",
                    key,
                ).fetchone()[0]
            db.executemany(
                f"INSERT INTO units ({INSERT_COLUMNS}) VALUES ({','.join('?' * 16)})",
                [(*row, owners[unit.scope.key[:3]]) for unit, row in zip(units, rows, strict=True)],
            )

    def get(self, scope: Scope, ids: Sequence[str]) -> list[Unit]:
        """Units in the order of ``ids``; an id several of the user's agents hold gives each of them."""
        corpus, params = where_corpus(SQLITE, scope)
        rows = (
            row
            for chunk in chunks(ids)
            for row in self._s.query(
                f"SELECT {COLUMNS} FROM units WHERE {corpus} AND id IN ({','.join('?' * len(chunk))}) ORDER BY agent_id", [*params, *chunk]
            )
        )
        return in_order(ids, rows, _unit)

    def in_rounds(self, scope: Scope, rounds: Sequence[int]) -> list[Unit]:
        return in_rounds(self._s.query, SQLITE, COLUMNS, _unit, scope, rounds)

    def users(self, tenant: str, *, thread_id: str | None = None) -> list[str]:
        return [r[0] for r in self._s.query(*users_query(SQLITE, tenant, thread_id))]

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        """By id in the user (the scope's agent, or every agent when it names none); with ids None,
        the scope's thread (its exact key, as the history store's) or else all of the user's."""
        corpus, params = where_corpus(SQLITE, scope)
        with self._s.write() as db:
            if ids is not None:
                return sum(
                    db.execute(f"DELETE FROM units WHERE {corpus} AND id IN ({','.join('?' * len(chunk))})", [*params, *chunk]).rowcount
                    for chunk in chunks(ids)
                )
            if scope.thread_id is not None:
                return db.execute(
                    "DELETE FROM units WHERE tenant = ? AND user_id = ? AND agent_id = ? AND thread_id = ?", scope.key
                ).rowcount
            return db.execute(f"DELETE FROM units WHERE {corpus}", params).rowcount

    def iterate(self, scope: Scope | None = None, *, batch: int = 500, thread_id: str | None = None) -> Iterator[list[Unit]]:
        """Batches in insertion order (per agent for a user), read page by page: units put during
        iteration may or may not be seen, and none is seen twice."""
        check_batch(batch)
        yield from pages(self._s.query, SQLITE, COLUMNS, _unit, scope, batch=batch, thread_id=thread_id)

    def keyword_search(self, scope: Scope, query: str, *, k: int, where: SearchFilter | None = None) -> list[Scored]:
        """Best first, ties by id (then agent); see ``rules.units`` for the scores."""
        terms = query_terms(query, k)
        if not terms:
            return []
        owners = self._s.query(*with_agent(SQLITE, "SELECT owner, units, tokens FROM unit_owners WHERE tenant = ? AND user_id = ?", scope))
        units = sum(row[1] for row in owners)
        if not units:
            return []
        ids = [row[0] for row in owners]
        marks = ",".join("?" * len(ids))
        df = Counter(
            dict(
                self._s.query(
                    f"SELECT term, count(*) FROM unit_terms WHERE owner IN ({marks}) AND term IN ({','.join('?' * len(terms))}) GROUP BY term",
                    [*ids, *terms],
                )
            )
        )
        weights = [(t, idf(df[t], units)) for t in terms]
        avglen = sum(row[2] for row in owners) / units or 1.0
        filters, filter_params = where_filters(SQLITE, where, alias="u.")
        # without filters, only units scoring at least the k-th best score need their id read
        keep = f"WHERE {filters}" if filters else "WHERE s.score >= coalesce((SELECT score FROM s ORDER BY score DESC LIMIT 1 OFFSET ?), 0)"
        rows = self._s.query(
            f"""WITH w(term, idf) AS (VALUES {",".join("(?, ?)" for _ in weights)}),
                s AS MATERIALIZED (
                    SELECT t.n AS n, round(sum(w.idf * t.tf * ? / (t.tf + ? * (? + ? * t.length / ?))) / ? * {SCALE}) / {SCALE} AS score
                    FROM w CROSS JOIN unit_terms t ON t.owner IN ({marks}) AND t.term = w.term
                    GROUP BY t.n)
                SELECT u.id, s.score FROM s JOIN units u ON u.n = s.n {keep}
                ORDER BY s.score DESC, u.id, u.agent_id LIMIT ?""",
            [
                *(x for pair in weights for x in pair),
                K1 + 1,
                K1,
                1 - B,
                B,
                avglen,
                best_score(w for _, w in weights),
                *ids,
                *(filter_params if filters else [k - 1]),
                k,
            ],
        )
        return [Scored(unit_id, score) for unit_id, score in rows]
