"""Vectors in a real Chroma server (``chroma run``): the VectorIndex contract over HTTP, the CLI and
``serve`` (one process, and ``--workers 2``) with ``--vectors chroma://...``, a reindex into a new
generation, a collection memstack did not make refused and left alone, and a dead, lost or hung
server as a clean error.

Run by ``scripts/chroma-tests.sh`` (CI: ``scripts/test.sh``), which puts pytest in a private
network namespace where only loopback exists; one server serves the whole session. Anywhere else
these tests are skipped, except under CI, where that is a failure: ``pytest -m "not
chroma_server"`` leaves them out on purpose.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from memstack.testing import VectorIndexContract
from memstack.testing.vectors import MODEL, axis, ids, unit

chromadb = pytest.importorskip("chromadb", reason="pip install 'memstack[chroma]'")

from milvus_support import Relay  # noqa: E402
from ports import free_port  # noqa: E402

from memstack.backends.chroma import ChromaVectorIndex  # noqa: E402
from memstack.errors import StoreError  # noqa: E402

pytestmark = [pytest.mark.chroma_server, pytest.mark.timeout(180)]

DEAD = "chroma://127.0.0.1:1"  # nothing listens on port 1
LISI = [
    ("user", "我叫李四，是一名软件工程师"),
    ("assistant", "你好李四！"),
    ("user", "我正在开发一个知识中台，后端使用SpringBoot"),
    ("assistant", "好的，SpringBoot很适合"),
    ("user", "On weekends I go running by the West Lake"),
    ("assistant", "Running is a good habit"),
]


@pytest.fixture(scope="session")
def server(chroma_server):
    return chroma_server


@pytest.fixture(scope="session")
def client(server):
    from chromadb.config import Settings

    made = chromadb.HttpClient(host="127.0.0.1", port=server.port, settings=Settings(anonymized_telemetry=False))
    yield made
    made.close()


def count(client, index: str, user: str) -> int:
    """The user's vectors in the index's current generation, read with Chroma's own client."""
    generation = client.get_collection(index, embedding_function=None).metadata["memstack.generation"]
    return sum(
        len(c.get(where={"user_id": user}, include=[])["ids"])
        for c in client.list_collections()
        if c.name.startswith(f"{index}_g{generation}_t")
    )


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
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# ---- the contract --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(server):
    index = ChromaVectorIndex.from_url(f"{server.url}?collection=contract")
    yield index
    index.close()


class TestChromaServerVectorIndex(VectorIndexContract):
    @pytest.fixture(autouse=True)
    def _shared(self, shared):
        self.shared = shared

    def new_index(self):
        self.shared.reset()
        return self.shared


# ---- the command line and the service ------------------------------------------------------


def test_cli_add_search_reindex_and_forget_keep_the_vectors_in_chroma(server, client, tmp_path, capfd):
    db, vectors = f"sqlite:///{tmp_path / 'cli.db'}", f"{server.url}?collection=cli"
    for thread, (role, text) in (("s1", LISI[2]), ("s2", LISI[4])):
        assert (
            cli(capfd, "--db", db, "--vectors", vectors, "add", "--user", "user_001", "--thread", thread, "--role", role, text, "--wait")[0]
            == 0
        )
    code, out, _ = cli(capfd, "--db", db, "search", "--user", "user_001", "我的后端用什么技术？", "--k", "1")
    assert code == 2  # a process that does not name the store's vectors would miss them
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MEMSTACK_VECTORS", vectors)  # the variable instead of the flag
        code, out, err = cli(capfd, "--db", db, "search", "--user", "user_001", "我的后端用什么技术？", "--k", "1")
    assert code == 0 and "SpringBoot" in out, err
    assert count(client, "cli", "user_001") == 2
    code, out, err = cli(capfd, "--db", db, "--vectors", vectors, "reindex")
    assert code == 0, err
    assert "into collection cli_g2, now searched; cli_g1 is kept" in out
    assert client.get_collection("cli", embedding_function=None).metadata["memstack.generation"] == 2
    code, out, _ = cli(capfd, "--db", db, "--vectors", vectors, "search", "--user", "user_001", "Where do I run?", "--k", "1", "--json")
    assert code == 0 and "West Lake" in json.loads(out)[0]["text"]
    assert cli(capfd, "--db", db, "--vectors", vectors, "forget", "--user", "user_001", "--yes")[0] == 0
    assert count(client, "cli", "user_001") == 0


def serve(db: str, vectors: str, port: int, tmp_path, *extra: str) -> subprocess.Popen:
    log = open(tmp_path / f"serve-{port}.log", "w")  # noqa: SIM115 (the process's, closed with it)
    command = [sys.executable, "-m", "memstack", "--db", db, "--vectors", vectors, "serve", "--port", str(port)]
    command += ["--model", "vllm:none@http://127.0.0.1:9/v1", "--log-level", "warning", *extra]
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
    """POST search until no job waits and a hit's text holds ``want`` (the worker indexes in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        r = http.post("/v1/users/user_001/search", json={"query": query, "k": 3})
        if r.status_code == 200 and r.headers.get("X-Memstack-Pending-Jobs") == "0" and any(want in h["text"] for h in r.json()):
            return r
        assert time.monotonic() < deadline, r.text
        time.sleep(0.3)


def test_serve_searches_chroma_and_a_lost_server_is_503_not_500(server, client, tmp_path):
    relay = Relay(("127.0.0.1", server.port)).start()
    db, port = f"sqlite:///{tmp_path / 'serve.db'}", free_port()
    proc = serve(db, f"chroma://127.0.0.1:{relay.port}?collection=served&timeout=3", port, tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        with httpx.Client(base_url=url, timeout=30) as http:
            r = http.post("/v1/users/user_001/threads/s1/messages", json={"messages": [{"role": r, "content": t} for r, t in LISI]})
            assert r.status_code == 201, r.text
            hit = search_until(http, "我的后端用什么技术？", "SpringBoot")
            assert hit.json()[0]["thread_id"] == "s1"
            assert count(client, "served", "user_001") >= 3
            relay.cut()  # the server is gone for the service
            lost = http.post("/v1/users/user_001/search", json={"query": "后端", "k": 3})
            assert lost.status_code == 503 and lost.json()["error"]["code"] == "store_error", lost.text
            assert "Chroma failed while" in lost.json()["error"]["message"]
            added = http.post(
                "/v1/users/user_001/threads/s2/messages", json={"messages": [{"role": "user", "content": "我养了一只叫豆豆的猫"}]}
            )
            assert added.status_code == 201  # the history is the store's: kept, indexed when Chroma is back
            relay.restore()
            search_until(http, "我的猫叫什么？", "豆豆", timeout=90)
    finally:
        proc.terminate()
        proc.wait(60)
        relay.cut()
    assert "Traceback" not in (tmp_path / f"serve-{port}.log").read_text()


def test_serve_workers_share_the_vectors_url(server, client, tmp_path):
    """``--workers 2``: the URL travels to both processes, which index into and search one index."""
    db, port = f"sqlite:///{tmp_path / 'workers.db'}", free_port()
    proc = serve(db, f"{server.url}?collection=workers", port, tmp_path, "--workers", "2")
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            for thread in ("s1", "s2", "s3", "s4"):  # spread over both processes
                r = http.post(
                    f"/v1/users/user_001/threads/{thread}/messages", json={"messages": [{"role": r, "content": t} for r, t in LISI]}
                )
                assert r.status_code == 201, r.text
            search_until(http, "我的后端用什么技术？", "SpringBoot")
        assert count(client, "workers", "user_001") >= 4
    finally:
        proc.terminate()
        proc.wait(60)


def test_a_collection_memstack_did_not_make_is_refused_and_left_alone(server, client, tmp_path, capfd):
    articles = client.create_collection("conversation_memory", metadata={"hnsw:space": "cosine"}, embedding_function=None)
    articles.add(
        ids=["1", "2"],
        embeddings=[[0.1, 0.2], [0.2, 0.1]],
        metadatas=[{"user_id": "user_001"}] * 2,
        documents=["我喜欢吃火锅", "我平时喜欢跑步"],
    )
    try:
        db = f"sqlite:///{tmp_path / 'm.db'}"
        foreign = ("--db", db, "--vectors", f"{server.url}?collection=conversation_memory")
        failed = memstack_cli(*foreign, "search", "--user", "u1", "运动", check=False)  # a real process: its stderr whole
        refusals = [(failed.returncode, failed.stderr)] + [
            cli(capfd, *foreign, *command)[::2] for command in (["reindex"], ["init", "--strategy", "window,retrieval"])
        ]
        for code, stderr in refusals:
            assert code == 2, stderr
            assert one_clean_line(stderr).startswith("memstack: error: Chroma collection 'conversation_memory' was not created by memstack")
        assert client.get_collection("conversation_memory", embedding_function=None).count() == 2
        assert not [c.name for c in client.list_collections() if c.name.startswith("conversation_memory_")]
    finally:
        client.delete_collection("conversation_memory")


def test_a_dead_or_hung_server_is_a_clean_error(server, tmp_path):
    with pytest.raises(StoreError, match=r"Chroma failed while connecting to Chroma at http://127.0.0.1:1"):
        ChromaVectorIndex.from_url(DEAD)
    with socket.socket() as hung:  # accepts connections (the kernel does) and never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        started = time.monotonic()
        with pytest.raises(StoreError, match="Chroma failed while connecting"):
            ChromaVectorIndex.from_url(f"chroma://127.0.0.1:{hung.getsockname()[1]}?timeout=1")
        assert time.monotonic() - started < 10
    bounded = ChromaVectorIndex.from_url(f"{server.url}?timeout=2")  # every later request is bounded too
    assert bounded._client._server._session.timeout == httpx.Timeout(2.0)
    bounded.close()
    failed = memstack_cli(
        "--db", f"sqlite:///{tmp_path / 'dead.db'}", "--vectors", DEAD, "search", "--user", "u1", "后端", check=False, timeout=60
    )
    assert failed.returncode == 1, failed.stderr
    assert one_clean_line(failed.stderr).startswith("memstack: failed: Chroma failed while connecting to Chroma at http://127.0.0.1:1")


def test_two_clients_see_one_index_and_a_switch_at_once(server):
    one = ChromaVectorIndex.from_url(f"{server.url}?collection=both")
    two = ChromaVectorIndex.from_url(f"{server.url}?collection=both")
    try:
        one.upsert([unit("u1")], [axis(0)], model=MODEL)
        assert two.info() == (MODEL, 8, 1)
        staged = one.stage()
        staged.upsert([unit("u2")], [axis(1)], model=MODEL)
        one.switch(staged)
        assert ids(two.search(unit("x").scope, axis(1), k=5)) == ["u2"]  # the other process follows the pointer
    finally:
        one.reset()
        one.close()
        two.close()
