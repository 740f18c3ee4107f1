"""Fusing ranked lists from several retrievers (weighted reciprocal rank fusion). Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..types import Scored

RRF_K = 60


@dataclass(frozen=True, slots=True)
class Fused:
    """A unit id with its fused score, its rank (1-based) and score in each retriever, and its
    support in [0, 1] (how strongly its best list found it; set by the searcher)."""

    id: str
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)
    scores: Mapping[str, float] = field(default_factory=dict)
    support: float = 1.0


def rrf(rankings: Mapping[str, Sequence[Scored]], *, weights: Mapping[str, float] | None = None, k: int = RRF_K) -> list[Fused]:
    """Weighted reciprocal rank fusion: sum over retrievers of weight / (k + rank).

    Sorted best first; ties go to the better best rank, then the id (deterministic)."""
    totals: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    scores: dict[str, dict[str, float]] = {}
    for name, ranked in rankings.items():
        w = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, item in enumerate(ranked, 1):
            totals[item.id] = totals.get(item.id, 0.0) + w / (k + rank)
            ranks.setdefault(item.id, {})[name] = rank
            scores.setdefault(item.id, {})[name] = item.score
    fused = [Fused(i, s, ranks[i], scores[i]) for i, s in totals.items()]
    fused.sort(key=lambda f: (-f.score, min(f.ranks.values()), f.id))
    return fused
