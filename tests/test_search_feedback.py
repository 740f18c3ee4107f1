"""Pseudo-relevance feedback in hybrid search, on the in-memory store with a table embedder whose
geometry is known: a unit that the question names only by kind is found through the units that
first match it, and feedback never makes an unrelated question retrieve anything."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memstack.backends.memory import MemoryStore
from memstack.retrieval.search import BACKGROUND, Searcher, SearchSettings
from memstack.types import Scope, Unit

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
USER = Scope(user_id="u", thread_id="t")
D = 8


def e(*weights: float) -> np.ndarray:
    v = np.zeros(D, dtype=np.float32)
    v[: len(weights)] = weights
    return v / np.linalg.norm(v)


# axis 0: the question's wording, axis 1: musical instruments, axes 2-6: other topics, 7: background
QUERY = {"What musical things do I have?": e(1), "Tell me about quantum chromodynamics": e(0, 0, 0, 0, 0, 0, 0.3, 1)}
DOCS = {
    "guitar": ("I play my Fender Stratocaster every evening", e(1, 1)),
    "drums": ("The Pearl drum kit lives in the garage", e(1, 1.2, 0.2)),
    "piano": ("I need someone to tune the Korg B1 soon", e(0, 1, 0.35)),
    **{f"other{i}": (f"Unrelated note number {i} about errands", e(0, 0, *([0] * i), 1)) for i in range(5)},
}


class TableEmbedder:
    name = "table"
    dimension = D

    def embed_documents(self, texts):
        by_text = {text: v for text, v in DOCS.values()}
        return np.stack([by_text.get(t, e(0, 0, 0, 0, 0, 0, 0, 1)) for t in texts])

    def embed_query(self, text):
        return QUERY[text]


@pytest.fixture
def store():
    s = MemoryStore()
    units = [Unit(id=uid, scope=USER, text=text, timestamp=T0 + timedelta(minutes=i)) for i, (uid, (text, _)) in enumerate(DOCS.items())]
    s.units.put(units)
    s.vectors.upsert(units, np.stack([v for _, v in DOCS.values()]), model="table")
    return s


def search(store, query, **settings):
    return [h.unit.id for h in Searcher(store.units, store.vectors, TableEmbedder(), SearchSettings(**settings)).search(USER, query, k=3)]


def test_the_table_is_what_the_test_assumes():
    assert len(TableEmbedder().embed_documents(BACKGROUND)) == len(BACKGROUND)
    assert float(QUERY["What musical things do I have?"] @ DOCS["piano"][1]) == pytest.approx(0.0)


def test_feedback_finds_what_the_question_names_only_by_kind(store):
    without = search(store, "What musical things do I have?", feedback=0)
    assert "piano" not in without and without[:2] == ["guitar", "drums"]
    found = search(store, "What musical things do I have?")
    assert found[:2] == ["guitar", "drums"] and found[2] == "piano"


def test_feedback_retrieves_nothing_for_an_unrelated_question(store):
    assert search(store, "Tell me about quantum chromodynamics") == []
    assert search(store, "Tell me about quantum chromodynamics", feedback=0) == []


def test_feedback_stays_within_the_user(store):
    other = Scope(user_id="someone-else", thread_id="t")
    unit = Unit(id="theirs", scope=other, text="Their Korg B1 piano", timestamp=T0)
    store.units.put([unit])
    store.vectors.upsert([unit], e(0, 1, 0.35)[None, :], model="table")
    assert "theirs" not in search(store, "What musical things do I have?")
    assert store.vectors.fetch(USER, ["theirs"]) == {}
