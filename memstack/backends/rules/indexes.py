"""What the vector indexes outside the store (Milvus, Chroma) share: the generations behind an
index's name, and the contract's steps around each call. No I/O here: a backend does its calls
in the hooks ``GenerationIndex`` names.

An index name points at one *generation*: one embedder's vectors (one model and dimension),
``NAME_g1``, ``NAME_g2``, ..., made by the first upsert after the index was empty. A reindex
fills the next generation beside the live one (``stage``), then points the name at it
(``switch``). Each backend marks what it makes (``memstack.owner``, ``memstack.alias``, ...) and
refuses what it did not make (``ForeignCollection``).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from ...errors import InvalidInput
from ...types import IndexSwitch, Scope, Scored, SearchFilter, Unit
from .vectors import check_model, query_row, upsert_batch


@dataclass(frozen=True, slots=True)
class Held:
    """A generation: its collection's name, number, embedder and dimension, and the nonce its
    backend marked it with when made ("" where the backend keeps none)."""

    collection: str
    generation: int
    model: str
    dimension: int
    made: str = ""


def reindex_advice(kind: str) -> str:
    """What a model or dimension mismatch advises: a new generation, the live one left alone."""
    return (
        f"run `memstack reindex` to embed every unit with the new model into a new {kind.capitalize()} collection, "
        "which then replaces this one (nothing is dropped)"
    )


def generation_name(base: str, n: int) -> str:
    return f"{base}_g{n}"


def next_number(pattern: re.Pattern[str], names: Iterable[str], base: str) -> int:
    """One past every generation of ``base`` among ``names`` (``pattern`` matches a generation's
    names, with groups ``base`` and ``n``), memstack's or not: a new generation is a new name."""
    numbers = [int(m["n"]) for m in (pattern.fullmatch(name) for name in names) if m and m["base"] == base]
    return max(numbers, default=0) + 1


class GenerationIndex(ABC):
    """The VectorIndex contract's steps that every generation-backed index takes the same way:
    empty input answered without a call, the held model checked before a write, a query checked
    against the held dimension, nothing read from an empty index, a staged index only switched
    to. A subclass sets ``kind`` and ``parse_url``, opens its client with ``_start``, and does its
    calls in ``_held`` and the hooks (``_upsert``, ``_search``, ``_fetch``, ``_delete``, ``_count``,
    ``_drop_all``; ``_unpoint``, ``_point``, ``_retire`` for ``switch``), which run inside its
    ``_translated`` (its client's errors raised as ``StoreError``)."""

    kind: ClassVar[str]
    collection: str
    _staged: bool
    _generation: Any
    _client: Any
    _owns_client: bool

    def _start(self, client: Any, doing: str, connect: Callable[[], Any]) -> None:
        """Take ``client`` (a test's; left open by ``close``) or the one ``connect`` opens; then,
        unless staged, refuse a foreign collection now, not at the first search."""
        self._owns_client = client is None
        if client is not None:
            self._client = client
        else:
            with self._translated(doing):
                self._client = connect()
        if not self._staged:
            self._held()

    @staticmethod
    @abstractmethod
    def parse_url(url: str) -> dict[str, Any]:
        """The backend's ``url.py`` parse: a URL of its scheme as the index's arguments."""

    @classmethod
    def from_url(cls, url: str) -> Self:
        """The index a URL of the backend's scheme names (``parse_url``)."""
        return cls(**cls.parse_url(url))

    @property
    def reindex(self) -> str:
        """What a model or dimension mismatch advises (``reindex_advice``)."""
        return reindex_advice(self.kind)

    @property
    def location(self) -> str:
        """What the store's profile records: the kind and the index's name (no host, folder or
        secret: another process may reach the same index by another address)."""
        return f"{self.kind}:{self.collection}"

    # ---- the hooks -----------------------------------------------------------------------

    @abstractmethod
    def _translated(self, doing: str) -> AbstractContextManager[None]:
        """A block whose failures of the index's client are raised as ``StoreError`` naming ``doing``."""

    @abstractmethod
    def _held(self) -> Held | None:
        """The generation searched now (None: the index is empty), resolved on every call: another
        process's reindex repoints the name, and the next call here follows it."""

    @abstractmethod
    def _upsert(self, held: Held | None, units: Sequence[Unit], rows: Any, model: str) -> None:
        """Store checked rows; ``held`` None: make the first generation for ``model`` first."""

    @abstractmethod
    def _search(self, held: Held, scope: Scope, query: Any, k: int, where: SearchFilter | None) -> list[Scored]:
        """The best rows for a checked query row, as ``best_first`` orders them."""

    @abstractmethod
    def _fetch(self, held: Held, scope: Scope, ids: Sequence[str]) -> dict[str, Any]:
        """The vectors of those of ``ids`` the scope's user (and agent) has, by unit id."""

    @abstractmethod
    def _delete(self, held: Held, scope: Scope, ids: Sequence[str] | None) -> int:
        """Delete the rows ``rules.index_rows.delete_filter`` names; how many there were."""

    @abstractmethod
    def _count(self, held: Held) -> int:
        """How many rows ``held`` holds, every tenant's."""

    @abstractmethod
    def _drop_all(self) -> None:
        """Drop the index's name and every generation memstack made for it."""

    @abstractmethod
    def _unpoint(self, old: Held | None) -> None:
        """Leave the index empty (a staged index that got no vector was switched to)."""

    @abstractmethod
    def _point(self, staged: Any) -> str:
        """Make every process search the staged generation (one call); its collection's name."""

    @abstractmethod
    def _retire(self, old: Held) -> list[str]:
        """After a switch from ``old`` (kept: a way back), drop the generations memstack made for
        the index numbered below it; their names."""

    # ---- VectorIndex -----------------------------------------------------------------------

    def upsert(self, units: Sequence[Unit], vectors: Any, *, model: str) -> None:
        units, rows = upsert_batch(units, vectors)
        if not units:
            return
        held = self._held()
        check_model(held.model if held else None, held.dimension if held else None, model, rows.shape[1], advice=self.reindex)
        with self._translated("storing vectors"):
            self._upsert(held, units, rows, model)

    def search(self, scope: Scope, vector: Any, *, k: int, where: SearchFilter | None = None) -> list[Scored]:
        if k <= 0:
            return []
        held = self._held()
        if held is None:
            return []
        query = query_row(vector, held.dimension, advice=self.reindex)
        with self._translated("searching vectors"):
            return self._search(held, scope, query, k, where)

    def fetch(self, scope: Scope, ids: Sequence[str]) -> dict[str, Any]:
        held = self._held() if ids else None
        if held is None:
            return {}
        with self._translated("reading vectors"):
            return self._fetch(held, scope, ids)

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        held = self._held() if ids is None or ids else None
        if held is None:
            return 0
        with self._translated("deleting vectors"):
            return self._delete(held, scope, ids)

    def delete_user(self, scope: Scope) -> int:
        """Delete every vector of the scope's tenant and user (every agent and thread)."""
        return self.delete(Scope(user_id=scope.user_id, tenant=scope.tenant))

    def info(self) -> tuple[str | None, int | None, int]:
        held = self._held()
        if held is None:
            return None, None, 0
        with self._translated("counting vectors"):
            return held.model, held.dimension, self._count(held)

    def reset(self) -> None:
        """Drop every vector: the index's name and the generations memstack made for it (a
        collection it did not make is refused, never dropped). A reindex uses ``stage``/``switch``."""
        if self._staged:
            raise InvalidInput("a staged index is switched to or left, not reset", field="vectors")
        with self._translated("dropping the index's collections"):
            self._drop_all()

    # ---- Rebuildable -----------------------------------------------------------------------

    def stage(self) -> Self:
        """An empty index on the next generation of this one (made by its first upsert, with that
        upsert's model and dimension), which nothing searches until ``switch``."""
        if self._staged:
            raise InvalidInput("a staged index cannot stage another", field="vectors")
        self._held()  # refuses a foreign collection before anything is made
        staged = type(self).__new__(type(self))
        staged.__dict__.update(self.__dict__)
        staged._staged, staged._generation, staged._owns_client = True, None, False
        return staged

    def switch(self, staged: Any) -> IndexSwitch:
        """Make every process search ``staged`` (one call); the generation it replaces is kept, and
        older generations memstack made for the index are dropped. A staged index that never got
        a vector leaves the index empty."""
        if not isinstance(staged, type(self)) or not staged._staged or staged.collection != self.collection:
            raise InvalidInput(f"switch takes an index staged from this one ({self.collection!r})", field="vectors")
        old = self._held()
        with self._translated("switching the index to its new collection"):
            if staged._generation is None:
                self._unpoint(old)
                return IndexSwitch(None, old.collection if old else None)
            new = self._point(staged._generation)
            if old is None:
                return IndexSwitch(new)
            dropped = self._retire(old)
        return IndexSwitch(new, old.collection, tuple(dropped))
