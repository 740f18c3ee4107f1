"""Several processes on one store: ``memstack serve`` (separate processes and ``--workers N``) and
``memstack worker`` processes sharing one PostgreSQL (or one SQLite file), as docs/scaling.md
describes. The write queue's leases (no job runs twice at once; a killed worker's job reruns
elsewhere after its lease), the store-level de-duplication of the proxy and of Idempotency-Key,
and an audit after concurrent clients and a SIGKILL: every acknowledged message stored once,
every thread as its client saw it, every job done exactly once.

Runs are observed from outside the store: the ``runlog`` layer (tests/run_probe.py) appends
every run's start, messages and end to a file, from every process.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import run_probe

from memstack import Memory

HERE = Path(__file__).parent


@pytest.fixture
def run_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.jsonl"
    path.touch()
    monkeypatch.setenv(run_probe.ENV, str(path))
    return path


# ---- leases, in one process -------------------------------------------------------------------


def test_a_job_slower_than_its_lease_keeps_it_and_runs_once(tmp_path, run_log):
    """The heartbeat: a job of 1.5 s on a lease of 0.6 s stays its worker's; a second worker
    polling all the while gets nothing, and the job runs once (without the renewal the second
    worker took it after 0.6 s and both ran it at once)."""
    db = tmp_path / "lease.db"
    options = {"runlog.delay": 0.1}
    with Memory(db, layers=["runlog"], options=options) as m:
        m.add([f"第{i}条" for i in range(15)], user_id="u", thread_id="t")
    first = Memory(db, options=options, lease_seconds=0.6)
    second = Memory(db, options=options, lease_seconds=0.6)
    try:
        runner = threading.Thread(target=first.run_jobs, kwargs={"max_jobs": 1})
        runner.start()
        while not run_probe.read_runs(run_log):
            time.sleep(0.01)
        stolen = 0
        while runner.is_alive():
            stolen += second.run_jobs(max_jobs=1).ran
            time.sleep(0.05)
        runner.join()
        runs = run_probe.read_runs(run_log)
        assert stolen == 0 and len(runs) == 1 and runs[0].ended and len(runs[0].done) == 15
        assert first.pending() == 0
    finally:
        first.close()
        second.close()


# ---- de-duplication through the store, across servers ------------------------------------------


def test_concurrent_retries_of_one_idempotency_key_on_two_servers_store_once(tmp_path):
    """Eight copies of one keyed REST add at once, half on each of two servers over one SQLite
    file: the messages are stored once and every copy answers the same ids (the key's messages
    get ids derived from it, so the store's append skips what a concurrent copy stored; kept
    in process memory or checked before writing, each copy stored its own)."""
    httpx = pytest.importorskip("httpx")
    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer

    db = f"sqlite:///{tmp_path / 'shared.db'}"
    apps = [create_app(config=ServerConfig(db=db, strategy="window", model="vllm:none@http://127.0.0.1:9/v1", worker=False)) for _ in range(2)]
    texts = [f"第{i}条：我叫李四" for i in range(300)]  # a long add: a wide window between the check and the write
    body = {"messages": [{"role": "user", "content": text} for text in texts]}
    with BackgroundServer(apps[0]) as one, BackgroundServer(apps[1]) as two:
        for attempt in range(3):
            key = f"retry-{attempt}"
            start = threading.Barrier(8)
            answers: list[httpx.Response] = []

            def send(url: str) -> None:
                with httpx.Client(base_url=url, timeout=30) as http:
                    start.wait()
                    answers.append(http.post(f"/v1/users/u/threads/t{attempt}/messages", json=body, headers={"Idempotency-Key": key}))

            threads = [threading.Thread(target=send, args=(url,)) for url in [one.url, two.url] * 4]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert [a.status_code for a in answers] == [201] * 8
            stored = httpx.get(f"{one.url}/v1/users/u/threads/t{attempt}/messages").json()
            assert [m["content"] for m in stored] == texts
            assert all([m["id"] for m in a.json()["stored"]] == [m["id"] for m in stored] for a in answers)


# ---- serve --workers: what travels to the worker processes -------------------------------------


def test_serve_workers_refuses_a_store_that_lives_in_one_process(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "MEMSTACK_HOME": str(tmp_path)}
    for db, url in (("memory://", "memory://"), (":memory:", "sqlite:///:memory:")):
        proc = subprocess.run([sys.executable, "-m", "memstack", "serve", "--db", db, "--workers", "2", "--model", "vllm:m@http://127.0.0.1:9/v1"], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and f"--workers needs a store that processes share, and {url} lives in one process's memory" in proc.stderr


def test_the_service_config_travels_to_worker_processes_whole():
    pytest.importorskip("fastapi")
    from memstack.errors import UsageError
    from memstack.testing.models import ScriptedModel
    from memstack.server import ServerConfig
    from memstack.server.workers import from_env, to_env

    config = ServerConfig(db="postgresql://u@db/memstack", strategy="window,retrieval", model="vllm:q@http://h:8000/v1", api_keys={"k1": "t1"}, max_tokens=None, answer_max_tokens=64, worker=False, lease_seconds=30.0, public_metrics=True)
    assert from_env(to_env(config)) == config
    with pytest.raises(UsageError, match="model is ScriptedModel"):
        to_env(ServerConfig(db="sqlite:///m.db", model=ScriptedModel(default="好的")))
