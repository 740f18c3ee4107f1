"""The Chroma index passes the vector contract on Chroma's embedded client, filters by data, reads
its URLs, keeps one collection per tenant and embedder behind a pointer, reindexes into a new
generation and refuses collections it did not make.

Skipped when chromadb cannot be imported, except under CI, where that is a failure. One index
(one embedded client on a temporary folder) serves the whole module; each test starts from ``reset()``.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

from memstack.testing import OTHER_TENANT, A, B, VectorIndexContract
from memstack.testing.vectors import MODEL, axis, ids, unit
from memstack.types import IndexSwitch, Scope, SearchFilter

try:
    importlib.import_module("chromadb")
except ImportError as exc:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the Chroma tests, but: {exc}; pip install 'memstack[chroma]'", pytrace=False)
    pytest.skip(f"chromadb is needed for the Chroma tests ({exc}); pip install 'memstack[chroma]'", allow_module_level=True)

from memstack.backends.chroma import ChromaVectorIndex, parse, search_where  # noqa: E402
from memstack.backends.chroma.collections import part_name  # noqa: E402
from memstack.errors import ForeignCollection, InvalidInput  # noqa: E402

INJECTION = 'x" or user_id != "'


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    index = ChromaVectorIndex(str(tmp_path_factory.mktemp("chroma") / "db"), collection="contract")
    yield index
    index.close()


class TestChromaVectorIndex(VectorIndexContract):
    @pytest.fixture(autouse=True)
    def _shared(self, shared):
        self.shared = shared

    def new_index(self):
        self.shared.reset()
        return self.shared


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
    assert shared.search(Scope(user_id="x"), axis(0), k=10, where=SearchFilter(categories=("",))) == []  # "x\n\t" only
    assert shared.delete(Scope(user_id=INJECTION)) == 1
    assert shared.info()[2] == len(awkward) - 1


def test_the_filter_is_data_with_the_user_in_it():
    # the tenant is the collection's (one per tenant), not a term
    assert search_where(Scope(user_id="u", tenant="acme"), None) == {"user_id": {"$eq": "u"}}
    assert search_where(Scope(user_id=INJECTION, agent_id="a"), SearchFilter(categories=('"',), kinds=("fact", "fact"))) == {
        "$and": [
            {"user_id": {"$eq": INJECTION}},
            {"agent_id": {"$eq": "a"}},
            {"category": {"$in": ['#"']}},
            {"kind": {"$in": ["fact"]}},
        ]
    }


def test_one_collection_per_tenant_and_embedder_behind_a_pointer(shared):
    shared.reset()
    client = shared._client
    shared.upsert([unit("u1", A), unit("u2", B), unit("u1", OTHER_TENANT)], [axis(0), axis(1), axis(2)], model=MODEL)
    names = sorted(c.name for c in client.list_collections() if c.name.startswith("contract"))
    mine, theirs = part_name("contract", 1, "default"), part_name("contract", 1, OTHER_TENANT.tenant)
    assert names == sorted(["contract", "contract_g1", mine, theirs])
    assert client.get_collection(mine).count() == 2 and client.get_collection(theirs).count() == 1
    assert client.get_collection("contract").metadata["memstack.generation"] == 1
    head = client.get_collection("contract_g1").metadata
    assert {k: head[k] for k in ("memstack.owner", "memstack.alias", "memstack.role", "memstack.model", "memstack.dimension")} == {
        "memstack.owner": "memstack",
        "memstack.alias": "contract",
        "memstack.role": "generation",
        "memstack.model": MODEL,
        "memstack.dimension": 8,
    }
    assert client.get_collection(theirs).metadata["memstack.tenant"] == OTHER_TENANT.tenant
    # no embedding function of Chroma's is recorded or attached: memstack passes every vector itself
    assert client.get_collection(mine, embedding_function=None).configuration_json["embedding_function"] in (None, {"type": "legacy"})
    assert shared._part(shared._held(), "default")._embedding_function is None
    assert shared.info() == (MODEL, 8, 3)
    assert (
        ids(shared.search(OTHER_TENANT, axis(2), k=5)) == ["u1"] and shared.search(Scope(user_id="u", tenant="nobody"), axis(0), k=5) == []
    )
    shared.reset()
    assert not [c.name for c in client.list_collections() if c.name.startswith("contract")]


def test_collections_memstack_did_not_make_are_refused_and_left_alone(shared):
    shared.reset()
    client = shared._client
    articles = client.create_collection("conversation_memory", metadata={"hnsw:space": "cosine"}, embedding_function=None)
    articles.add(ids=["1"], embeddings=[[0.1, 0.2, 0.3]], metadatas=[{"user_id": "user_001"}], documents=["我平时喜欢跑步"])
    try:
        with pytest.raises(ForeignCollection, match="'conversation_memory' was not created by memstack"):
            ChromaVectorIndex(_client=client, collection="conversation_memory")
        shared.upsert([unit("u1")], [axis(0)], model=MODEL)
        squatter = part_name("contract", 1, "squat")
        client.create_collection(squatter, embedding_function=None)
        with pytest.raises(ForeignCollection, match=f"'{squatter}' was not created by memstack"):
            shared.upsert([unit("u1", Scope(user_id="u", thread_id="t", tenant="squat"))], [axis(0)], model=MODEL)
        shared.reset()  # drops memstack's, never the squatter's or the reader's
        assert client.get_collection("conversation_memory").count() == 1 and client.get_collection(squatter).count() == 0
        client.delete_collection(squatter)
    finally:
        client.delete_collection("conversation_memory")


def test_stage_and_switch_keep_one_way_back(shared):
    shared.reset()
    client = shared._client
    shared.upsert([unit("old")], [axis(0)], model=MODEL)
    staged = shared.stage()
    staged.upsert([unit("new"), unit("new", OTHER_TENANT)], [axis(0, 4), axis(1, 4)], model="another-model")  # another model and dimension
    assert ids(shared.search(A, axis(0), k=5)) == ["old"]  # the staged generation is not searched yet
    with pytest.raises(InvalidInput, match="memstack reindex"):
        shared.upsert([unit("x")], [axis(0, 4)], model="another-model")
    assert shared.switch(staged) == IndexSwitch("contract_g2", "contract_g1")
    assert shared.info() == ("another-model", 4, 2) and ids(shared.search(A, axis(0, 4), k=5)) == ["new"]
    third = shared.stage()
    third.upsert([unit("newer")], [axis(1, 4)], model="another-model")
    assert shared.switch(third) == IndexSwitch("contract_g3", "contract_g2", ("contract_g1",))
    assert sorted({c.name[:11] for c in client.list_collections() if c.name.startswith("contract_g")}) == ["contract_g2", "contract_g3"]
    empty = shared.stage()  # staged, never written: the index is left empty, the last generation kept
    assert shared.switch(empty) == IndexSwitch(None, "contract_g3")
    assert shared.info() == (None, None, 0)
    with pytest.raises(InvalidInput):
        shared.switch(shared)
    shared.reset()
    assert not [c.name for c in client.list_collections() if c.name.startswith("contract")]


# ---- URLs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("chroma:///srv/chroma_db", {"path": "/srv/chroma_db", "collection": "memstack_units"}),
        ("chroma:///srv/chroma_db/?collection=conversation_memory", {"path": "/srv/chroma_db", "collection": "conversation_memory"}),
        ("chroma://127.0.0.1:8001", {"host": "127.0.0.1", "port": 8001, "ssl": False, "timeout": 10.0}),
        ("chroma://db.example?secure=true&timeout=3", {"host": "db.example", "port": 8000, "ssl": True, "timeout": 3.0}),
        ("chroma://[::1]:8000?collection=mem-1", {"host": "::1", "collection": "mem-1"}),
    ],
)
def test_url_forms(url, want):
    got = parse(url)
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8000", "not a chroma:// URL"),
        ("chroma://chroma_db", None),  # a host, fine to parse; connecting fails
        ("chroma://h/chroma_db", "has no path"),
        ("chroma://h?colection=x", "unknown option 'colection'"),
        ("chroma://h?collection=a&collection=b", "given twice"),
        ("chroma://h:99999", "out of range"),
        ("chroma:///", "absolute folder path"),
        ("chroma://h?timeout=0", "timeout"),
        ("chroma:///d?timeout=3", "apply to a server"),
        ("chroma://h?secure=maybe", "secure"),
        ("chroma://u:s3cret@h", "no credentials"),
        ("chroma://h?collection=ab", "Chroma collection name 'ab'"),
        ("chroma://h?collection=a.b.c", "Chroma collection name 'a.b.c'"),
        ("chroma://h?collection=知识", "Chroma collection name '知识'"),
    ],
)
def test_bad_urls_are_refused_naming_the_forms(url, why):
    if why is None:
        assert parse(url)["host"] == "chroma_db"
        return
    with pytest.raises(InvalidInput, match=why) as caught:
        parse(url)
    assert caught.value.field in ("vectors", "collection") and "s3cret" not in str(caught.value)


def test_open_vectors_by_url(tmp_path):
    from memstack.backends import open_vectors
    from memstack.errors import UnknownName

    index = open_vectors(f"chroma://{tmp_path / 'db'}?collection=opened")
    assert isinstance(index, ChromaVectorIndex) and index.location == "chroma:opened"
    index.close()
    with pytest.raises(UnknownName, match=r"chroma://HOST:PORT \(a Chroma server\) or chroma:///ABSOLUTE/DIR"):
        open_vectors("redis://127.0.0.1:6379")


def test_missing_chromadb_names_the_install_command(tmp_path):
    """Without chromadb, --vectors chroma:// fails with the pip line (exit 2, one line)."""
    code = "import sys; sys.modules['chromadb'] = None; from memstack.cli import main; sys.exit(main(sys.argv[1:]))"
    db = f"sqlite:///{tmp_path / 'm.db'}"
    failed = subprocess.run(
        [sys.executable, "-c", code, "--db", db, "--vectors", f"chroma://{tmp_path / 'c'}", "history", "--user", "u", "--thread", "t"],
        capture_output=True,
        text=True,
        env={**os.environ, "MEMSTACK_HOME": str(tmp_path)},
        timeout=120,
    )
    assert failed.returncode == 2
    assert failed.stderr.strip() == 'memstack: error: chromadb is not installed; install it with: pip install "memstack[chroma]"'


def test_memory_keeps_vectors_in_chroma_and_the_profile_says_so(tmp_path):
    from memstack import Memory
    from memstack.profile import ProfileMismatch

    db, vectors = f"sqlite:///{tmp_path / 'm.db'}", f"chroma://{tmp_path / 'chroma_db'}?collection=mem"
    with Memory(db, vectors=vectors) as mem:
        mem.add(
            [{"role": "user", "content": "我正在开发一个知识中台，后端使用SpringBoot"}, {"role": "assistant", "content": "好的"}],
            user_id="u1",
            thread_id="s1",
        )
        mem.add([{"role": "user", "content": "I go running by the lake every weekend"}], user_id="u2", thread_id="s1")
        mem.flush()
        assert "SpringBoot" in mem.search("我的后端用什么技术？", user_id="u1", k=1)[0].unit.text
        assert all("SpringBoot" not in h.unit.text for h in mem.search("What is my backend?", user_id="u2", k=5))
        assert mem.vectors.info()[2] >= 2 and mem.store.vectors.info()[2] == 0
        assert mem.profile.vectors == "chroma:mem"
        dimension = mem.vectors.info()[1]
        mem.forget(user_id="u1")
        assert mem.vectors.search(Scope(user_id="u1"), [1.0] * dimension, k=5) == []
        assert mem.vectors.search(Scope(user_id="u2"), [1.0] * dimension, k=5) != []
    with pytest.raises(ProfileMismatch, match=r"the store's vectors are in chroma:mem .*--vectors chroma://HOST:PORT\?collection=mem"):
        Memory(db)


def test_cli_add_search_and_reindex_on_the_embedded_client(tmp_path, capfd):
    from memstack.cli import main

    db, vectors = f"sqlite:///{tmp_path / 'cli.db'}", f"chroma://{tmp_path / 'chroma_db'}?collection=cli"

    def cli(*args: str) -> tuple[int, str, str]:
        capfd.readouterr()
        code = main(["--db", db, "--vectors", vectors, *args])
        return (code, *capfd.readouterr())

    assert cli("add", "--user", "user_001", "--thread", "s1", "--role", "user", "我喜欢打网球", "--wait")[0] == 0
    assert cli("add", "--user", "user_002", "--thread", "s1", "--role", "user", "I play chess on Sundays", "--wait")[0] == 0
    code, out, _ = cli("search", "--user", "user_001", "我喜欢什么运动？")
    assert code == 0 and "网球" in out and "chess" not in out
    code, out, err = cli("reindex")
    assert code == 0 and "into collection cli_g2, now searched; cli_g1 is kept" in out, err
    code, out, _ = cli("search", "--user", "user_002", "What do I play?", "--json")
    assert code == 0 and [h["text"] for h in json.loads(out)] == ["User: I play chess on Sundays"]


def test_serve_workers_refuse_the_embedded_client(tmp_path):
    """The embedded client opens its folder in one process: ``serve --workers`` needs a server."""
    serve = [sys.executable, "-m", "memstack", "--db", f"sqlite:///{tmp_path / 'm.db'}", "--vectors", f"chroma://{tmp_path / 'c'}"]
    serve += ["serve", "--workers", "2", "--model", "vllm:m@http://127.0.0.1:9/v1"]
    proc = subprocess.run(serve, env={**os.environ, "MEMSTACK_HOME": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Chroma's embedded client opens its folder in one process: use a Chroma server" in proc.stderr


def test_chroma_downloads_no_embedding_model(tmp_path):
    """Chroma's default embedding function fetches a model into ~/.cache/chroma on first use: a
    whole index's life in a process whose home is empty leaves no such folder."""
    code = (
        "import sys; from memstack.backends.chroma import ChromaVectorIndex; from memstack.testing import A; "
        "from memstack.testing.vectors import axis, unit; ix = ChromaVectorIndex(sys.argv[1]); "
        "ix.upsert([unit('u1')], [axis(0)], model='m'); assert ix.search(A, axis(0), k=1)[0].id == 'u1'; "
        "assert list(ix.fetch(A, ['u1'])) == ['u1']; s = ix.stage(); s.upsert([unit('u1')], [axis(1)], model='m'); ix.switch(s); "
        "assert ix.delete(A.user()) == 1; ix.close()"
    )
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "ANONYMIZED_TELEMETRY": "True"}  # memstack turns it off itself
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "db")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not (home / ".cache" / "chroma").exists() and "telemetry" not in done.stderr.lower()


def test_another_process_resetting_and_remaking_the_index_is_followed(shared):
    """Heads and parts are remembered by generation and nonce: a generation made again under the
    same number (another process's reset, then its first upsert) is read afresh, never stale."""
    shared.reset()
    other = ChromaVectorIndex(_client=shared._client, collection="contract")
    shared.upsert([unit("u1")], [axis(0)], model=MODEL)
    assert ids(shared.search(A, axis(0), k=5)) == ["u1"]
    other.reset()
    other.upsert([unit("u2")], [axis(1, 4)], model="another-model")
    assert shared._held().collection == "contract_g1"  # the same name, made again
    assert shared.info() == ("another-model", 4, 1) and ids(shared.search(A, axis(1, 4), k=5)) == ["u2"]
    with pytest.raises(InvalidInput, match="memstack reindex"):
        shared.upsert([unit("u3")], [axis(0)], model=MODEL)
    shared.reset()
