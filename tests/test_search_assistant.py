"""What the user said ranks before the bare tail of a long assistant answer that matches as well,
unless the question asks what the assistant said; units are cut by the real round cutter."""

from datetime import datetime, timezone

import numpy as np
import pytest

from memstack.backends.memory import MemoryStore
from memstack.retrieval.search import Searcher, SearchSettings, assistant_only
from memstack.retrieval.units import units_for_round
from memstack.tokens import get_counter
from memstack.types import Message, Scope, Unit

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
USER = Scope(user_id="u", thread_id="t")
D = 4
REQUEST = "I cracked the screen protector on my iPhone 13 Pro and need a new one."
TIPS = [f"Tip {i}: consider a durable case, a power bank or a wallet case for everyday carry." for i in range(40)]


def e(*weights: float) -> np.ndarray:
    v = np.zeros(D, dtype=np.float32)
    v[: len(weights)] = weights
    return v / np.linalg.norm(v)


QUERIES = {"Can I get some ideas for phone accessories?": e(1), "Which phone accessories did you suggest?": e(1)}


@pytest.fixture
def found():
    """The units of one long round (the request, then the answer's tail alone) indexed so that
    the tail is a little closer to the question than the request."""
    round_ = [
        Message(role="user", content=REQUEST, id="m1", seq=1, timestamp=T0),
        Message(role="assistant", content=" ".join(TIPS), id="m2", seq=2, timestamp=T0),
    ]
    units = units_for_round(USER, round_, 1, get_counter("cl100k_base"), chunk_tokens=120, key_min_tokens=None)
    assert len(units) >= 2 and not assistant_only(units[0]) and assistant_only(units[-1])
    head, tail = units[0], units[-1]
    store = MemoryStore()
    store.units.put([head, tail])
    store.vectors.upsert([head, tail], np.stack([e(1, 0.35), e(1, 0.3)]), model="table")

    class Table:
        name, dimension = "table", D

        def embed_documents(self, texts):
            return np.stack([e(0, 0, 0, 1) for _ in texts])

        def embed_query(self, text):
            return QUERIES[text]

    def search(query, **settings):
        hits = Searcher(store.units, store.vectors, Table(), SearchSettings(feedback=0, keys=False, **settings)).search(USER, query, k=2)
        return ["request" if h.unit.id == head.id else "tail" for h in hits]

    return search


def test_what_the_user_said_comes_before_an_equally_matching_answer_tail(found):
    assert found("Can I get some ideas for phone accessories?", assistant_weight=1.0) == ["tail", "request"]
    assert found("Can I get some ideas for phone accessories?") == ["request", "tail"]


def test_a_question_about_what_the_assistant_said_keeps_its_order(found):
    assert found("Which phone accessories did you suggest?") == ["tail", "request"]


def test_units_stored_before_roles_were_recorded_are_judged_by_their_labels():
    plain = Unit(id="a", scope=USER, text="Assistant: hi", timestamp=T0, metadata={"spans": [["m", 1, "Assistant", 0, 11, 13]]})
    mixed = Unit(
        id="b",
        scope=USER,
        text="助手: 好\n用户: 嗯",
        timestamp=T0,
        metadata={"spans": [["m", 1, "助手", 0, 4, 5], ["n", 2, "用户", 0, 10, 11]]},
    )
    assert assistant_only(plain) and not assistant_only(mixed)
    assert not assistant_only(Unit(id="c", scope=USER, text="hello", timestamp=T0))
