"""Vectors in a real Milvus standalone server: the VectorIndex contract, the CLI and ``serve`` with
``--vectors milvus://...``, collections memstack did not make refused and left alone, a reindex
that fills a new collection and switches to it, and a dead server as a clean error.

Run by ``scripts/milvus-tests.sh`` (CI: ``scripts/test.sh``), which puts pytest in a private
network namespace where only loopback exists (the server listens on every interface); one server
serves the whole session. Anywhere else these tests are skipped, except under CI, where that is a
failure: ``pytest -m "not milvus_server"`` leaves them out on purpose.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from memstack.testing import A, VectorIndexContract
from memstack.testing.vectors import MODEL, axis, ids, unit
from memstack.types import SearchFilter

pymilvus = pytest.importorskip("pymilvus", reason="pip install 'memstack[milvus]'")

from milvus_support import Relay  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.backends.milvus import MilvusVectorIndex  # noqa: E402
from memstack.errors import ForeignCollection, InvalidInput, StoreError  # noqa: E402

pytestmark = [pytest.mark.milvus_server, pytest.mark.timeout(300)]

DEAD = "milvus://127.0.0.1:1"  # nothing listens on port 1
LISI = [
    ("user", "我叫李四，是一名软件工程师"),
    ("assistant", "你好李四！"),
    ("user", "我正在开发一个知识中台，后端使用SpringBoot"),
    ("assistant", "好的，SpringBoot很适合"),
    ("user", "周末我喜欢去西湖边跑步"),
    ("assistant", "跑步是个好习惯"),
]


@pytest.fixture(scope="session")
def server(milvus_server):
    return milvus_server


@pytest.fixture(scope="session")
def client(server):
    made = pymilvus.MilvusClient(uri="http://127.0.0.1:19530", token=server.token)
    yield made
    made.close()


def memstack_cli(*args, env=None, check=True, timeout=180):
    proc = subprocess.run(
        [sys.executable, "-m", "memstack", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"memstack {' '.join(args)}: exit {proc.returncode}\n{proc.stderr}")
    return proc


def cli(capfd, *args) -> tuple[int, str, str]:
    """The command in this process (no start-up, the embedder loaded once): exit code, stdout, stderr."""
    from memstack.cli import main

    capfd.readouterr()
    code = main(list(args))
    out, err = capfd.readouterr()
    return code, out, err


def one_clean_line(stderr: str) -> str:
    """The CLI's failure: one line, no traceback, no pymilvus log."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# ---- the contract --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(server):
    index = MilvusVectorIndex.from_url(f"{server.url}?collection=contract")
    yield index
    index.reset()
    index.close()


class TestMilvusServerVectorIndex(VectorIndexContract):
    @pytest.fixture(autouse=True)
    def _shared(self, shared):
        self.shared = shared

    def new_index(self):
        self.shared.reset()
        return self.shared


def test_no_category_and_an_empty_one_are_apart(shared):
    shared.reset()
    shared.upsert(
        [unit("none", category=None), unit("empty", category=""), unit("work", category="work")], [axis(0), axis(1), axis(2)], model=MODEL
    )
    assert ids(shared.search(A, axis(0), k=5, where=SearchFilter(categories=("",)))) == ["empty"]
    assert ids(shared.search(A, axis(0), k=5, where=SearchFilter(categories=("work", "")))) == ["empty", "work"]
    assert len(shared.search(A, axis(0), k=5)) == 3


def test_another_model_is_refused_with_reindex_advice_and_nothing_dropped(server, client):
    index = MilvusVectorIndex.from_url(f"{server.url}?collection=advice")
    try:
        index.upsert([unit("u1")], [axis(0)], model=MODEL)
        for call in (
            lambda: index.upsert([unit("u2")], [axis(0, 4)], model=MODEL),
            lambda: index.upsert([unit("u2")], [axis(0)], model="other"),
            lambda: index.search(A, axis(0, 4), k=1),
        ):
            with pytest.raises(InvalidInput) as caught:
                call()
            assert (
                "memstack reindex" in str(caught.value)
                and "new Milvus collection" in str(caught.value)
                and "nothing is dropped" in str(caught.value)
            )
        assert index.info() == (MODEL, 8, 1)
        assert client.describe_collection("advice")["collection_name"] == "advice_g1"
    finally:
        index.reset()
        index.close()


# ---- collections memstack did not make -----------------------------------------------------


def articles_collection(client, name: str) -> None:
    """The articles' ``conversation`` collection, made by hand: auto ids, text, 768 dimensions."""
    schema = pymilvus.MilvusClient.create_schema(auto_id=True, enable_dynamic_field=False)
    schema.add_field("pk", pymilvus.DataType.INT64, is_primary=True)
    schema.add_field("user_id", pymilvus.DataType.VARCHAR, max_length=64)
    schema.add_field("content", pymilvus.DataType.VARCHAR, max_length=2048)
    schema.add_field("embedding", pymilvus.DataType.FLOAT_VECTOR, dim=768)
    index = client.prepare_index_params()
    index.add_index(field_name="embedding", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    rng = np.random.default_rng(7)
    client.insert(name, [{"user_id": "u1", "content": f"第{i}条", "embedding": rng.standard_normal(768).tolist()} for i in range(3)])


def test_a_collection_memstack_did_not_make_is_refused_and_left_alone(server, client, tmp_path, capfd):
    articles_collection(client, "conversation")
    client.create_alias("conversation", "borrowed")
    try:
        with pytest.raises(ForeignCollection, match="'conversation' was not created by memstack"):
            MilvusVectorIndex.from_url(f"{server.url}?collection=conversation")
        with pytest.raises(ForeignCollection, match="'conversation' was not created by memstack.*drop the alias 'borrowed'"):
            MilvusVectorIndex.from_url(f"{server.url}?collection=borrowed")
        db = f"sqlite:///{tmp_path / 'm.db'}"
        foreign = ("--db", db, "--vectors", f"{server.url}?collection=conversation")
        failed = memstack_cli(*foreign, "search", "--user", "u1", "后端", check=False)  # a real process: its stderr whole
        refusals = [(failed.returncode, failed.stderr)] + [
            cli(capfd, *foreign, *command)[::2] for command in (["reindex"], ["init", "--strategy", "window,retrieval"])
        ]
        for code, stderr in refusals:
            assert code == 2, stderr
            line = one_clean_line(stderr)
            assert line.startswith("memstack: error: Milvus collection 'conversation' was not created by memstack"), line
        # the reader's collection is as it was: its schema, its rows, no collection of memstack's beside it
        described = client.describe_collection("conversation")
        assert [f["name"] for f in described["fields"]] == ["pk", "user_id", "content", "embedding"] and described["properties"] == {}
        assert client.query("conversation", filter="", output_fields=["count(*)"])[0]["count(*)"] == 3
        assert not [n for n in client.list_collections() if n.startswith(("conversation_", "borrowed_"))]
    finally:
        client.drop_alias("borrowed")
        client.drop_collection("conversation")


# ---- the command line and the service ------------------------------------------------------


def test_cli_add_and_search_keep_the_vectors_in_milvus(server, client, tmp_path, capfd):
    db, vectors = f"sqlite:///{tmp_path / 'cli.db'}", f"{server.url}?collection=cli"
    for i, (role, text) in enumerate(LISI[2:4]):
        memstack_cli(
            "--db",
            db,
            "--vectors",
            vectors,
            "add",
            "--user",
            "user_001",
            "--thread",
            "s1",
            "--role",
            role,
            "--at",
            f"2026-11-02T20:0{i}:00+08:00",
            text,
        )
    memstack_cli(
        "--db", db, "--vectors", vectors, "add", "--user", "user_001", "--thread", "s2", "--role", "user", LISI[4][1], "--wait"
    )  # --wait: indexed now
    found = memstack_cli(
        "--db", db, "search", "--user", "user_001", "我的后端用什么技术？", "--k", "1", env={"MEMSTACK_VECTORS": vectors}
    )  # the variable instead of the flag
    assert "SpringBoot" in found.stdout
    assert client.describe_collection("cli")["collection_name"] == "cli_g1"
    assert client.query("cli", filter='user_id == "user_001"', output_fields=["count(*)"])[0]["count(*)"] >= 2
    with Memory(db, vectors=vectors) as mem:
        assert mem.store.vectors.info()[2] == 0  # none in the store's own index
        assert mem.profile.vectors == "milvus:cli" and "vectors milvus:cli" in mem.profile.describe()
    # a process that does not name the store's vectors would miss them: refused, naming the flag
    code, _, err = cli(capfd, "--db", db, "search", "--user", "user_001", "后端")
    assert code == 2
    assert "the store's vectors are in milvus:cli" in one_clean_line(err) and "--vectors milvus://HOST:PORT?collection=cli" in err
    # forget takes the user's vectors out of Milvus too
    assert cli(capfd, "--db", db, "--vectors", vectors, "forget", "--user", "user_001", "--yes")[0] == 0
    assert client.query("cli", filter='user_id == "user_001"', output_fields=["count(*)"])[0]["count(*)"] == 0


def serve(db: str, vectors: str, port: int, tmp_path, *extra: str) -> subprocess.Popen:
    log = open(tmp_path / f"serve-{port}.log", "w")  # noqa: SIM115 (the process's, closed with it)
    command = [
        sys.executable,
        "-m",
        "memstack",
        "--db",
        db,
        "--vectors",
        vectors,
        "serve",
        "--port",
        str(port),
        "--model",
        "vllm:none@http://127.0.0.1:9/v1",
        "--log-level",
        "warning",
        *extra,
    ]
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"memstack serve exited with {proc.returncode}"
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("memstack serve did not become healthy")


def search_until(http: httpx.Client, query: str, want: str, timeout: float = 60) -> httpx.Response:
    """POST search until no job waits and a hit's text holds ``want`` (the server's worker indexes
    in the background: a unit is stored, and found by BM25, a moment before its vectors)."""
    deadline = time.monotonic() + timeout
    while True:
        r = http.post("/v1/users/user_001/search", json={"query": query, "k": 3})
        if r.status_code == 200 and r.headers.get("X-Memstack-Pending-Jobs") == "0" and any(want in h["text"] for h in r.json()):
            return r
        assert time.monotonic() < deadline, r.text
        time.sleep(0.3)


def test_serve_searches_milvus_and_a_lost_server_is_503_not_500(server, client, tmp_path):
    relay = Relay(("127.0.0.1", 19530)).start()
    db, port = f"sqlite:///{tmp_path / 'serve.db'}", 18080
    proc = serve(db, f"{relay.url(server.token)}?collection=served&timeout=3", port, tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        with httpx.Client(base_url=url, timeout=30) as http:
            r = http.post("/v1/users/user_001/threads/s1/messages", json={"messages": [{"role": r, "content": t} for r, t in LISI]})
            assert r.status_code == 201, r.text
            hit = search_until(http, "我的后端用什么技术？", "SpringBoot")
            assert hit.json()[0]["thread_id"] == "s1"
            assert client.query("served", filter='user_id == "user_001"', output_fields=["count(*)"])[0]["count(*)"] >= 3
            relay.cut()  # the server is gone for the service
            lost = http.post("/v1/users/user_001/search", json={"query": "后端", "k": 3})
            assert lost.status_code == 503 and lost.json()["error"]["code"] == "store_error", lost.text
            assert "Milvus failed while" in lost.json()["error"]["message"]
            added = http.post(
                "/v1/users/user_001/threads/s2/messages", json={"messages": [{"role": "user", "content": "我养了一只叫豆豆的猫"}]}
            )
            assert added.status_code == 201  # the history is the store's: kept, indexed when Milvus is back
            relay.restore()
            search_until(http, "我的猫叫什么？", "豆豆", timeout=90)
    finally:
        proc.terminate()
        proc.wait(60)
        relay.cut()
    assert "Traceback" not in (tmp_path / f"serve-{port}.log").read_text()


def test_serve_workers_share_the_vectors_url(server, client, tmp_path):
    """``--workers 2``: the URL travels to both processes, which index into and search one collection."""
    db, port = f"sqlite:///{tmp_path / 'workers.db'}", 18082
    proc = serve(db, f"{server.url}?collection=workers", port, tmp_path, "--workers", "2")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        with httpx.Client(base_url=url, timeout=30) as http:
            for thread in ("s1", "s2", "s3", "s4"):  # spread over both processes
                assert (
                    http.post(
                        f"/v1/users/user_001/threads/{thread}/messages", json={"messages": [{"role": r, "content": t} for r, t in LISI]}
                    ).status_code
                    == 201
                )
            search_until(http, "我的后端用什么技术？", "SpringBoot")
        assert client.query("workers", filter='user_id == "user_001"', output_fields=["count(*)"])[0]["count(*)"] >= 4
        with Memory(db, vectors=f"{server.url}?collection=workers") as mem:
            assert mem.store.vectors.info()[2] == 0
    finally:
        proc.terminate()
        proc.wait(60)


def test_a_dead_server_or_a_wrong_password_is_a_clean_error(server, tmp_path):
    with pytest.raises(StoreError, match=r"Milvus failed while connecting to Milvus at http://127.0.0.1:1"):
        MilvusVectorIndex.from_url(DEAD)
    with pytest.raises(StoreError, match=r"Milvus failed while connecting to Milvus at http://127.0.0.1:19530") as caught:
        MilvusVectorIndex.from_url("milvus://root:wrong@127.0.0.1:19530")
    assert "wrong" not in str(caught.value)  # the password is never in a message
    db = f"sqlite:///{tmp_path / 'dead.db'}"
    for command in (["search", "--user", "u1", "后端"], ["serve", "--port", "18081", "--model", "vllm:none@http://127.0.0.1:9/v1"]):
        failed = memstack_cli("--db", db, "--vectors", DEAD, *command, check=False, timeout=60)
        assert failed.returncode == 1, failed.stderr
        assert one_clean_line(failed.stderr).startswith("memstack: failed: Milvus failed while connecting to Milvus at http://127.0.0.1:1")


# ---- reindex: a new collection, switched to ------------------------------------------------


def test_reindex_fills_a_new_collection_and_switches_to_it(server, client, tmp_path, capfd):
    from memstack.layers.retrieval import Retrieval

    db, vectors = f"sqlite:///{tmp_path / 'reindex.db'}", f"{server.url}?collection=reidx"
    with Memory(db, vectors=vectors) as mem:
        for thread in ("s1", "s2", "s3"):
            mem.add([{"role": r, "content": t} for r, t in LISI], user_id="user_001", thread_id=thread)
        mem.flush()
        assert "SpringBoot" in mem.search("我的后端用什么技术？", user_id="user_001", k=1)[0].unit.text
        layer = Retrieval(store=mem.store, vectors=mem.vectors)
        during: list[str] = []

        def meanwhile(done: int) -> None:
            # searches read the old collection while the new one fills, and a message stored now
            # (indexed into the old one) reaches the new one after the switch
            if not during:
                during.append(mem.search("我的后端用什么技术？", user_id="user_001", k=1)[0].unit.text)
                mem.add({"role": "user", "content": "我最近在学习弹钢琴"}, user_id="user_001", thread_id="s4")
                mem.flush()

        n = layer.reindex(batch=4, progress=meanwhile)
        assert during and "SpringBoot" in during[0]
        assert layer.switched is not None and (layer.switched.serving, layer.switched.previous, layer.switched.dropped) == (
            "reidx_g2",
            "reidx_g1",
            (),
        )
        assert n >= 4 and client.describe_collection("reidx")["collection_name"] == "reidx_g2"
        assert "SpringBoot" in mem.search("我的后端用什么技术？", user_id="user_001", k=1)[0].unit.text
        assert "钢琴" in mem.search("我在学什么乐器？", user_id="user_001", k=1)[0].unit.text
        assert str(client.get_load_state("reidx_g1")["state"]).endswith("NotLoad")  # kept, released
    code, out, err = cli(capfd, "--db", db, "--vectors", vectors, "reindex")
    assert code == 0, err
    assert "into collection reidx_g3, now searched; reidx_g2 is kept" in out and "dropped older generations reidx_g1" in out
    assert sorted(n for n in client.list_collections() if n.startswith("reidx")) == ["reidx_g2", "reidx_g3"]
    code, out, _ = cli(
        capfd, "--db", db, "--vectors", vectors, "search", "--user", "user_001", "我的后端用什么技术？", "--k", "1", "--json"
    )
    assert code == 0 and "SpringBoot" in json.loads(out)[0]["text"]


def test_init_reconfigure_moves_the_vectors_of_a_store_into_milvus(server, client, tmp_path, capfd):
    db = f"sqlite:///{tmp_path / 'move.db'}"
    with Memory(db) as mem:  # vectors in the store's own index
        mem.add([{"role": r, "content": t} for r, t in LISI], user_id="user_001", thread_id="s1")
        mem.flush()
        held = mem.store.vectors.info()[2]
    moved = ("--db", db, "--vectors", f"{server.url}?collection=moved")
    code, _, err = cli(capfd, *moved, "search", "--user", "user_001", "后端")
    assert code == 2 and "memstack --vectors URL init --reconfigure" in one_clean_line(err)
    assert cli(capfd, *moved, "init", "--reconfigure")[0] == 0
    assert client.query("moved", filter="", output_fields=["count(*)"])[0]["count(*)"] == held
    code, out, _ = cli(capfd, *moved, "search", "--user", "user_001", "我的后端用什么技术？", "--k", "1")
    assert code == 0 and "SpringBoot" in out
