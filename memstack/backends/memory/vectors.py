"""In-memory vectors: one float32 matrix per user (``rules.matrix``), searched exactly; lost at exit."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...types import Scope, Scored, SearchFilter, Unit
from ..rules.matrix import UserVectors, user_key
from ..rules.vectors import cache_row, check_model, query_row, upsert_batch


class NumpyVectorIndex:
    """VectorIndex in process memory, exact, thread-safe (one lock); for tests and small apps."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[tuple[str, str], UserVectors] = {}
        self._model: str | None = None
        self._dimension: int | None = None

    def upsert(self, units: Sequence[Unit], vectors: Any, *, model: str) -> None:
        units, rows = upsert_batch(units, vectors)
        if not units:
            return
        with self._lock:
            check_model(self._model, self._dimension, model, rows.shape[1])
            self._model, self._dimension = model, rows.shape[1]
            by_user: dict[tuple[str, str], list[int]] = {}
            for i, unit in enumerate(units):
                by_user.setdefault(user_key(unit.scope), []).append(i)
            for key, at in by_user.items():
                self._users.setdefault(key, UserVectors(rows.shape[1])).put([units[i] for i in at], rows[at])

    def search(self, scope: Scope, vector: Any, *, k: int, where: SearchFilter | None = None) -> list[Scored]:
        with self._lock:
            if k <= 0 or self._dimension is None:
                return []
            query = query_row(vector, self._dimension)
            user = self._users.get(user_key(scope))
            return user.search(query, k, scope.agent_id, where) if user else []

    def fetch(self, scope: Scope, ids: Sequence[str]) -> dict[str, Any]:
        with self._lock:
            user = self._users.get(user_key(scope))
            return user.fetch(scope.agent_id, ids) if user else {}

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        with self._lock:
            user = self._users.get(user_key(scope))
            if user is None:
                return 0
            deleted = user.delete(scope, ids)
            if user.count == 0:
                del self._users[user_key(scope)]
            return deleted

    def info(self) -> tuple[str | None, int | None, int]:
        with self._lock:
            return self._model, self._dimension, sum(u.count for u in self._users.values())

    def reset(self) -> None:
        with self._lock:
            self._users.clear()
            self._model = self._dimension = None


def entry_matches(key: tuple[str, str, str, str], scope: Scope) -> bool:
    """Whether a (tenant, user, agent, thread) key is in the scope's thread, or in its user when it
    names no thread (and its agent, when it names one)."""
    if scope.thread_id is not None:
        return key == scope.key
    return key[:2] == scope.key[:2] and (scope.agent_id is None or key[2] == scope.agent_id)


class MemoryEmbeddingCache:
    """EmbeddingCache in a dict behind a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[tuple[str, str, str, str], str, str], np.ndarray] = {}

    def get(self, scope: Scope, model: str, hashes: Sequence[str]) -> dict[str, Any]:
        with self._lock:
            found = {h: self._entries.get((scope.key, model, h)) for h in hashes}
        return {h: v.copy() for h, v in found.items() if v is not None}

    def put(self, scope: Scope, model: str, vectors: Mapping[str, Any]) -> None:
        rows = {h: cache_row(v) for h, v in vectors.items()}
        with self._lock:
            for h, row in rows.items():
                self._entries[(scope.key, model, h)] = row

    def delete(self, scope: Scope) -> int:
        with self._lock:
            gone = [k for k in self._entries if entry_matches(k[0], scope)]
            for k in gone:
                del self._entries[k]
            return len(gone)
