"""The UnitStore contract: storage, isolation, BM25 keyword search, filters and deletion of units.

Subclass ``UnitStoreContract`` in a pytest module and implement ``new_store`` (a fresh, empty
Store whose ``units`` is the UnitStore under test; ``close()`` is called after each test)::

    class TestMyUnits(UnitStoreContract):
        def new_store(self): ...

Rankings are checked against ``MemoryUnits``, the reference implementation of the shared BM25
(``memstack.backends.memory_units``): every backend must return the same ids in the same order.
"""

from __future__ import annotations

from datetime import timedelta, timezone
from typing import Any

import pytest

from ..backends.memory.units import MemoryUnits
from ..errors import InvalidInput
from ..stores import UnitStore
from ..types import Scope, Scored, SearchFilter, Unit
from .stores import A2, AGENT, OTHER_TENANT, T0, A, B, FullStore, StoreFixture, msg


def unit(id_: str, text: str, scope: Scope = A, minutes: int = 0, **kw: Any) -> Unit:
    return Unit(id=id_, scope=scope, text=text, timestamp=T0 + timedelta(minutes=minutes), **kw)


def assert_same_ranking(got: list[Scored], expected: list[Scored], query: str = "") -> None:
    """The same ids in the same order, with scores equal to the 9 decimals scores are rounded to."""
    assert [s.id for s in got] == [s.id for s in expected], query
    assert [s.score for s in got] == pytest.approx([s.score for s in expected], abs=2e-9), query


#: A small fixed corpus of Chinese, English and mixed units for ranking parity.
CORPUS: tuple[tuple[str, str], ...] = (
    ("r01", "我平时喜欢跑步，每周跑三次"),
    ("r02", "我喜欢吃火锅，尤其是重庆火锅"),
    ("r03", "我正在学习LangChain框架，想做一个RAG应用"),
    ("r04", "周末去公园跑步了，跑了十公里"),
    ("r05", "I love running marathons in spring"),
    ("r06", "She runs every morning before work"),
    ("r07", "Cooking pasta is my favourite weekend hobby"),
    ("r08", "我的后端使用SpringBoot和PostgreSQL"),
    ("r09", "推荐一本小说：《百年孤独》，魔幻现实主义的经典"),
    ("r10", "LangChain and LlamaIndex are both RAG frameworks"),
    ("r11", "我不喜欢香菜，也不吃辣"),
    ("r12", "今天学习了PostgreSQL的索引和BM25排序"),
    ("r13", "火锅 火锅 火锅：我最爱的食物"),
    ("r14", "running running running: training log for the marathon"),
)
QUERIES: tuple[str, ...] = (
    "我喜欢什么运动？",
    "跑步",
    "火锅好吃吗",
    "LangChain RAG",
    "who likes running a marathon?",
    "PostgreSQL 索引",
    "推荐的小说",
    "我不喜欢吃什么",
    "weekend hobby cooking",
)


class UnitStoreContract(StoreFixture):
    """Behaviour every UnitStore (reached as ``store.units``) must show."""

    @pytest.fixture
    def units(self, store: FullStore) -> UnitStore:
        return store.units

    # ---- storage ---------------------------------------------------------------------------

    def test_fields_round_trip(self, units: UnitStore) -> None:
        original = Unit(
            id="f1",
            scope=A,
            text="我叫李四，在北京做后端 🌤",
            timestamp=T0,
            kind="fact",
            round=3,
            category="profile",
            source_ids=("m1", "m2"),
            metadata={"confidence": 0.9, "tags": ["名字", "城市"], "nested": {"a": None, "b": True}},
        )
        units.put([original])
        (got,) = units.get(A, ["f1"])
        assert got == original
        assert got.timestamp.utcoffset() == timedelta(hours=8)
        assert isinstance(got.source_ids, tuple)

    def test_in_rounds_reads_one_thread_of_one_user_and_agent(self, units: UnitStore) -> None:
        units.put(
            [
                unit("r1", "第一轮", round=1),
                unit("r2a", "第二轮上半", round=2, minutes=1),
                unit("r2b", "第二轮下半", round=2, minutes=1),
                unit("r3", "第三轮", round=3, minutes=2),
                unit("fact", "没有轮次的事实", kind="fact"),
                unit("other-thread", "别的会话", A2, round=2),
                unit("other-user", "别的用户", B, round=2),
                unit("other-agent", "别的代理", AGENT, round=2),
            ]
        )
        assert sorted(u.id for u in units.in_rounds(A, [2])) == ["r2a", "r2b"]
        assert sorted(u.id for u in units.in_rounds(A, [1, 3, 9])) == ["r1", "r3"]
        assert [u.id for u in units.in_rounds(AGENT, [2])] == ["other-agent"]
        assert [u.id for u in units.in_rounds(B, [1, 2, 3])] == ["other-user"]
        assert units.in_rounds(A, []) == [] and units.in_rounds(Scope(user_id="nobody", thread_id="t1"), [1]) == []
        (got,) = units.in_rounds(A, [3])
        assert got == unit("r3", "第三轮", round=3, minutes=2)
        with pytest.raises(InvalidInput):
            units.in_rounds(Scope(user_id="user_001"), [1])

    def test_get_follows_the_order_of_ids_and_skips_missing(self, units: UnitStore) -> None:
        units.put([unit("a", "一"), unit("b", "二"), unit("c", "三")])
        assert [u.id for u in units.get(A, ["c", "missing", "a"])] == ["c", "a"]
        assert units.get(A, []) == []

    def test_put_replaces_by_id_text_and_terms_included(self, units: UnitStore) -> None:
        units.put([unit("u1", "我喜欢跑步", category="old")])
        units.put([unit("u1", "我喜欢游泳", category="new")])
        (got,) = units.get(A, ["u1"])
        assert (got.text, got.category) == ("我喜欢游泳", "new")
        assert units.keyword_search(A, "跑步", k=5) == []
        assert [s.id for s in units.keyword_search(A, "游泳", k=5)] == ["u1"]
        assert sum(len(b) for b in units.iterate(A)) == 1

    def test_the_last_of_repeated_ids_in_one_put_wins(self, units: UnitStore) -> None:
        units.put([unit("u1", "第一版"), unit("u1", "第二版")])
        assert [u.text for u in units.get(A, ["u1"])] == ["第二版"]

    def test_put_refuses_what_is_not_a_unit(self, units: UnitStore) -> None:
        with pytest.raises(InvalidInput):
            units.put([{"id": "x", "text": "dict"}])  # type: ignore[list-item]  # not a Unit, on purpose

    def test_a_unit_without_search_terms_is_stored_but_never_found(self, units: UnitStore) -> None:
        units.put([unit("p", "。。。的了吗？！"), unit("q", "我喜欢跑步")])
        assert [u.id for u in units.get(A, ["p"])] == ["p"]
        assert [s.id for s in units.keyword_search(A, "跑步", k=5)] == ["q"]

    # ---- isolation -------------------------------------------------------------------------

    def test_users_tenants_and_agents_with_identical_ids_stay_apart(self, units: UnitStore) -> None:
        scopes = {"甲": A, "乙": B, "丙": OTHER_TENANT, "丁": AGENT}
        units.put([unit("same", f"共同词 {name}", scope) for name, scope in scopes.items()])
        for name, scope in {"乙": B, "丙": OTHER_TENANT, "丁": AGENT}.items():
            assert [u.text for u in units.get(scope, ["same"])] == [f"共同词 {name}"]
            assert [s.id for s in units.keyword_search(scope, "共同词", k=10)] == ["same"]
            assert [s.id for s in units.keyword_search(scope, name, k=10)] == ["same"]
            assert units.keyword_search(scope, "甲", k=10) == []
        # a scope without an agent reads the user's units of every agent
        assert sorted(u.text for u in units.get(A, ["same"])) == ["共同词 丁", "共同词 甲"]
        assert len(units.keyword_search(A, "共同词", k=10)) == 2
        assert units.keyword_search(A, "乙 丙", k=10) == []

    def test_other_users_data_does_not_change_a_users_scores(self, units: UnitStore) -> None:
        units.put([unit(i, text) for i, text in CORPUS])
        before = [units.keyword_search(A, q, k=5) for q in QUERIES]
        units.put([unit(f"b{i}", "跑步 火锅 running " * (i % 3 + 1), B) for i in range(30)])
        units.put([unit(f"t{i}", "PostgreSQL 索引", OTHER_TENANT) for i in range(10)])
        assert [units.keyword_search(A, q, k=5) for q in QUERIES] == before

    def test_an_agent_scope_searches_its_agent_only(self, units: UnitStore) -> None:
        units.put([unit("x", "跑步", A), unit("y", "跑步 跑步", AGENT), unit("z", "游泳", AGENT)])
        assert [s.id for s in units.keyword_search(AGENT, "跑步", k=5)] == ["y"]
        assert {s.id for s in units.keyword_search(A, "跑步", k=5)} == {"x", "y"}

    # ---- search ----------------------------------------------------------------------------

    def test_chinese_query_ranks_units_sharing_more_terms_first(self, units: UnitStore) -> None:
        units.put([unit("a", "我平时喜欢跑步"), unit("b", "我喜欢吃火锅"), unit("c", "我正在学习LangChain"), unit("d", "今天跑步十公里")])
        found = units.keyword_search(A, "我喜欢跑步吗？", k=5)
        assert found[0].id == "a"
        assert {s.id for s in found} == {"a", "b", "d"}
        # "运动" is in no unit: only the shared "喜欢" can match, never the LangChain unit
        assert {s.id for s in units.keyword_search(A, "我喜欢什么运动？", k=5)} == {"a", "b"}

    def test_english_words_are_stemmed_and_case_folded(self, units: UnitStore) -> None:
        units.put([unit("e1", "I love Running marathons"), unit("e2", "She runs every morning"), unit("e3", "Cooking pasta")])
        assert {s.id for s in units.keyword_search(A, "run", k=5)} == {"e1", "e2"}
        assert [s.id for s in units.keyword_search(A, "MARATHON", k=5)] == ["e1"]

    def test_mixed_chinese_and_english(self, units: UnitStore) -> None:
        units.put([unit("m1", "我正在学习LangChain框架"), unit("m2", "我在学习做饭")])
        assert [s.id for s in units.keyword_search(A, "langchain", k=5)] == ["m1"]
        assert [s.id for s in units.keyword_search(A, "LangChain怎么学习", k=5)] == ["m1", "m2"]

    def test_scores_are_in_the_unit_interval_best_first_ties_by_id(self, units: UnitStore) -> None:
        units.put([unit(i, "同样的文字 火锅") for i in ("z", "a", "m")] + [unit("x", "火锅 火锅 火锅"), unit("y", "别的")])
        found = units.keyword_search(A, "火锅", k=10)
        assert [s.id for s in found] == ["x", "a", "m", "z"]
        assert all(0.0 < s.score < 1.0 for s in found)
        assert found[0].score > found[1].score == found[2].score == found[3].score

    def test_k_limits_the_results(self, units: UnitStore) -> None:
        units.put([unit(f"u{i}", f"火锅 {'很好吃 ' * i}") for i in range(8)])
        assert [s.id for s in units.keyword_search(A, "火锅", k=3)] == ["u0", "u1", "u2"]
        assert units.keyword_search(A, "火锅", k=0) == []
        with pytest.raises(InvalidInput):
            units.keyword_search(A, "火锅", k=-1)

    def test_no_matching_term_or_only_stopwords_gives_nothing(self, units: UnitStore) -> None:
        units.put([unit("a", "我平时喜欢跑步")])
        assert units.keyword_search(A, "量子物理", k=5) == []
        assert units.keyword_search(A, "我的了吗？！", k=5) == []
        assert units.keyword_search(A, "the of and, is it?", k=5) == []
        assert units.keyword_search(A, "", k=5) == []
        assert units.keyword_search(Scope(user_id="nobody"), "跑步", k=5) == []

    @pytest.mark.parametrize(
        "query",
        [
            '"lake',
            "lake AND NOT river",
            "lake OR (river",
            "NEAR(lake river)",
            "lake*",
            "-lake",
            "text:lake",
            "lake^2 {river}",
            "'湖' \"湖\" 湖*",
        ],
    )
    def test_query_syntax_is_plain_text(self, units: UnitStore, query: str) -> None:
        units.put([unit("w", 'a "lake" near the river: 湖 和 湖边'), unit("v", "nothing here")])
        assert [s.id for s in units.keyword_search(A, query, k=5)] == ["w"]

    def test_ranking_matches_the_reference_implementation(self, units: UnitStore) -> None:
        reference = MemoryUnits()
        corpus = [unit(i, text) for i, text in CORPUS] + [unit("other", "跑步 火锅 running", B)]
        units.put(corpus)
        reference.put(corpus)
        for query in QUERIES:
            assert_same_ranking(units.keyword_search(A, query, k=5), reference.keyword_search(A, query, k=5), query)

    def test_the_index_follows_replacements_and_deletions(self, units: UnitStore) -> None:
        units.put([unit(i, text) for i, text in CORPUS])
        units.put([unit("r02", "我喜欢吃麻辣烫"), unit("new", "跑步和火锅")])
        units.delete(A, ["r01", "r13"])
        fresh = MemoryUnits()
        fresh.put([u for batch in units.iterate(A) for u in batch])
        for query in QUERIES:
            assert_same_ranking(units.keyword_search(A, query, k=10), fresh.keyword_search(A, query, k=10), query)

    # ---- filters ---------------------------------------------------------------------------

    def _filtered_corpus(self) -> list[Unit]:
        threads = (A, A2)
        kinds = ("round", "fact", "summary")
        return [
            unit(f"u{i}", f"火锅 记录{i}", threads[i % 2], minutes=i * 60, kind=kinds[i % 3], category=("food", "travel", None)[i % 3])
            for i in range(12)
        ]

    @pytest.mark.parametrize(
        "where",
        [
            SearchFilter(thread_ids=("t2",)),
            SearchFilter(thread_ids=("t1", "t2")),
            SearchFilter(categories=("food",)),
            SearchFilter(kinds=("fact", "summary")),
            SearchFilter(since=T0 + timedelta(hours=3)),
            SearchFilter(until=T0 + timedelta(hours=3)),
            SearchFilter(since=T0 + timedelta(hours=2), until=T0 + timedelta(hours=8), kinds=("round", "fact")),
            SearchFilter(since=(T0 + timedelta(hours=5)).astimezone(timezone.utc)),  # the same instant in UTC
            SearchFilter(thread_ids=("no-such-thread",)),
        ],
    )
    def test_filters_choose_the_same_units_as_the_reference_predicate(self, units: UnitStore, where: SearchFilter) -> None:
        corpus = self._filtered_corpus()
        units.put(corpus)
        expected = {u.id for u in corpus if where.matches(u)}
        assert {s.id for s in units.keyword_search(A, "火锅", k=50, where=where)} == expected

    def test_filters_do_not_change_scores(self, units: UnitStore) -> None:
        corpus = self._filtered_corpus()
        units.put(corpus)
        everything = {s.id: s.score for s in units.keyword_search(A, "火锅 记录3", k=50)}
        for s in units.keyword_search(A, "火锅 记录3", k=50, where=SearchFilter(thread_ids=("t2",))):
            assert s.score == everything[s.id]

    def test_k_applies_after_filters(self, units: UnitStore) -> None:
        units.put([unit(f"a{i}", "火锅 火锅 火锅") for i in range(5)] + [unit(f"b{i}", "火锅", A2) for i in range(3)])
        assert [s.id for s in units.keyword_search(A, "火锅", k=2, where=SearchFilter(thread_ids=("t2",)))] == ["b0", "b1"]

    # ---- deletion and iteration --------------------------------------------------------------

    def test_delete_by_ids(self, units: UnitStore) -> None:
        units.put([unit("a", "跑步"), unit("b", "跑步"), unit("a", "跑步", B)])
        assert units.delete(A, ["a", "missing"]) == 1
        assert [s.id for s in units.keyword_search(A, "跑步", k=5)] == ["b"]
        assert [u.id for u in units.get(B, ["a"])] == ["a"]
        assert units.delete(A, []) == 0

    def test_delete_a_thread_by_its_exact_key(self, units: UnitStore) -> None:
        units.put([unit("a", "跑步", A), unit("b", "跑步", A2), unit("c", "跑步", AGENT), unit("d", "跑步", B)])
        assert units.delete(A) == 1
        assert sorted(s.id for s in units.keyword_search(A, "跑步", k=5)) == ["b", "c"]
        assert [s.id for s in units.keyword_search(B, "跑步", k=5)] == ["d"]

    def test_delete_a_user(self, units: UnitStore) -> None:
        units.put(
            [unit("a", "跑步", A), unit("b", "跑步", A2), unit("c", "跑步", AGENT), unit("d", "跑步", B), unit("e", "跑步", OTHER_TENANT)]
        )
        assert units.delete(AGENT.user()) == 1
        assert units.delete(A.user()) == 2
        assert units.keyword_search(A, "跑步", k=5) == []
        assert [s.id for s in units.keyword_search(B, "跑步", k=5)] == ["d"]
        assert [s.id for s in units.keyword_search(OTHER_TENANT, "跑步", k=5)] == ["e"]

    def test_store_delete_user_and_delete_thread_remove_units(self, store: FullStore) -> None:
        store.units.put([unit("a", "跑步", A), unit("b", "跑步", A2), unit("d", "跑步", B), unit("e", "跑步", OTHER_TENANT)])
        store.history.append(A2, [msg("user", "跑步")])
        store.history.delete_thread(A2)
        assert [s.id for s in store.units.keyword_search(A, "跑步", k=5)] == ["a"]
        store.delete_user(A)
        assert store.units.keyword_search(A, "跑步", k=5) == [] and store.units.get(A, ["a", "b"]) == []
        assert [s.id for s in store.units.keyword_search(B, "跑步", k=5)] == ["d"]
        assert [s.id for s in store.units.keyword_search(OTHER_TENANT, "跑步", k=5)] == ["e"]

    def test_the_users_with_units_and_one_threads_units(self, units: UnitStore) -> None:
        units.put(
            [
                unit("a", "文本", A),
                unit("n1", "笔记", A.thread("notes")),
                unit("n2", "代理的笔记", AGENT.thread("notes")),
                unit("b", "别人", B),
                unit("o", "别的租户", OTHER_TENANT),
            ]
        )
        assert units.users("default") == ["user_001", "user_002"] and units.users("acme") == ["user_001"]
        assert units.users("default", thread_id="notes") == ["user_001"] and units.users("nobody") == []
        assert sorted(u.id for b in units.iterate(A.user(), thread_id="notes") for u in b) == ["n1", "n2"]  # every agent's
        assert [u.id for b in units.iterate(AGENT.user(), thread_id="notes") for u in b] == ["n2"]
        assert [u.id for b in units.iterate(thread_id="notes", batch=1) for u in b] in (["n1", "n2"], ["n2", "n1"])
        assert list(units.iterate(B.user(), thread_id="notes")) == []

    def test_iterate_in_batches(self, units: UnitStore) -> None:
        units.put([unit(f"a{i}", f"文本{i}") for i in range(7)] + [unit("g", "代理", AGENT), unit("b", "别人", B)])
        batches = list(units.iterate(A, batch=3))
        assert all(1 <= len(b) <= 3 for b in batches)
        assert sorted(u.id for b in batches for u in b) == sorted([f"a{i}" for i in range(7)] + ["g"])
        assert [u.id for b in units.iterate(AGENT) for u in b] == ["g"]
        assert sorted(u.id for b in units.iterate() for u in b) == sorted([f"a{i}" for i in range(7)] + ["g", "b"])
        assert list(units.iterate(Scope(user_id="nobody"))) == []
        with pytest.raises(InvalidInput):
            list(units.iterate(A, batch=0))
