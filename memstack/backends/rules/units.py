"""BM25 as every unit store ranks, and the unit stores' input checks.

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
a different order must tie exactly), then sorted best first, ties by unit id. The in-memory
store computes it in Python, the SQLite and PostgreSQL stores in SQL, and all return the same
ranking.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from ...errors import InvalidInput
from ...text import analyze_query, segment
from ...types import Scope, Unit

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


def query_terms(query: str, k: int) -> list[str]:
    """The query's terms to rank by, after checking ``k``; none (nothing to search) for k=0."""
    check_k(k)
    terms = analyze_query(query)
    return terms if k else []


def check_batch(batch: int) -> None:
    if not isinstance(batch, int) or batch < 1:
        raise InvalidInput("batch must be a positive integer", field="batch")


def thread_rounds(scope: Scope, rounds: Sequence[int]) -> set[int]:
    """The round numbers asked for, after checking that the scope names a thread."""
    if scope.thread_id is None:
        raise InvalidInput("in_rounds needs a scope with a thread", field="thread_id")
    return {int(r) for r in rounds}
