"""The VectorIndex and EmbeddingCache contracts: scoping, filters, exactness, models, deletion.

Subclass ``VectorIndexContract`` and implement ``new_index`` (a fresh, empty index; ``close``
releases it), or ``EmbeddingCacheContract`` with ``new_cache``::

    class TestMyIndex(VectorIndexContract):
        def new_index(self): ...
        def close(self, index): ...

Vectors are small (d=8) and deterministic; the reference for every search is brute force in
float64 over the units ``SearchFilter.matches`` accepts, so an index passes only if it returns the
exact nearest (up to float32 rounding), filtered inside the search, best first, ties by id.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from ..errors import InvalidInput
from ..stores import EmbeddingCache, VectorIndex
from ..types import Scope, Scored, SearchFilter, Unit
from .stores import A2, AGENT, OTHER_TENANT, T0, A, B

D = 8
MODEL = "test-embedder"
TOLERANCE = 1e-5  # float32 storage and arithmetic


def unit(id_: str, scope: Scope = A, *, minutes: int = 0, kind: str = "round", category: str | None = None) -> Unit:
    return Unit(id=id_, scope=scope, text=f"text of {id_}", timestamp=T0 + timedelta(minutes=minutes), kind=kind, category=category)


def axis(i: int, d: int = D) -> np.ndarray:
    """The unit vector along dimension ``i``."""
    v = np.zeros(d)
    v[i] = 1.0
    return v


def toward(i: int, closeness: float, d: int = D) -> np.ndarray:
    """A unit vector whose cosine with ``axis(i)`` is ``closeness``."""
    other = (i + 1) % d
    out: np.ndarray = closeness * axis(i, d) + np.sqrt(1 - closeness**2) * axis(other, d)
    return out


def in_scope(u: Unit, scope: Scope) -> bool:
    """The search scope rule: the tenant and user, and the agent when the scope names one."""
    return (u.scope.tenant, u.scope.user_id) == (scope.tenant, scope.user_id) and (
        scope.agent_id is None or u.scope.agent_id == scope.agent_id
    )


def brute_force(
    units: Sequence[Unit], rows: np.ndarray, scope: Scope, query: Any, k: int, where: SearchFilter | None = None
) -> list[Scored]:
    """The reference search: float64 cosine over every unit in scope that ``where`` matches."""
    rows = np.asarray(rows, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    cos = rows @ q / (np.linalg.norm(rows, axis=1) * np.linalg.norm(q))
    found = [(u.id, (1 + c) / 2) for u, c in zip(units, cos, strict=True) if in_scope(u, scope) and (where is None or where.matches(u))]
    return [Scored(i, s) for i, s in sorted(found, key=lambda p: (-p[1], p[0]))[:k]]


def assert_ranking(got: Sequence[Scored], want: Sequence[Scored], truth: dict[str, float]) -> None:
    """``got`` is ``want`` up to float32 rounding: same length, each place within tolerance of the
    true score, every id distinct and with its true score."""
    assert len(got) == len(want), (got, want)
    assert len({s.id for s in got}) == len(got)
    for g, w in zip(got, want, strict=True):
        assert abs(truth[g.id] - w.score) <= TOLERANCE, (g, w)
        assert abs(g.score - truth[g.id]) <= TOLERANCE, (g, truth[g.id])


def ids(results: Sequence[Scored]) -> list[str]:
    return [r.id for r in results]


class VectorIndexContract:
    """Behaviour every VectorIndex must show."""

    def new_index(self) -> VectorIndex:
        raise NotImplementedError

    def close(self, index: VectorIndex) -> None:
        """Release the index (override when it holds connections)."""

    @pytest.fixture
    def index(self) -> Iterator[VectorIndex]:
        made = self.new_index()
        yield made
        self.close(made)

    # ---- empty, k and scores -----------------------------------------------------------------

    def test_empty_index(self, index: VectorIndex) -> None:
        assert index.info() == (None, None, 0)
        assert index.search(A, axis(0), k=5) == []
        assert index.search(A, [1.0, 2.0, 3.0], k=5) == []  # no dimension is held yet

    def test_empty_upsert_fixes_nothing(self, index: VectorIndex) -> None:
        index.upsert([], np.zeros((0, D)), model=MODEL)
        assert index.info() == (None, None, 0)

    def test_scores_are_cosine_mapped_to_unit_interval(self, index: VectorIndex) -> None:
        index.upsert([unit("same"), unit("ortho"), unit("opposite")], [axis(0), axis(1), -axis(0)], model=MODEL)
        got = index.search(A, axis(0) * 3.0, k=3)
        assert all(isinstance(r, Scored) for r in got)
        assert ids(got) == ["same", "ortho", "opposite"]
        assert [round(r.score, 5) for r in got] == [1.0, 0.5, 0.0]

    def test_best_first_and_k(self, index: VectorIndex) -> None:
        closeness = [0.9, 0.5, 0.99, 0.1, 0.7]
        index.upsert([unit(f"u{i}") for i in range(5)], [toward(0, c) for c in closeness], model=MODEL)
        assert ids(index.search(A, axis(0), k=3)) == ["u2", "u0", "u4"]
        assert ids(index.search(A, axis(0), k=100)) == ["u2", "u0", "u4", "u1", "u3"]
        assert index.search(A, axis(0), k=0) == []
        assert index.search(A, axis(0), k=-1) == []
        got = index.search(A, axis(0), k=1)[0]
        assert abs(got.score - (1 + 0.99) / 2) <= TOLERANCE

    def test_ties_break_by_id(self, index: VectorIndex) -> None:
        index.upsert([unit(i) for i in ["c", "a", "d", "b"]], [axis(0), axis(0), axis(0), toward(0, 0.5)], model=MODEL)
        assert ids(index.search(A, axis(0), k=2)) == ["a", "c"]
        assert ids(index.search(A, axis(0), k=4)) == ["a", "c", "d", "b"]

    def test_vectors_as_lists_and_any_length(self, index: VectorIndex) -> None:
        index.upsert([unit("x")], [[0.0, 5.0, 0, 0, 0, 0, 0, 0]], model=MODEL)
        assert ids(index.search(A, [0, 1, 0, 0, 0, 0, 0, 0], k=1)) == ["x"]
        assert index.info() == (MODEL, D, 1)

    # ---- scoping -------------------------------------------------------------------------------

    def test_isolation_between_users_tenants_and_agents(self, index: VectorIndex) -> None:
        scopes = [A, B, OTHER_TENANT, AGENT]
        index.upsert([unit("u1", sc) for sc in scopes], [axis(i) for i in range(4)], model=MODEL)
        for i, sc in enumerate(scopes[1:], start=1):
            got = index.search(sc, axis(i), k=10)
            assert ids(got) == ["u1"] and abs(got[0].score - 1.0) <= TOLERANCE, sc
        # a scope without an agent sees every agent of its user; with one, only that agent
        got = index.search(A, axis(0), k=10)
        assert [(r.id, round(r.score, 4)) for r in got] == [("u1", 1.0), ("u1", 0.5)]
        assert index.search(Scope(user_id="user_001", agent_id="nobody"), axis(0), k=10) == []
        assert index.search(Scope(user_id="user_003"), axis(0), k=10) == []
        assert index.info()[2] == 4

    def test_fetch_returns_the_stored_vectors_within_the_user(self, index: VectorIndex) -> None:
        assert index.fetch(A, ["u1"]) == {}
        index.upsert(
            [unit("u1", A), unit("u2", A2), unit("u1", B), unit("u3", AGENT)],
            [axis(0) * 2.0, toward(1, 0.6), axis(3), axis(4)],
            model=MODEL,
        )
        got = index.fetch(A.thread("t9"), ["u1", "u2", "missing", "u1"])
        assert sorted(got) == ["u1", "u2"]
        assert np.allclose(got["u1"], axis(0), atol=TOLERANCE) and abs(float(np.linalg.norm(got["u2"])) - 1.0) <= TOLERANCE
        assert np.allclose(index.fetch(B, ["u1", "u2"])["u1"], axis(3), atol=TOLERANCE) and "u2" not in index.fetch(B, ["u2"])
        assert sorted(index.fetch(A, ["u3"])) == ["u3"]  # no agent named: every agent of the user
        assert index.fetch(Scope(user_id="user_001", agent_id="nobody"), ["u1", "u3"]) == {}
        assert index.fetch(Scope(user_id="user_003"), ["u1"]) == {}
        assert index.fetch(A, []) == {}

    def test_scope_thread_is_not_a_filter(self, index: VectorIndex) -> None:
        index.upsert([unit("here", A), unit("there", A2)], [axis(0), axis(1)], model=MODEL)
        assert sorted(ids(index.search(A, axis(0), k=10))) == ["here", "there"]
        assert ids(index.search(A, axis(0), k=10, where=SearchFilter(thread_ids=("t2",)))) == ["there"]

    # ---- filters -----------------------------------------------------------------------------

    def filter_fixture(self, index: VectorIndex) -> tuple[list[Unit], np.ndarray]:
        units = [
            unit("r1", A, minutes=0, kind="round", category="work"),
            unit("r2", A, minutes=10, kind="fact", category="work"),
            unit("r3", A2, minutes=20, kind="fact", category="home"),
            unit("r4", A2, minutes=30, kind="summary", category=None),
            unit("r5", A, minutes=40, kind="round", category="home"),
            unit("r6", B, minutes=10, kind="fact", category="work"),
        ]
        rows = np.array([toward(0, c) for c in (0.95, 0.9, 0.85, 0.8, 0.75, 0.99)])
        index.upsert(units, rows, model=MODEL)
        return units, rows

    @pytest.mark.parametrize(
        "where",
        [
            SearchFilter(thread_ids=("t2",)),
            SearchFilter(thread_ids=("t1", "t2")),
            SearchFilter(thread_ids=("nope",)),
            SearchFilter(categories=("home",)),
            SearchFilter(categories=("work", "home")),
            SearchFilter(kinds=("fact",)),
            SearchFilter(kinds=("fact", "summary")),
            SearchFilter(since=T0 + timedelta(minutes=10)),
            SearchFilter(until=T0 + timedelta(minutes=30)),
            SearchFilter(since=T0 + timedelta(minutes=10), until=T0 + timedelta(minutes=30)),
            SearchFilter(since=T0 + timedelta(minutes=10), until=T0 + timedelta(minutes=10)),
            SearchFilter(thread_ids=("t1",), kinds=("round",), categories=("home",)),
            SearchFilter(),
        ],
        ids=lambda w: repr(w)[13:70],
    )
    def test_filters_match_the_reference_predicate(self, index: VectorIndex, where: SearchFilter) -> None:
        units, rows = self.filter_fixture(index)
        want = brute_force(units, rows, A, axis(0), 10, where)
        assert ids(index.search(A, axis(0), k=10, where=where)) == ids(want)

    def test_time_range_is_since_inclusive_until_exclusive(self, index: VectorIndex) -> None:
        self.filter_fixture(index)
        got = index.search(A, axis(0), k=10, where=SearchFilter(since=T0 + timedelta(minutes=10), until=T0 + timedelta(minutes=30)))
        assert ids(got) == ["r2", "r3"]

    def test_filters_apply_inside_the_search(self, index: VectorIndex) -> None:
        near = [unit(f"near{i:02d}", A) for i in range(47)]
        far = [unit(f"far{i}", A2, category="rare") for i in range(3)]
        rows = [toward(0, 0.99 - i * 0.001) for i in range(47)] + [toward(0, c) for c in (-0.5, -0.6, -0.7)]
        index.upsert(near + far, rows, model=MODEL)
        assert ids(index.search(A, axis(0), k=3, where=SearchFilter(thread_ids=("t2",)))) == ["far0", "far1", "far2"]
        assert ids(index.search(A, axis(0), k=2, where=SearchFilter(categories=("rare",)))) == ["far0", "far1"]

    # ---- upsert replaces -----------------------------------------------------------------------

    def test_upsert_replaces_vector_and_metadata(self, index: VectorIndex) -> None:
        index.upsert([unit("u1", A, minutes=0, kind="round", category="old"), unit("u2", A)], [axis(0), axis(1)], model=MODEL)
        index.upsert([unit("u1", A2, minutes=60, kind="fact", category="new")], [axis(2)], model=MODEL)
        assert index.info() == (MODEL, D, 2)
        got = index.search(A, axis(2), k=1)
        assert ids(got) == ["u1"] and abs(got[0].score - 1.0) <= TOLERANCE
        assert index.search(A, axis(0), k=5, where=SearchFilter(thread_ids=("t1",)))[0].id == "u2"
        assert ids(index.search(A, axis(0), k=5, where=SearchFilter(categories=("old",)))) == []
        assert ids(index.search(A, axis(0), k=5, where=SearchFilter(categories=("new",), kinds=("fact",), thread_ids=("t2",)))) == ["u1"]
        assert ids(index.search(A, axis(0), k=5, where=SearchFilter(since=T0 + timedelta(minutes=60)))) == ["u1"]

    def test_last_duplicate_in_one_upsert_wins(self, index: VectorIndex) -> None:
        index.upsert([unit("u1"), unit("u1", category="second")], [axis(0), axis(1)], model=MODEL)
        assert index.info()[2] == 1
        assert ids(index.search(A, axis(1), k=1, where=SearchFilter(categories=("second",)))) == ["u1"]

    def test_same_id_in_other_agent_is_another_vector(self, index: VectorIndex) -> None:
        index.upsert([unit("u1", A), unit("u1", AGENT)], [axis(0), axis(1)], model=MODEL)
        index.upsert([unit("u1", AGENT)], [axis(2)], model=MODEL)
        assert index.info()[2] == 2
        assert abs(index.search(A.thread("t9"), axis(0), k=1)[0].score - 1.0) <= TOLERANCE
        assert abs(index.search(AGENT, axis(2), k=1)[0].score - 1.0) <= TOLERANCE

    # ---- models, dimensions and bad values ---------------------------------------------------

    def test_other_dimension_or_model_is_refused(self, index: VectorIndex) -> None:
        index.upsert([unit("u1")], [axis(0)], model=MODEL)
        with pytest.raises(InvalidInput, match="memstack reindex"):
            index.upsert([unit("u2")], [axis(0, 4)], model=MODEL)
        with pytest.raises(InvalidInput, match="memstack reindex"):
            index.upsert([unit("u2")], [axis(0)], model="another-model")
        with pytest.raises(InvalidInput, match="memstack reindex"):
            index.search(A, axis(0, 4), k=1)
        assert index.info() == (MODEL, D, 1)

    @pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
    def test_non_finite_values_are_refused(self, index: VectorIndex, bad: Any) -> None:
        row = axis(0)
        row[3] = bad
        with pytest.raises(InvalidInput):
            index.upsert([unit("u1")], [row], model=MODEL)
        assert index.info() == (None, None, 0)
        index.upsert([unit("u1")], [axis(0)], model=MODEL)
        with pytest.raises(InvalidInput):
            index.search(A, row, k=1)

    def test_malformed_vectors_are_refused(self, index: VectorIndex) -> None:
        with pytest.raises(InvalidInput):
            index.upsert([unit("u1")], [np.zeros(D)], model=MODEL)
        with pytest.raises(InvalidInput):
            index.upsert([unit("u1"), unit("u2")], [axis(0)], model=MODEL)
        with pytest.raises(InvalidInput):
            index.upsert([unit("u1")], [axis(0)], model="")
        assert index.info() == (None, None, 0)

    def test_reset_drops_vectors_and_model(self, index: VectorIndex) -> None:
        index.upsert([unit("u1"), unit("u2", B)], [axis(0), axis(1)], model=MODEL)
        index.reset()
        assert index.info() == (None, None, 0)
        assert index.search(A, axis(0), k=5) == []
        index.upsert([unit("u3")], [[0.0, 1.0, 0.0, 0.0]], model="another-model")
        assert index.info() == ("another-model", 4, 1)
        assert ids(index.search(A, [0.0, 1.0, 0.0, 0.0], k=5)) == ["u3"]

    # ---- delete --------------------------------------------------------------------------------

    def delete_fixture(self, index: VectorIndex) -> None:
        units = [unit("a1", A), unit("a2", A), unit("b1", A2), unit("b2", A2), unit("a1", B), unit("b1", B.thread("t2")), unit("a1", AGENT)]
        index.upsert(units, [axis(i % D) for i in range(len(units))], model=MODEL)

    def remaining(self, index: VectorIndex, scope: Scope) -> list[str]:
        return sorted(ids(index.search(scope, axis(0), k=100)))

    def test_delete_by_ids_within_the_user(self, index: VectorIndex) -> None:
        self.delete_fixture(index)
        assert index.delete(A, []) == 0
        assert index.delete(AGENT, ["a1", "missing"]) == 1
        assert index.delete(A, ["a1", "b1", "missing"]) == 2
        assert self.remaining(index, A) == ["a2", "b2"]
        assert self.remaining(index, B) == ["a1", "b1"]
        assert index.info()[2] == 4

    def test_delete_a_thread(self, index: VectorIndex) -> None:
        self.delete_fixture(index)
        assert index.delete(A2) == 2
        assert self.remaining(index, A) == ["a1", "a1", "a2"]
        assert self.remaining(index, B) == ["a1", "b1"]
        assert index.delete(AGENT) == 1  # the agent's thread t1 only
        assert self.remaining(index, A) == ["a1", "a2"]

    def test_delete_a_user(self, index: VectorIndex) -> None:
        self.delete_fixture(index)
        assert index.delete(AGENT.user()) == 1
        assert index.delete(A.user()) == 4
        assert self.remaining(index, A) == []
        assert self.remaining(index, B) == ["a1", "b1"]
        assert index.delete(A.user()) == 0
        assert index.delete(Scope(user_id="nobody")) == 0
        assert index.info() == (MODEL, D, 2)

    def test_delete_then_upsert_again(self, index: VectorIndex) -> None:
        self.delete_fixture(index)
        index.delete(A.user())
        index.upsert([unit("a1", A)], [axis(5)], model=MODEL)
        assert ids(index.search(A, axis(5), k=5)) == ["a1"]

    # ---- exactness at scale ------------------------------------------------------------------

    def test_top_10_of_2000_random_vectors_is_exact(self, index: VectorIndex) -> None:
        rng = np.random.default_rng(20240501)
        threads, kinds, categories = ("t1", "t2", "t3", "t4"), ("round", "fact", "summary"), ("work", "home", None)
        units = [
            unit(
                f"r{i:04d}",
                A.thread(threads[i % 4]),
                minutes=int(rng.integers(0, 1000)),
                kind=kinds[i % 3],
                category=categories[(i // 3) % 3],
            )
            for i in range(2000)
        ]
        units += [unit(f"r{i:04d}", B, minutes=i) for i in range(300)]  # another user, the same ids
        rows = rng.standard_normal((len(units), D))
        index.upsert(units, rows, model=MODEL)
        filters = [
            None,
            SearchFilter(thread_ids=("t2",)),
            SearchFilter(kinds=("fact",), categories=("home",)),
            SearchFilter(since=T0 + timedelta(minutes=500)),
        ]
        for n, query in enumerate(rng.standard_normal((12, D))):
            where = filters[n % len(filters)]
            truth = {s.id: s.score for s in brute_force(units[:2000], rows[:2000], A, query, 2000)}
            want = brute_force(units, rows, A, query, 10, where)
            assert_ranking(index.search(A, query, k=10, where=where), want, truth)
        assert index.info() == (MODEL, D, 2300)


class EmbeddingCacheContract:
    """Behaviour every EmbeddingCache must show."""

    def new_cache(self) -> EmbeddingCache:
        raise NotImplementedError

    def close(self, cache: EmbeddingCache) -> None:
        """Release the cache (override when it holds connections)."""

    @pytest.fixture
    def cache(self) -> Iterator[EmbeddingCache]:
        made = self.new_cache()
        yield made
        self.close(made)

    def test_round_trip(self, cache: EmbeddingCache) -> None:
        assert cache.get(A, MODEL, ["h1"]) == {}
        cache.put(A, MODEL, {"h1": [0.25, -1.5, 3.0], "h2": np.arange(4, dtype=np.float32)})
        got = cache.get(A, MODEL, ["h1", "h2", "h3"])
        assert sorted(got) == ["h1", "h2"]
        assert isinstance(got["h1"], np.ndarray)
        np.testing.assert_array_equal(got["h1"], np.array([0.25, -1.5, 3.0], np.float32))
        np.testing.assert_array_equal(got["h2"], np.arange(4, dtype=np.float32))
        assert cache.get(A, MODEL, []) == {}

    def test_non_finite_values_are_refused(self, cache: EmbeddingCache) -> None:
        with pytest.raises(InvalidInput):
            cache.put(A, MODEL, {"h1": [1.0], "h2": [np.nan]})
        assert cache.get(A, MODEL, ["h1", "h2"]) == {}

    def test_put_replaces(self, cache: EmbeddingCache) -> None:
        cache.put(A, MODEL, {"h1": [1.0, 2.0]})
        cache.put(A, MODEL, {"h1": [3.0, 4.0]})
        np.testing.assert_array_equal(cache.get(A, MODEL, ["h1"])["h1"], np.array([3.0, 4.0], np.float32))

    def test_keyed_by_scope_and_model(self, cache: EmbeddingCache) -> None:
        cache.put(A, MODEL, {"h": [1.0]})
        for other in (A2, B, OTHER_TENANT, AGENT):
            assert cache.get(other, MODEL, ["h"]) == {}, other
        assert cache.get(A, "another-model", ["h"]) == {}

    def test_delete_a_thread_or_a_user(self, cache: EmbeddingCache) -> None:
        for sc in (A, A2, B, AGENT):
            cache.put(sc, MODEL, {"h1": [1.0], "h2": [2.0]})
        cache.put(A, "another-model", {"h1": [1.0]})
        assert cache.delete(A) == 3
        assert cache.get(A, MODEL, ["h1"]) == {} and sorted(cache.get(A2, MODEL, ["h1", "h2"])) == ["h1", "h2"]
        assert cache.delete(AGENT.user()) == 2
        assert cache.delete(A.user()) == 2
        assert cache.get(A2, MODEL, ["h1"]) == {}
        assert sorted(cache.get(B, MODEL, ["h1", "h2"])) == ["h1", "h2"]
        assert cache.delete(A.user()) == 0
