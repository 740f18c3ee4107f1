"""One user's vectors as an in-process float32 matrix, searched exactly with numpy.

``UserVectors`` holds one tenant+user's rows (every agent and thread) with their metadata as
integer-coded columns, so a SearchFilter becomes a boolean mask before scoring: the top k are
taken among matching rows only. Vectors are stored scaled to length 1, so cosine is a dot
product. The in-memory index keeps one per user; the SQLite index caches them per process.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...types import Scope, Scored, SearchFilter, Unit
from .time import epoch_us
from .vectors import best_first, score

#: below this share of matching rows the matching rows are gathered first, above it all are scored
GATHER_BELOW = 0.15
PYTHON_BYTES_PER_ROW = 200  # the row's key tuple, its dict entry and its id string, roughly


class UserVectors:
    """One user's vectors with (agent, thread, kind, category, timestamp) columns; not thread-safe."""

    def __init__(self, dimension: int, capacity: int = 16) -> None:
        self.dimension = dimension
        self.count = 0
        self._vectors = np.empty((capacity, dimension), np.float32)
        self._columns = np.empty((capacity, 4), np.int32)  # agent, thread, kind, category codes
        self._ts = np.empty(capacity, np.int64)
        self._keys: list[tuple[str, str]] = []  # (agent_id, unit id) of each row
        self._row: dict[tuple[str, str], int] = {}
        self._agents: set[str] = set()  # every agent id a row has had ('' for none)
        self._codes: dict[str | None, int] = {}

    @property
    def nbytes(self) -> int:
        return self._vectors.nbytes + self._columns.nbytes + self._ts.nbytes + PYTHON_BYTES_PER_ROW * self.count

    # ---- writing -------------------------------------------------------------------------

    def put(self, units: Sequence[Unit], rows: np.ndarray) -> None:
        """Insert or replace each unit's row (keyed by agent and unit id); ``rows`` are unit length."""
        for unit, vector in zip(units, rows, strict=True):
            key = (unit.scope.agent_id or "", unit.id)
            at = self._row.get(key)
            if at is None:
                at = self._append(key)
            self._vectors[at] = vector
            self._columns[at] = [self._code(key[0]), self._code(unit.scope.thread_id), self._code(unit.kind), self._code(unit.category)]
            self._ts[at] = epoch_us(unit.timestamp)

    def _append(self, key: tuple[str, str]) -> int:
        if self.count == len(self._vectors):
            self._grow(max(64, self.count + self.count // 4))  # +25%: a cached 100k user grows by 38 MB, not 154
        self._keys.append(key)
        self._agents.add(key[0])
        self._row[key] = self.count
        self.count += 1
        return self.count - 1

    def _grow(self, capacity: int) -> None:
        for name in ("_vectors", "_columns", "_ts"):
            old = getattr(self, name)
            new = np.empty((capacity, *old.shape[1:]), old.dtype)
            new[: self.count] = old[: self.count]
            setattr(self, name, new)

    def _code(self, value: str | None) -> int:
        return self._codes.setdefault(value, len(self._codes))

    def delete(self, scope: Scope, ids: Sequence[str] | None) -> int:
        """Delete rows by unit id (in the scope's agent, if any), else the scope's thread, else the user's."""
        rows = self._selected(scope, ids)
        for at in sorted(rows, reverse=True):
            self._remove(int(at))
        return len(rows)

    def _selected(self, scope: Scope, ids: Sequence[str] | None) -> list[int]:
        if ids is not None:
            agents = self._agents if scope.agent_id is None else {scope.agent_id}
            return [self._row[(a, i)] for a in agents for i in set(ids) if (a, i) in self._row]
        if scope.thread_id is None:
            return np.flatnonzero(self._scope_mask(scope.agent_id)).tolist()
        thread = self._scope_mask(scope.agent_id or "") & self._is_any(1, [scope.thread_id])  # the exact thread key
        return np.flatnonzero(thread).tolist()

    def _remove(self, at: int) -> None:
        """Move the last row into ``at`` (rows are unordered) and forget the removed key."""
        last = self.count - 1
        del self._row[self._keys[at]]
        if at != last:
            self._vectors[at] = self._vectors[last]
            self._columns[at] = self._columns[last]
            self._ts[at] = self._ts[last]
            self._keys[at] = self._keys[last]
            self._row[self._keys[at]] = at
        self._keys.pop()
        self.count = last

    # ---- searching -----------------------------------------------------------------------

    def search(self, query: np.ndarray, k: int, agent_id: str | None, where: SearchFilter | None) -> list[Scored]:
        """The exact top ``k`` rows matching the agent and filter, best first, ties by unit id."""
        if k <= 0 or self.count == 0:
            return []
        rows = self._matching(agent_id, where)
        if rows is None:
            cosines = dot(self._vectors[: self.count], query)
            rows = np.arange(self.count)
        elif rows.size == 0:
            return []
        elif rows.size < GATHER_BELOW * self.count:
            cosines = dot(self._vectors[rows], query)
        else:
            cosines = dot(self._vectors[: self.count], query)[rows]
        if k < cosines.size:
            kth = np.partition(cosines, cosines.size - k)[cosines.size - k]
            keep = np.flatnonzero(cosines >= kth)  # every row tied with the k-th, so ties resolve by id
            rows, cosines = rows[keep], cosines[keep]
        return best_first(((self._keys[r][1], score(c)) for r, c in zip(rows.tolist(), cosines.tolist(), strict=True)), k)

    def fetch(self, agent_id: str | None, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored rows of these unit ids (of the agent, when named), copied."""
        agents = [agent_id] if agent_id is not None else sorted(self._agents)
        out: dict[str, np.ndarray] = {}
        for unit_id in ids:
            row = next((self._row[(a, unit_id)] for a in agents if (a, unit_id) in self._row), None)
            if row is not None:
                out[unit_id] = self._vectors[row].copy()
        return out

    def _matching(self, agent_id: str | None, where: SearchFilter | None) -> np.ndarray | None:
        """Row numbers matching the agent and filter; None when every row matches."""
        if agent_id is None and (where is None or where == SearchFilter()):
            return None
        mask = self._scope_mask(agent_id)
        if where is not None:
            for column, values in ((1, where.thread_ids), (3, where.categories), (2, where.kinds)):
                if values:
                    mask &= self._is_any(column, values)
            if where.since is not None:
                mask &= self._ts[: self.count] >= epoch_us(where.since)
            if where.until is not None:
                mask &= self._ts[: self.count] < epoch_us(where.until)
        return np.flatnonzero(mask)

    def _scope_mask(self, agent_id: str | None) -> np.ndarray:
        if agent_id is None:
            return np.ones(self.count, bool)
        return self._is_any(0, [agent_id])

    def _is_any(self, column: int, values: Sequence[str]) -> np.ndarray:
        codes = [self._codes[v] for v in values if v in self._codes]
        return np.isin(self._columns[: self.count, column], codes)

    @classmethod
    def from_columns(
        cls,
        vectors: np.ndarray,
        agents: Sequence[str],
        threads: Sequence[str],
        kinds: Sequence[str],
        categories: Sequence[str | None],
        ts_us: Sequence[int],
        ids: Sequence[str],
    ) -> UserVectors:
        """Build from stored rows at once (the SQLite cache's loader); rows must have unique keys."""
        n, dimension = vectors.shape
        built = cls(dimension, capacity=max(16, n))
        built._vectors[:n] = vectors
        built._ts[:n] = ts_us
        for column, values in enumerate((agents, threads, kinds, categories)):
            built._columns[:n, column] = [built._code(v) for v in values]
        built._keys = list(zip(agents, ids, strict=True))
        built._row = {key: i for i, key in enumerate(built._keys)}
        built._agents = set(agents)
        built.count = n
        return built


def dot(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """Row-by-vector products on this thread. BLAS would use every core, and one busy core then
    stalls the whole product: on a loaded machine the single-threaded product is the faster."""
    return np.einsum("ij,j->i", matrix, vector)


def user_key(scope: Scope) -> tuple[str, str]:
    return (scope.tenant, scope.user_id)
