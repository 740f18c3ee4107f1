"""The vector index contract's rules in code: input checks, the held model, scores in [0, 1], order,
and the embedding cache's rows.

Every VectorIndex calls these, so that a wrong dimension, a NaN or a zero vector fails the same
way on every backend and results come back in the same order (best first, ties by unit id).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ...errors import InvalidInput
from ...types import Scored, Unit

REINDEX = "run `memstack reindex` to re-embed every unit with the new model (it resets the index first)"


def unit_rows(vectors: Any, n: int) -> np.ndarray:
    """``vectors`` as an (n, d) float32 array of rows scaled to length 1.

    Raises InvalidInput for another number of rows than units, an empty dimension, NaN or
    infinite values, or a zero vector (it has no direction, so no cosine).
    """
    try:
        matrix = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"vectors must be an (n, d) array of numbers: {exc}", field="vectors") from exc
    if matrix.ndim != 2 or matrix.shape[0] != n or matrix.shape[1] < 1:
        raise InvalidInput(f"vectors must have shape ({n}, d) to match {n} units, got {matrix.shape}", field="vectors")
    return _normalised(matrix)


def query_row(vector: Any, dimension: int, *, advice: str = REINDEX) -> np.ndarray:
    """A query vector as a float32 row of length 1; InvalidInput for a wrong dimension or bad values
    (``advice``: what the message tells the reader to do about a wrong dimension)."""
    try:
        row = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"the query vector must be a sequence of numbers: {exc}", field="vector") from exc
    if row.ndim != 1:
        raise InvalidInput(f"the query vector must be one-dimensional, got shape {row.shape}", field="vector")
    if row.shape[0] != dimension:
        raise InvalidInput(
            f"the query vector has {row.shape[0]} dimensions but the index holds {dimension}-dimensional vectors; {advice}", field="vector"
        )
    return _normalised(row[None, :])[0]


def _normalised(matrix: np.ndarray) -> np.ndarray:
    if not np.isfinite(matrix).all():
        raise InvalidInput("vectors must not contain NaN or infinite values", field="vectors")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if (norms == 0).any():
        raise InvalidInput("a zero vector has no direction and cannot be compared by cosine", field="vectors")
    return (matrix / norms).astype(np.float32)


def check_model(held_model: str | None, held_dimension: int | None, model: str, dimension: int, *, advice: str = REINDEX) -> None:
    """Refuse vectors of another model or dimension than the index holds (None: it holds none);
    ``advice`` says what to do (the default: ``memstack reindex``, which empties the index first)."""
    if not isinstance(model, str) or not model.strip():
        raise InvalidInput("model must be a non-empty string naming the embedding model", field="model")
    if held_model is not None and held_model != model:
        raise InvalidInput(f"the index holds vectors of model {held_model!r}, not {model!r}; {advice}", field="model")
    if held_dimension is not None and held_dimension != dimension:
        raise InvalidInput(f"the index holds {held_dimension}-dimensional vectors, got {dimension}; {advice}", field="vectors")


def latest_per_key(units: Sequence[Unit], rows: np.ndarray) -> tuple[list[Unit], np.ndarray]:
    """Keep the last of units sharing (tenant, user, agent, id), as upserting them in order would."""
    last = {(*u.scope.key[:3], u.id): i for i, u in enumerate(units)}
    keep = sorted(last.values())
    return [units[i] for i in keep], rows[keep]


def upsert_batch(units: Sequence[Unit], vectors: Any) -> tuple[list[Unit], np.ndarray]:
    """The checked rows of an upsert, the last of each key kept; ([], empty) for no units."""
    units = list(units)
    if not units:
        return [], np.empty((0, 0), dtype=np.float32)
    return latest_per_key(units, unit_rows(vectors, len(units)))


def score(cosine: float) -> float:
    """Cosine similarity mapped to [0, 1] by (1 + cos) / 2."""
    return min(1.0, max(0.0, (1.0 + float(cosine)) / 2.0))


def best_first(scored: Iterable[tuple[str, float]], k: int) -> list[Scored]:
    """The ``k`` best (unit id, score) pairs, highest score first, equal scores by unit id."""
    return [Scored(id_, s) for id_, s in sorted(scored, key=lambda pair: (-pair[1], pair[0]))[: max(k, 0)]]


def cache_row(vector: Any) -> np.ndarray:
    """A cached embedding as a 1-d float32 array (stored as given, not normalised)."""
    row = np.array(vector, dtype=np.float32)
    if row.ndim != 1 or not np.isfinite(row).all():
        raise InvalidInput("a cached embedding must be a 1-d vector of finite numbers", field="vectors")
    return row
