"""In-memory unit store: units in dicts behind one lock, one inverted index per (tenant, user,
agent); ranked by the BM25 of ``rules.units`` (the reference the SQL stores match)."""

from __future__ import annotations

import copy
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from ...types import Scope, Scored, SearchFilter, Unit
from ..rules.json_values import json_copy
from ..rules.units import SCALE, best_score, check_batch, check_units, idf, query_terms, term_counts, term_score, thread_rounds


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
    docstring of ``rules.units`` for the ranking. Stored and returned units are copies (metadata included)."""

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

    def tenants(self) -> set[str]:
        with self._lock:
            return {t for (t, _), agents in self._users.items() if any(c.units for c in agents.values())}

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
        terms = query_terms(query, k)
        if not terms:
            return []
        with self._lock:
            ranked = sorted(_bm25(self._owned(scope), terms, where))
        return [Scored(unit_id, -negated) for negated, unit_id, _ in ranked[:k]]

    def _owned(self, scope: Scope) -> list[tuple[str, _Corpus]]:
        """(agent, corpus) of the scope's user: every agent's, or the scope's agent's only."""
        agents = self._users.get((scope.tenant, scope.user_id), {})
        return [(a, c) for a, c in agents.items() if scope.agent_id is None or a == scope.agent_id]


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
