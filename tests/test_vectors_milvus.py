"""The Milvus index passes the vector contract against a milvus-lite file, escapes filters, reads
its URLs, keeps its generations behind an alias and refuses collections it did not make.

Skipped when pymilvus or milvus-lite cannot be imported, except under CI, where that is a failure.
One index (one milvus-lite process) serves the whole module; each test starts from ``reset()``.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

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

from pymilvus import DataType  # noqa: E402

from memstack.backends.milvus import MilvusVectorIndex, parse, quote, redacted, search_expression  # noqa: E402
from memstack.errors import ForeignCollection, InvalidInput  # noqa: E402
from memstack.types import IndexSwitch  # noqa: E402

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


# ---- URLs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("milvus://127.0.0.1:19530", {"uri": "http://127.0.0.1:19530", "token": None, "db_name": "", "collection": "memstack_units"}),
        ("milvus://db.example", {"uri": "http://db.example:19530"}),
        (
            "milvus://u:p%40ss@h:1/team?collection=mine&timeout=3&secure=true",
            {"uri": "https://h:1", "token": "u:p@ss", "db_name": "team", "collection": "mine", "timeout": 3.0},
        ),
        ("milvus://:API_KEY@h", {"token": "API_KEY"}),
        ("milvus:///srv/vectors.db?collection=k", {"uri": "/srv/vectors.db", "token": None, "collection": "k"}),
        ("milvus://[::1]:19530?index=hnsw", {"uri": "http://[::1]:19530", "index_type": "HNSW", "consistency": "Strong"}),
        ("milvus://h?consistency=bounded", {"consistency": "Bounded"}),
    ],
)
def test_url_forms(url, want):
    got = parse(url)
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:19530", "not a milvus:// URL"),
        ("milvus://vectors.db", "reads as a host"),
        ("milvus://h?colection=x", "unknown option 'colection'"),
        ("milvus://h?collection=a&collection=b", "given twice"),
        ("milvus://h:99999", "out of range"),
        ("milvus://h/a/b", "one segment"),
        ("milvus:///", "absolute path"),
        ("milvus://h?timeout=0", "timeout"),
        ("milvus://h?secure=maybe", "secure"),
        ("milvus://h?consistency=weak", "consistency must be one of strong, session, bounded, eventually"),
        ("milvus://h?collection=1st", "Milvus collection name '1st'"),
        ("milvus://h?collection=a-b", "Milvus collection name 'a-b'"),
    ],
)
def test_bad_urls_are_refused_naming_the_forms(url, why):
    with pytest.raises(InvalidInput, match=why) as caught:
        parse(url)
    assert caught.value.field in ("vectors", "collection")


def test_a_password_is_not_in_messages():
    assert redacted("milvus://root:s3cret@h:19530?collection=c") == "milvus://***@h:19530?collection=c"
    with pytest.raises(InvalidInput) as caught:
        parse("milvus://root:s3cret@h:19530?nope=1")
    assert "s3cret" not in str(caught.value)


def test_open_vectors_by_url(tmp_path):
    from memstack.backends import open_vectors
    from memstack.errors import UnknownName

    assert open_vectors(None) is None
    with pytest.raises(UnknownName, match="milvus://HOST:PORT"):
        open_vectors("redis://127.0.0.1:6379")


def test_missing_pymilvus_names_the_install_command(tmp_path):
    """Without pymilvus, --vectors fails with the pip line (exit 2, one line), and plain use works."""
    code = "import sys; sys.modules['pymilvus'] = None; from memstack.cli import main; sys.exit(main(sys.argv[1:]))"
    db = f"sqlite:///{tmp_path / 'm.db'}"
    env = {**os.environ, "MEMSTACK_HOME": str(tmp_path)}
    failed = subprocess.run(
        [sys.executable, "-c", code, "--db", db, "--vectors", "milvus://127.0.0.1:19530", "history", "--user", "u", "--thread", "t"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert (
        failed.returncode == 2
        and failed.stderr.strip() == 'memstack: error: pymilvus is not installed; install it with: pip install "memstack[milvus]"'
    )
    plain = subprocess.run(
        [sys.executable, "-c", code, "--db", db, "add", "--user", "u", "--thread", "t", "--role", "user", "hi"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert plain.returncode == 0, plain.stderr


# ---- collections memstack owns ------------------------------------------------------------


def test_generations_behind_the_alias_and_foreign_collections_refused(shared):
    shared.reset()
    client = shared._client
    assert shared.info() == (None, None, 0) and not client.has_collection("contract")
    shared.upsert([unit("u1")], [axis(0)], model=MODEL)
    assert client.describe_collection("contract")["collection_name"] == "contract_g1"
    properties = client.describe_collection("contract_g1")["properties"]
    assert {k: properties[k] for k in ("memstack.owner", "memstack.alias", "memstack.generation", "memstack.schema", "memstack.model")} == {
        "memstack.owner": "memstack",
        "memstack.alias": "contract",
        "memstack.generation": "1",
        "memstack.schema": "1",
        "memstack.model": MODEL,
    }
    # a collection of the index's name that memstack did not make: refused, and left as it is
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=4)
    client.create_collection("conversation", schema=schema)
    client.insert("conversation", [{"id": 1, "embedding": [0.1, 0.2, 0.3, 0.4]}])
    try:
        with pytest.raises(ForeignCollection, match="'conversation' was not created by memstack"):
            MilvusVectorIndex(shared.where.removeprefix("milvus-lite "), collection="conversation", _client=client)
        client.create_alias("conversation", "borrowed")
        with pytest.raises(ForeignCollection, match="alias 'borrowed' points at it"):
            MilvusVectorIndex(shared.where.removeprefix("milvus-lite "), collection="borrowed", _client=client)
        assert client.query("conversation", filter="", output_fields=["count(*)"])[0]["count(*)"] == 1
    finally:
        client.drop_alias("borrowed")
        client.drop_collection("conversation")
    shared.reset()
    assert not [n for n in client.list_collections() if n.startswith("contract")]


def test_stage_and_switch_keep_one_way_back(shared):
    shared.reset()
    client = shared._client
    shared.upsert([unit("old")], [axis(0)], model=MODEL)
    staged = shared.stage()
    staged.upsert([unit("new")], [axis(0, 4)], model="another-model")  # another model and dimension
    assert ids(shared.search(A, axis(0), k=5)) == ["old"]  # the staged generation is not searched yet
    assert shared.switch(staged) == IndexSwitch("contract_g2", "contract_g1")
    assert shared.info() == ("another-model", 4, 1) and ids(shared.search(A, axis(0, 4), k=5)) == ["new"]
    third = shared.stage()
    third.upsert([unit("newer")], [axis(1, 4)], model="another-model")
    assert shared.switch(third) == IndexSwitch("contract_g3", "contract_g2", ("contract_g1",))
    assert sorted(n for n in client.list_collections() if n.startswith("contract")) == ["contract_g2", "contract_g3"]
    empty = shared.stage()  # staged, never written: the index is left empty, the last generation kept
    assert shared.switch(empty) == IndexSwitch(None, "contract_g3")
    assert shared.info() == (None, None, 0)
    with pytest.raises(InvalidInput):
        shared.switch(shared)
    shared.reset()
    assert not [n for n in client.list_collections() if n.startswith("contract")]


def test_memory_keeps_vectors_in_milvus_lite_and_the_profile_says_so(tmp_path):
    from memstack import Memory
    from memstack.profile import ProfileMismatch

    db, vectors = f"sqlite:///{tmp_path / 'm.db'}", f"milvus:///{tmp_path / 'vectors.db'}?collection=mem"
    with Memory(db, vectors=vectors) as mem:
        mem.add(
            [{"role": "user", "content": "我正在开发一个知识中台，后端使用SpringBoot"}, {"role": "assistant", "content": "好的"}],
            user_id="u1",
            thread_id="s1",
        )
        mem.flush()
        assert "SpringBoot" in mem.search("我的后端用什么技术？", user_id="u1", k=1)[0].unit.text
        assert mem.vectors.info()[2] >= 1 and mem.store.vectors.info()[2] == 0
        assert mem.profile.vectors == "milvus:mem" and mem.profile.to_dict()["version"] == 2
        mem.forget(user_id="u1")
        assert mem.vectors.info()[2] == 0
    with pytest.raises(ProfileMismatch, match=r"the store's vectors are in milvus:mem .*--vectors milvus://HOST:PORT\?collection=mem"):
        Memory(db)
    with pytest.raises(ProfileMismatch, match="this process would keep them in milvus:other"):
        Memory(db, vectors=f"milvus:///{tmp_path / 'vectors.db'}?collection=other")
