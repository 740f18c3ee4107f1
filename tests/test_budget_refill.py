"""A layer's share is a cap, not a reservation: what the conversation and the other layers leave
unused goes to the layers that hit their cap (retrieval first), and the context never exceeds
max_tokens (§3 of issue 12)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from memstack import Memory
from memstack.layers import register_layer
from memstack.layers.base import LayerOutput, ReadRequest
from memstack.providers.embeddings import get_embedder
from memstack.stack import SECTIONS_SHARE
from memstack.types import Dropped, Message, Section

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def item(i: int, size: int) -> str:
    return f"item{i} " + " ".join(["word"] * size)


@dataclass(frozen=True)
class Capped:
    """A memory layer like the real ones: its ``items`` (sizes in words) as lines of one section,
    in order, those that do not fit ``share`` of the budget left out (and reported dropped)."""

    sizes: tuple[int, ...] = ()
    share: float = 0.2
    name: str = "capped"
    scope: str = "user"
    history: str = "none"
    #: the sections' priority: 40 as retrieval's, 45 as the entity and graph sections'
    priority: int = 40

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        budget = None if request.budget is None else int(request.budget * self.share)
        lines, left = [f"{self.name}:"], []
        for i, n in enumerate(self.sizes):
            line = item(i, n)
            if budget is not None and request.counter.count("\n".join([*lines, line])) > budget:
                left.append(line)
            else:
                lines.append(line)
        dropped = (
            [Dropped(self.name, f"{len(left)} items over its share of the budget", (), sum(request.counter.count(x) for x in left))]
            if left
            else []
        )
        return LayerOutput(messages, [Section(self.name, "\n".join(lines), priority=self.priority)] if len(lines) > 1 else [], dropped)


register_layer("capped", Capped)


def capped_too(sizes: tuple[int, ...] = (), share: float = 0.2) -> Capped:
    return Capped(sizes=sizes, share=share, name="capped-too")


register_layer("capped-too", capped_too)


@dataclass(frozen=True)
class Searching(Capped):
    """A capped layer that searches, as retrieval does: it gets the leftover first."""

    name: str = "searching"

    def search(self, *args, **kwargs):
        return []


register_layer("searching", Searching)


def facts(sizes: tuple[int, ...] = (), share: float = 0.2) -> Capped:
    """A model-made layer's section (priority 45, as the entity and graph sections): dropped
    before retrieval's, so it gives way to it in the second pass."""
    return Capped(sizes=sizes, share=share, name="facts", priority=45)


register_layer("facts", facts)


def add_turns(memory: Memory, turns: list[int]) -> None:
    """One round per size in ``turns`` (words per message), a minute apart, in user u's thread t."""
    for i, n in enumerate(turns):
        memory.add(
            [{"role": "user", "content": f"u{i} " + "x " * n}, {"role": "assistant", "content": f"a{i} " + "y " * n}],
            user_id="u",
            thread_id="t",
            at=T0 + timedelta(minutes=i),
        )


def shown_items(ctx, name: str = "capped") -> list[str]:
    memory = next((m.text for m in ctx.messages if m.id == "memstack-memory"), "")
    block = memory.split(f"{name}:\n", 1)[1].split("\n\n", 1)[0] if f"{name}:\n" in memory else ""
    return [line.split(" ", 1)[0] for line in block.splitlines() if line]


def test_a_capped_layer_with_nothing_beside_it_fills_the_budget():
    memory = Memory("memory://", layers="capped", options={"sizes": (20,) * 80, "share": 0.2})
    ctx = memory.context(user_id="u", thread_id="t", query="what do you know?", max_tokens=1200)
    assert ctx.tokens <= 1200
    # the share alone holds 240 tokens (10 items of 23); the leftover holds 40 more
    assert ctx.sections["memory:capped"] > 1100 and len(shown_items(ctx)) >= 50
    assert ctx.tokens > 1200 - 30  # what is left is less than one more item


def test_the_conversation_gets_what_it_needs_first_and_memory_the_rest():
    memory = Memory("memory://", layers="window,capped", options={"sizes": (20,) * 40, "share": 0.2, "k": 10})
    for i in range(6):
        memory.add(
            [
                {"role": "user", "content": f"question {i} " + "about things " * 20},
                {"role": "assistant", "content": f"answer {i} " + "with details " * 20},
            ],
            user_id="u",
            thread_id="t",
            at=T0 + timedelta(minutes=i),
        )
    ctx = memory.context(user_id="u", thread_id="t", query="and now?", max_tokens=1200)
    assert ctx.tokens <= 1200 and not [d for d in ctx.dropped if d.layer == "budget"]  # the whole window is kept
    assert ctx.sections["history"] > 300 and ctx.sections["memory"] > 1200 - ctx.sections["history"] - ctx.sections["query"] - 30
    # a conversation that needs more than its half is trimmed to it: memory keeps its share
    tight = memory.context(user_id="u", thread_id="t", query="and now?", max_tokens=600)
    assert tight.tokens <= 600 and tight.sections["memory"] >= int((600 - tight.sections["query"]) * SECTIONS_SHARE) - 30


def test_a_searching_layer_gets_the_leftover_first_then_the_stack_order_decides():
    options = {"capped.sizes": (20,) * 40, "capped-too.sizes": (20,) * 40, "searching.sizes": (20,) * 40, "share": 0.1}
    ctx = Memory("memory://", layers="capped-too,capped,searching", options=options).context(
        user_id="u", thread_id="t", query="q", max_tokens=1000
    )
    assert ctx.tokens <= 1000
    assert len(shown_items(ctx, "searching")) > 3 * len(shown_items(ctx, "capped-too")) and len(shown_items(ctx, "capped-too")) == len(
        shown_items(ctx, "capped")
    )
    # none searches: the first in the stack that hit its cap takes the leftover
    ctx = Memory("memory://", layers="capped-too,capped", options=options).context(user_id="u", thread_id="t", query="q", max_tokens=1000)
    assert len(shown_items(ctx, "capped-too")) > 3 * len(shown_items(ctx, "capped"))


@settings(max_examples=150, deadline=None)
@given(
    budget=st.integers(60, 2500),
    sizes=st.lists(st.integers(1, 60), max_size=30),
    other=st.lists(st.integers(1, 60), max_size=10),
    turns=st.lists(st.integers(1, 80), max_size=8),
    share=st.sampled_from([0.05, 0.1, 0.2, 0.4]),
)
def test_the_budget_is_never_exceeded_and_what_is_left_is_used(budget, sizes, other, turns, share):
    memory = Memory(
        "memory://",
        layers="full,capped-too,capped",
        options={"capped.sizes": tuple(sizes), "capped-too.sizes": tuple(other), "share": share},
    )
    add_turns(memory, turns)
    ctx = memory.context(user_id="u", thread_id="t", query="the question", max_tokens=budget)
    assert ctx.tokens <= budget
    counted = memory.counter.count_messages(ctx.messages)
    assert counted == ctx.tokens
    trimmed = any(d.layer == "budget" for d in ctx.dropped)
    available = budget - ctx.sections["query"]
    if trimmed:  # the conversation gave way only to memory's own share
        assert ctx.sections["memory"] <= int(available * SECTIONS_SHARE) + 8
    else:  # every item left out would not have fitted in what is left
        left = budget - ctx.tokens
        for name, items in (("capped", sizes), ("capped-too", other)):
            shown = set(shown_items(ctx, name))
            missing = [memory.counter.count(item(i, n)) for i, n in enumerate(items) if f"item{i}" not in shown]
            assert not missing or min(missing) + 16 > left, (name, missing, left)


class CountingEmbedder:
    """The local embedder, counting the queries it embeds."""

    def __init__(self) -> None:
        self.inner = get_embedder("local")
        self.name, self.dimension, self.queries = self.inner.name, self.inner.dimension, 0

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        self.queries += 1
        return self.inner.embed_query(text)


def test_a_capped_retrieval_layer_fits_more_of_its_hits_without_searching_again():
    embedder = CountingEmbedder()
    memory = Memory(
        "memory://", layers="window,retrieval", options={"embedder": embedder, "retrieval.share": 0.1, "top_k": 8, "neighbours": 0}
    )
    places = [
        "西湖边的体育馆",
        "公司楼下的球馆",
        "滨江的羽毛球中心",
        "学校的体育馆",
        "小区会所",
        "城西的球馆",
        "朋友家附近的场地",
        "下沙的体育中心",
    ]
    for i, place in enumerate(places):
        memory.add(
            [
                {"role": "user", "content": f"我这周{'一二三四五六日'[i % 7]}在{place}打了两个小时羽毛球，和同事一起，打得很尽兴"},
                {"role": "assistant", "content": f"在{place}打羽毛球听起来很不错，注意补充水分。"},
            ],
            user_id="u",
            thread_id=f"s{i}",
            at=T0 + timedelta(days=i),
        )
    memory.flush()
    hits = memory.search("我都在哪些地方打过羽毛球？", user_id="u", at=T0 + timedelta(days=30))
    assert len(hits) >= 5
    before = embedder.queries
    ctx = memory.context(user_id="u", thread_id="new", query="我都在哪些地方打过羽毛球？", at=T0 + timedelta(days=30), max_tokens=1200)
    assert embedder.queries == before + 1  # one embedding of the query for both passes
    assert ctx.tokens <= 1200 and ctx.sections["memory:retrieval"] > int((1200 - ctx.sections["query"]) * 0.1)
    memory_text = next(m.text for m in ctx.messages if m.id == "memstack-memory")
    shown = [h for h in hits if any(place in h.unit.text and place in memory_text for place in places)]
    assert len(shown) == len(hits)  # every hit, where the share alone held about two


def test_model_made_sections_give_way_to_the_evidence_a_searching_layer_finds():
    """Raw evidence before model-made facts: beside a facts layer, the searching layer shows
    what it shows alone; the facts get the room it leaves, or none (reported dropped)."""
    options = {"searching.sizes": (20,) * 20, "facts.sizes": (20,) * 40, "searching.share": 0.1, "facts.share": 0.3}
    alone = Memory("memory://", layers="searching", options=options).context(user_id="u", thread_id="t", query="q", max_tokens=600)
    both = Memory("memory://", layers="facts,searching", options=options).context(user_id="u", thread_id="t", query="q", max_tokens=600)
    assert len(shown_items(alone, "searching")) == 20
    assert shown_items(both, "searching") == shown_items(alone, "searching") and both.tokens <= 600
    assert 0 < len(shown_items(both, "facts")) < 10  # what the evidence leaves
    # evidence that needs the whole room leaves the facts none, and says so
    options["searching.sizes"] = (20,) * 40
    alone = Memory("memory://", layers="searching", options=options).context(user_id="u", thread_id="t", query="q", max_tokens=600)
    both = Memory("memory://", layers="facts,searching", options=options).context(user_id="u", thread_id="t", query="q", max_tokens=600)
    assert shown_items(both, "searching") == shown_items(alone, "searching") and not shown_items(both, "facts")
    assert any(d.layer == "facts" and "gave way" in d.reason for d in both.dropped)


@settings(max_examples=100, deadline=None)
@given(
    budget=st.integers(60, 2500),
    found=st.lists(st.integers(1, 60), max_size=20),
    made=st.lists(st.integers(1, 60), max_size=20),
    turns=st.lists(st.integers(1, 80), max_size=6),
    shares=st.tuples(st.sampled_from([0.05, 0.1, 0.2, 0.4]), st.sampled_from([0.05, 0.15, 0.3])),
)
def test_the_evidence_shown_is_the_same_with_or_without_model_made_layers(budget, found, made, turns, shares):
    def context(layers: str):
        memory = Memory(
            "memory://",
            layers=layers,
            options={
                "searching.sizes": tuple(found),
                "facts.sizes": tuple(made),
                "searching.share": shares[0],
                "facts.share": shares[1],
                "k": 3,
            },
        )
        add_turns(memory, turns)
        return memory.context(user_id="u", thread_id="t", query="the question", max_tokens=budget)

    alone, both = context("window,searching"), context("window,facts,searching")
    assert both.tokens <= budget and both.tokens == Memory("memory://").counter.count_messages(both.messages)
    assert shown_items(both, "searching") == shown_items(alone, "searching")
