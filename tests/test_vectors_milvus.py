"""The Milvus index passes the vector contract against a milvus-lite file, and escapes filters.

Skipped when pymilvus or milvus-lite cannot be imported, except under CI, where that is a failure.
One index (one milvus-lite process) serves the whole module; each test starts from ``reset()``.
"""

from __future__ import annotations

import importlib
import os

import pytest

from memstack.testing import A, B, VectorIndexContract
from memstack.testing.vectors import MODEL, axis, ids, unit
from memstack.types import Scope, SearchFilter

try:
    importlib.import_module("pymilvus")
    importlib.import_module("milvus_lite")
except ImportError as exc:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the Milvus tests, but: {exc}; pip install 'memstack[milvus]'", pytrace=False)
    pytest.skip(
        f"pymilvus and milvus-lite are needed for the Milvus tests ({exc}); pip install 'memstack[milvus]'", allow_module_level=True
    )

from memstack.backends.milvus import MilvusVectorIndex, quote, search_expression  # noqa: E402

INJECTION = 'x" or user_id != "'


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    index = MilvusVectorIndex(str(tmp_path_factory.mktemp("milvus") / "memstack.db"), collection="contract")
    yield index
    index.close()


class TestMilvusVectorIndex(VectorIndexContract):
    @pytest.fixture(autouse=True)
    def _shared(self, shared):
        self.shared = shared

    def new_index(self):
        self.shared.reset()
        return self.shared


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("plain", '"plain"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("line\nbreak\ttab\r", '"line\\nbreak\\ttab\\r"'),
        ("中文用户", '"中文用户"'),
        (INJECTION, '"x\\" or user_id != \\""'),
        ("\\", '"\\\\"'),
    ],
)
def test_quote(value, literal):
    assert quote(value) == literal


def test_awkward_values_match_only_themselves(shared):
    shared.reset()
    awkward = ['u"1', "u\\2", "中文用户", INJECTION, "x", "\\"]
    shared.upsert(
        [unit("same", Scope(user_id=u, thread_id=u), category=f"{u}\n\t") for u in awkward],
        [axis(i) for i in range(len(awkward))],
        model=MODEL,
    )
    for i, user in enumerate(awkward):
        got = shared.search(Scope(user_id=user), axis(0), k=10)
        assert len(got) == 1 and abs(got[0].score - (1.0 if i == 0 else 0.5)) < 1e-5, user
        where = SearchFilter(thread_ids=(user,), categories=(f"{user}\n\t",))
        assert ids(shared.search(Scope(user_id=user), axis(0), k=10, where=where)) == ["same"]
    assert shared.search(Scope(user_id="x"), axis(0), k=10, where=SearchFilter(thread_ids=(INJECTION,))) == []
    assert shared.delete(Scope(user_id=INJECTION)) == 1
    assert shared.info()[2] == len(awkward) - 1


def test_filter_expression_is_built_from_quoted_values():
    expression = search_expression(Scope(user_id=INJECTION, agent_id="a"), SearchFilter(categories=('"',)))
    assert expression == 'tenant == "default" and user_id == "x\\" or user_id != \\"" and agent_id == "a" and category in ["#\\""]'


def test_delete_user_erases_every_agent_and_thread(shared):
    shared.reset()
    shared.upsert(
        [unit("a", A), unit("b", A.thread("t2")), unit("c", Scope(user_id=A.user_id, thread_id="t1", agent_id="p")), unit("a", B)],
        [axis(i) for i in range(4)],
        model=MODEL,
    )
    assert shared.delete_user(Scope(user_id=A.user_id, thread_id="t1", agent_id="p")) == 3
    assert shared.search(A, axis(0), k=10) == []
    assert ids(shared.search(B, axis(0), k=10)) == ["a"]
