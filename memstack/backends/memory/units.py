"""In-memory unit store, and the BM25 definition every unit store shares (the reference implementation).

BM25 here is Okapi BM25 with Lucene's always-positive IDF, over the terms of ``memstack.text``:

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(u) = sum over distinct query terms t in u of
               idf(t) * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(u) / avglen))

N, df and avglen are the statistics of the corpus searched: the scope's tenant+user (only the
scope's agent's units when it names one), never other users', so one user's data cannot change
another's ranking. Filters (SearchFilter) choose among that corpus's units; they do not change its
statistics. The score returned is ``score / best``, where ``best = sum idf(t) * (K1 + 1)`` is the
limit no unit reaches (every query term, infinitely often, in a unit of length zero): so scores
are in [0, 1), monotonic in BM25 for a query, and a unit of average length holding every query
term once scores 1 / (K1 + 1) ~ 0.45. Scores are rounded to 9 decimals (``SCALE``: sums taken in
a different order must tie exactly), then sorted best first, ties by unit id. The SQLite and
PostgreSQL stores compute the same formula in SQL and return the same ranking.
"""

from __future__ import annotations

import copy
import math
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from ..errors import InvalidInput
from ..text import analyze_query, segment
from ..types import Scope, Scored, SearchFilter, Unit
from .memory import json_copy

K1 = 1.2
B = 0.75
SCALE = 1e9  # scores are rounded to 9 decimals: round(score * SCALE) / SCALE, in every store


def idf(df: int, units: int) -> float:
    return math.log(1 + (units - df + 0.5) / (df + 0.5))


def best_score(idfs: Iterable[float]) -> float:
    """The normaliser: what a unit would score with every query term infinitely often."""
    return sum(w * (K1 + 1) for w in idfs)


def term_score(weight: float, tf: int, length: int, avglen: float) -> float:
    return weight * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avglen))


def term_counts(unit: Unit) -> Counter[str]:
    """The unit's indexed terms with their frequencies (its length is their sum)."""
    return Counter(segment(unit.text))


def check_units(units: Sequence[Unit]) -> list[Unit]:
    """The units to store, the last of each key winning; InvalidInput for anything not a Unit."""
    latest: dict[tuple[str, str, str, str], Unit] = {}
    for unit in units:
        if not isinstance(unit, Unit):
            raise InvalidInput(f"expected Unit, got {type(unit).__name__}", field="units")
        key = (*unit.scope.key[:3], unit.id)
        latest.pop(key, None)
        latest[key] = unit
    return list(latest.values())


def check_k(k: int) -> None:
    if not isinstance(k, int) or k < 0:
        raise InvalidInput("k must be a non-negative integer", field="k")


def check_batch(batch: int) -> None:
    if not isinstance(batch, int) or batch < 1:
        raise InvalidInput("batch must be a positive integer", field="batch")


@dataclass
class _Corpus:
    """One (tenant, user, agent)'s units and their inverted index."""

    units: dict[str, tuple[Unit, Counter[str]]] = field(default_factory=dict)
    postings: dict[str, set[str]] = field(default_factory=dict)
    tokens: int = 0

    def add(self, unit: Unit, counts: Counter[str]) -> None:
        self.remove(unit.id)
        self.units[unit.id] = (unit, counts)
        self.tokens += counts.total()
        for term in counts:
            self.postings.setdefault(term, set()).add(unit.id)

    def remove(self, unit_id: str) -> bool:
        found = self.units.pop(unit_id, None)
        if found is None:
            return False
        _, counts = found
        self.tokens -= counts.total()
        for term in counts:
            ids = self.postings[term]
            ids.discard(unit_id)
            if not ids:
                del self.postings[term]
        return True


def _copy(unit: Unit) -> Unit:
    return replace(unit, metadata=copy.deepcopy(dict(unit.metadata)))


class MemoryUnits:
    """Units in dicts behind one lock, one inverted index per (tenant, user, agent); see the module
    docstring for the ranking. Stored and returned units are copies (metadata included)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._users: dict[tuple[str, str], dict[str, _Corpus]] = {}  # (tenant, user) -> agent -> corpus

    def put(self, units: Sequence[Unit]) -> None:
        stored = [(replace(u, metadata=json_copy(u.metadata)), term_counts(u)) for u in check_units(units)]
        with self._lock:
            for unit, counts in stored:
                agents = self._users.setdefault((unit.scope.tenant, unit.scope.user_id), {})
                agents.setdefault(unit.scope.agent_id or "", _Corpus()).add(unit, counts)

    def get(self, scope: Scope, ids: Sequence[str]) -> list[Unit]:
        """Units in the order of ``ids``; an id several of the user's agents hold gives each of them."""
        with self._lock:
            corpora = [c for _, c in sorted(self._owned(scope))]  # by agent, as the SQL stores
            found = [c.units[i][0] for i in dict.fromkeys(ids) for c in corpora if i in c.units]
        return [_copy(u) for u in found]

    def in_rounds(self, scope: Scope, rounds: Sequence[int]) -> list[Unit]:
        wanted = thread_rounds(scope, rounds)
        with self._lock:
            corpus = self._users.get((scope.tenant, scope.user_id), {}).get(scope.agent_id or "")
            found = (
                [u for u, _ in corpus.units.values() if u.scope.thread_id == scope.thread_id and u.round in wanted]
                if corpus and wanted
                else []
            )
        return [_copy(u) for u in found]

    def users(self, tenant: str, *, thread_id: str | None = None) -> list[str]:
        with self._lock:
            return sorted(
                user
                for (t, user), agents in self._users.items()
                if t == tenant
                and any(thread_id is None or u.scope.thread_id == thread_id for c in agents.values() for u, _ in c.units.values())
            )

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        """By id in the user (the scope's agent, or every agent when it names none); with ids None,
        the scope's thread (its exact key, as the history store's) or else all of the user's."""
        with self._lock:
            agents = self._users.get((scope.tenant, scope.user_id), {})
            if ids is not None:
                deleted = sum(c.remove(i) for _, c in self._owned(scope) for i in set(ids))
            elif scope.thread_id is not None:
                corpus = agents.get(scope.agent_id or "", _Corpus())
                deleted = sum(corpus.remove(i) for i in [i for i, (u, _) in corpus.units.items() if u.scope.thread_id == scope.thread_id])
            else:
                doomed = self._owned(scope)
                deleted = sum(len(c.units) for _, c in doomed)
                for agent, _ in doomed:
                    del agents[agent]
            for agent in [a for a, c in agents.items() if not c.units]:
                del agents[agent]
            if not agents:
                self._users.pop((scope.tenant, scope.user_id), None)
            return deleted

    def iterate(self, scope: Scope | None = None, *, batch: int = 500, thread_id: str | None = None) -> Iterator[list[Unit]]:
        """Batches of a snapshot taken when iteration starts, corpus by corpus in insertion order."""
        check_batch(batch)
        with self._lock:
            corpora = self._owned(scope) if scope is not None else [(a, c) for agents in self._users.values() for a, c in agents.items()]
            units = [u for _, c in corpora for u, _ in c.units.values() if thread_id is None or u.scope.thread_id == thread_id]
        for start in range(0, len(units), batch):
            yield [_copy(u) for u in units[start : start + batch]]

    def keyword_search(self, scope: Scope, query: str, *, k: int, where: SearchFilter | None = None) -> list[Scored]:
        """Best first, ties by id (then agent: an id several agents hold is found once per agent)."""
        check_k(k)
        terms = analyze_query(query)
        if not terms or k == 0:
            return []
        with self._lock:
            ranked = sorted(_bm25(self._owned(scope), terms, where))
        return [Scored(unit_id, -negated) for negated, unit_id, _ in ranked[:k]]

    def _owned(self, scope: Scope) -> list[tuple[str, _Corpus]]:
        """(agent, corpus) of the scope's user: every agent's, or the scope's agent's only."""
        agents = self._users.get((scope.tenant, scope.user_id), {})
        return [(a, c) for a, c in agents.items() if scope.agent_id is None or a == scope.agent_id]


def thread_rounds(scope: Scope, rounds: Sequence[int]) -> set[int]:
    """The round numbers asked for, after checking that the scope names a thread."""
    if scope.thread_id is None:
        raise InvalidInput("in_rounds needs a scope with a thread", field="thread_id")
    return {int(r) for r in rounds}


def _bm25(corpora: list[tuple[str, _Corpus]], terms: list[str], where: SearchFilter | None) -> list[tuple[float, str, str]]:
    """(-score, unit id, agent) of every matching unit of ``corpora``, taken as one corpus."""
    units = sum(len(c.units) for _, c in corpora)
    if not units:
        return []
    avglen = sum(c.tokens for _, c in corpora) / units or 1.0
    weights = {t: idf(sum(len(c.postings.get(t, ())) for _, c in corpora), units) for t in terms}
    best = best_score(weights.values())
    found = []
    for agent, corpus in corpora:
        for unit_id in set().union(*(corpus.postings.get(t, set()) for t in terms)):
            unit, counts = corpus.units[unit_id]
            if where is None or where.matches(unit):
                length = counts.total()
                raw = sum(term_score(weights[t], counts[t], length, avglen) for t in terms if t in counts)
                found.append((-round(raw / best * SCALE) / SCALE, unit_id, agent))
    return found
