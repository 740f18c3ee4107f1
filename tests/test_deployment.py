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

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import run_probe
from openai_stub import CannedOpenAI
from ports import free_port

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
    apps = [
        create_app(config=ServerConfig(db=db, strategy="window", model="vllm:none@http://127.0.0.1:9/v1", worker=False)) for _ in range(2)
    ]
    texts = [f"第{i}条：我叫李四" for i in range(300)]  # a long add: a wide window between the check and the write
    body = {"messages": [{"role": "user", "content": text} for text in texts]}
    with BackgroundServer(apps[0]) as one, BackgroundServer(apps[1]) as two:
        for attempt in range(3):
            key = f"retry-{attempt}"
            start = threading.Barrier(8)
            answers: list[httpx.Response] = []

            def send(url: str, start: threading.Barrier, answers: list, path: str, key: str) -> None:
                with httpx.Client(base_url=url, timeout=30) as http:
                    start.wait()
                    answers.append(http.post(path, json=body, headers={"Idempotency-Key": key}))

            path = f"/v1/users/u/threads/t{attempt}/messages"
            threads = [threading.Thread(target=send, args=(url, start, answers, path, key)) for url in [one.url, two.url] * 4]
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
    serve = [sys.executable, "-m", "memstack", "serve", "--workers", "2", "--model", "vllm:m@http://127.0.0.1:9/v1"]
    for db, url in (("memory://", "memory://"), (":memory:", "sqlite:///:memory:")):
        proc = subprocess.run([*serve, "--db", db], env=env, capture_output=True, text=True, timeout=60)
        assert (
            proc.returncode == 2 and f"--workers needs a store that processes share, and {url} lives in one process's memory" in proc.stderr
        )
    db = f"sqlite:///{tmp_path / 'm.db'}"
    proc = subprocess.run(
        [*serve, "--db", db, "--vectors", f"milvus://{tmp_path / 'v.db'}"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "a milvus-lite file is opened by one process" in proc.stderr
    Memory(db, layers="window").close()  # the store's profile: window
    proc = subprocess.run([*serve, "--db", db, "--strategy", "window,summary"], env=env, capture_output=True, text=True, timeout=60)
    assert (
        proc.returncode == 2
        and proc.stderr.startswith("memstack: error: the store is configured for window")
        and len(proc.stderr.splitlines()) == 1
    )  # checked once, before the workers start


def test_the_service_config_travels_to_worker_processes_whole():
    pytest.importorskip("fastapi")
    from memstack.errors import UsageError
    from memstack.server import ServerConfig
    from memstack.server.workers import from_env, to_env
    from memstack.testing.models import ScriptedModel

    config = ServerConfig(
        db="postgresql://u@db/memstack",
        strategy="window,retrieval",
        model="vllm:q@http://h:8000/v1",
        api_keys={"k1": "t1"},
        max_tokens=None,
        answer_max_tokens=64,
        worker=False,
        lease_seconds=30.0,
        public_metrics=True,
    )
    assert from_env(to_env(config)) == config
    with pytest.raises(UsageError, match="model is ScriptedModel"):
        to_env(ServerConfig(db="sqlite:///m.db", model=ScriptedModel(default="好的")))


# ---- the deployment: API processes and workers on one store, under load and SIGKILL -----------

#: seconds per message of the runlog layer, and in the slow worker (its jobs outlast its lease)
DELAY, SLOW, LEASE = 0.02, 0.4, 2.0


@dataclass(frozen=True)
class Topology:
    #: extra arguments of each `memstack serve` process
    servers: tuple[tuple[str, ...], ...]
    clients: int
    seconds: float


#: PostgreSQL: two separate API processes (one without a write-queue worker) and one with two
#: worker processes on one port; SQLite (WAL, one host): one API process with two workers
TOPOLOGIES = {
    "postgresql": Topology(servers=((), ("--no-worker",), ("--workers", "2")), clients=6, seconds=10),
    "sqlite": Topology(servers=(("--workers", "2"),), clients=4, seconds=6),
}


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh database on the test server (the CLI's processes use its public schema)."""
    from pgsupport import require_dsn

    psycopg = pytest.importorskip("psycopg")
    dsn = require_dsn("deployment")
    name = f"memstack_deploy_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Fleet:
    """The processes of one deployment, each `tests/run_probe.py` (the memstack command with the
    runlog layer) in its own process group, logging to a file; stopped and reaped at the end."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp_path, self.env = tmp_path, env
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.tmp_path / f"{name}.log", "wb")  # noqa: SIM115  (closed with the process)
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "run_probe.py"), *args],
            env={**self.env, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")[-3000:]

    def wait_healthy(self, name: str, url: str, timeout: float = 90) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.procs[name].poll() is None, f"{name} exited with {self.procs[name].returncode}:\n{self.log(name)}"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{name} did not become healthy:\n{self.log(name)}")

    def stop(self, name: str, timeout: float = 45) -> int:
        proc = self.procs[name]
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout)

    def close(self) -> None:
        for proc in self.procs.values():  # the whole group: a supervisor's workers too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def spawned_workers(pid: int) -> list[int]:
    """The uvicorn worker processes under a `serve --workers N` process."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


@dataclass
class Client:
    """One app's user: a thread of REST adds and a thread of proxied chat, each kept as the
    client saw it; requests go to a random API process."""

    n: int
    urls: list[str]
    rest: list[str] = field(default_factory=list)
    chat: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    calls: Counter = field(default_factory=Counter)

    @property
    def user(self) -> str:
        return f"c{self.n}"

    def run(self, until: float) -> None:
        import httpx

        rng = random.Random(self.n)
        with httpx.Client(timeout=60) as http:
            i = 0
            while time.monotonic() < until:
                try:
                    [self.add, self.ask, self.context][i % 3](http, rng, i)
                except (AssertionError, httpx.HTTPError) as exc:
                    self.errors.append(f"{self.user} step {i}: {type(exc).__name__}: {exc}")
                i += 1

    def add(self, http, rng: random.Random, i: int) -> None:
        texts = [f"{self.user} 第{i}次 第{j}条" for j in range(3)]
        body = {"messages": [{"role": ("user", "assistant")[j % 2], "content": t} for j, t in enumerate(texts)]}
        path = f"/v1/users/{self.user}/threads/rest/messages"
        if i % 4:
            r = http.post(rng.choice(self.urls) + path, json=body)
            assert r.status_code == 201, r.text
        else:  # a retry with the same key, on another process: stored once, the same answer
            key = {"Idempotency-Key": f"{self.user}-{i}"}
            first, second = rng.sample(self.urls, 2) if len(self.urls) > 1 else self.urls * 2
            r = http.post(first + path, json=body, headers=key)
            again = http.post(second + path, json=body, headers=key)
            assert r.status_code == again.status_code == 201 and again.headers.get("Idempotent-Replayed") == "true", again.text
            assert again.json() == r.json()
            self.calls["retried"] += 1
        assert [m["content"] for m in r.json()["stored"]] == texts
        self.rest += texts
        self.calls["add"] += 1

    def ask(self, http, rng: random.Random, i: int) -> None:
        question = f"{self.user} 问题{i}：我刚才说了什么？"
        messages = [{"role": role, "content": text} for role, text in self.chat] + [{"role": "user", "content": question}]
        body = {"model": "any", "user": self.user, "messages": messages, "stream": i % 2 == 1}
        r = http.post(rng.choice(self.urls) + "/v1/chat/completions", json=body, headers={"X-Memstack-Thread": "chat"})
        assert r.status_code == 200, r.text
        answer = streamed_text(r.text) if body["stream"] else r.json()["choices"][0]["message"]["content"]
        assert answer == "答：" + question
        self.chat += [("user", question), ("assistant", answer)]
        self.calls["ask"] += 1

    def context(self, http, rng: random.Random, i: int) -> None:
        r = http.post(rng.choice(self.urls) + f"/v1/users/{self.user}/threads/rest/context", json={"query": "我说过什么？"})
        assert r.status_code == 200, r.text
        self.calls["context"] += 1


def streamed_text(body: str) -> str:
    events = [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]", body[-300:]
    return "".join(c["delta"].get("content") or "" for e in events[:-1] for c in json.loads(e)["choices"])


def last_question(body: dict) -> str:
    return "答：" + next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("backend", [pytest.param("postgresql", marks=pytest.mark.postgres), "sqlite"])
def test_api_processes_and_workers_on_one_store_under_load_and_a_sigkill(backend, request, tmp_path, run_log):
    """The deployment of docs/scaling.md. A slow worker (its jobs outlast its lease: it renews it)
    takes a long job first; then API processes start (separate ones, and one with two worker
    processes on one port) with a second worker; concurrent clients add over REST (some retried
    with an Idempotency-Key on another process), chat through the proxy resending their whole
    history (each call to a random process), and read contexts; the slow worker is SIGKILLed
    mid-job. Afterwards: every acknowledged message stored once and every thread as its client
    saw it; every job run by one worker at a time, each message processed by exactly one
    finished run, and the killed worker's job finished by another process after it died; every
    process stops on SIGTERM with status 0."""
    topology = TOPOLOGIES[backend]
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'shared.db'}"
    Memory.configure(url, layers="window,runlog", options={"runlog.delay": DELAY})
    with Memory(url) as seed:  # the long job the slow worker takes first
        seed.add([f"早先的第{i}条" for i in range(12)], user_id="seed", thread_id="long")
    env = {**os.environ, "MEMSTACK_HOME": str(tmp_path / "home"), run_probe.ENV: str(run_log)}
    fleet = Fleet(tmp_path, env)
    try:
        with CannedOpenAI(last_question) as upstream:
            slow = fleet.start(
                "slow-worker", "worker", "--db", url, "--lease", str(LEASE), "--poll", "0.2", env={run_probe.SLOW_ENV: str(SLOW)}
            )
            wait_for(
                lambda: any(r.pid == slow.pid for r in run_probe.read_runs(run_log)),
                60,
                f"the slow worker took no job:\n{fleet.log('slow-worker')}",
            )
            # its first job outlasts its lease and must end as its own (the lease renewed) before
            # the load starts: SIGKILLed during that one, nothing would show the renewal at work
            wait_for(
                lambda: any(r.pid == slow.pid and r.ended for r in run_probe.read_runs(run_log)),
                120,
                f"the slow worker did not finish its long job:\n{fleet.log('slow-worker')}",
            )
            fleet.start("worker", "worker", "--db", url, "--lease", str(LEASE), "--poll", "0.2")
            urls = []
            for k, extra in enumerate(topology.servers):
                port = free_port()
                fleet.start(
                    f"serve{k}", "serve", "--db", url, "--port", str(port), "--model", upstream.model, "--log-level", "warning", *extra
                )
                urls.append(f"http://127.0.0.1:{port}")
            for k, u in enumerate(urls):
                fleet.wait_healthy(f"serve{k}", u)
            supervisor = next(fleet.procs[f"serve{k}"] for k, extra in enumerate(topology.servers) if "--workers" in extra)
            wait_for(lambda: len(spawned_workers(supervisor.pid)) == 2, 30, "serve --workers 2 runs two worker processes")

            clients = [Client(n, urls) for n in range(topology.clients)]
            until = time.monotonic() + topology.seconds
            threads = [threading.Thread(target=c.run, args=(until,)) for c in clients]
            for t in threads:
                t.start()
            killed_at = kill_mid_job(slow, run_log, until)
            for t in threads:
                t.join()
            assert [e for c in clients for e in c.errors] == []
            assert all(c.calls["add"] and c.calls["ask"] and c.calls["context"] for c in clients)

            with Memory(url) as audit:
                wait_for(lambda: audit.pending() == 0, 60, "the write queue did not drain")
                for c in clients:
                    assert [m.text for m in audit.history(user_id=c.user, thread_id="rest")] == c.rest
                    assert [(m.role, m.text) for m in audit.history(user_id=c.user, thread_id="chat")] == c.chat
                stored = {
                    m.id
                    for u in ["seed", *(c.user for c in clients)]
                    for t in audit.threads(user_id=u)
                    for m in audit.history(user_id=u, thread_id=t.thread_id)
                }
            check_runs(run_probe.read_runs(run_log), stored, slow.pid, killed_at)
            children = spawned_workers(supervisor.pid)
            for name in fleet.procs:  # a worker finishes its job and exits 0; uvicorn re-raises the SIGTERM it handled
                if name != "slow-worker":
                    assert fleet.stop(name) in ((0,) if name == "worker" else (0, -signal.SIGTERM)), (
                        f"{name} did not stop cleanly:\n{fleet.log(name)}"
                    )
            assert not [c for c in children if Path(f"/proc/{c}").exists()]  # the supervisor's workers stopped with it
    finally:
        fleet.close()


def kill_mid_job(slow: subprocess.Popen, run_log: Path, until: float) -> float:
    """SIGKILL the slow worker while a run of its has at least two messages to go; when."""
    while time.monotonic() < until:
        mine = [r for r in run_probe.read_runs(run_log) if r.pid == slow.pid and not r.ended]
        if mine and len(mine[-1].ids) - len(mine[-1].done) >= 2:
            os.kill(slow.pid, signal.SIGKILL)
            killed_at = time.time()
            slow.wait(10)
            return killed_at
        time.sleep(0.05)
    raise AssertionError("the slow worker was never mid-job during the load")


def check_runs(runs: list[run_probe.Run], stored: set[str], killed_pid: int, killed_at: float) -> None:
    assert run_probe.overlapping(runs, {killed_pid: killed_at}) == []  # one worker at a time
    finished = Counter(i for r in runs if r.ended for i in r.done)
    assert set(finished) == stored and set(finished.values()) == {1}  # each message done exactly once
    cut = [r for r in runs if r.pid == killed_pid and not r.ended]
    assert len(cut) == 1
    reruns = [r for r in runs if r.key == cut[0].key and r.start > killed_at and r.ended]
    assert reruns and reruns[0].pid != killed_pid and set(cut[0].ids) - set(cut[0].done) <= set(reruns[0].done)
    assert any(r.pid == killed_pid and r.ended and r.last - r.start > LEASE for r in runs)  # outlasted its lease, kept it


def test_concurrent_copies_of_a_keyed_proxy_call_answer_what_the_thread_keeps(tmp_path):
    """A keyed chat completion sent twice at once, once to each of two servers over one SQLite
    file, with an upstream that answers each call differently: the thread keeps one answer, both
    copies answer it, and a later retry with the key replays it. The interleaving is forced: the
    upstream holds the first copy's call until the other copy waits on its claim (before the
    claim, a copy that came after the first one's answer was stored but before its key was
    remembered read the request as a regenerate and kept a second answer)."""
    import concurrent.futures

    httpx = pytest.importorskip("httpx")
    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer

    calls = iter(range(1000))
    released = threading.Event()

    def answer(body: dict) -> str:
        assert released.wait(30), "the second copy never waited"
        return f"回答{next(calls)}"

    db = f"sqlite:///{tmp_path / 'shared.db'}"
    with CannedOpenAI(answer) as upstream:
        apps = [create_app(config=ServerConfig(db=db, strategy="window", model=upstream.model, worker=False)) for _ in range(2)]

        def waited() -> float:
            return sum(
                app.state.proxy.metrics.registry.get_sample_value("memstack_proxy_copies_total", {"outcome": "waited"}) or 0 for app in apps
            )

        with BackgroundServer(apps[0]) as one, BackgroundServer(apps[1]) as two:
            for n in range(4):
                body = {"model": "m", "user": "u", "messages": [{"role": "user", "content": f"问题{n}"}], "stream": n % 2 == 1}
                headers = {"X-Memstack-Thread": f"t{n}", "Idempotency-Key": f"k{n}"}

                def send(url: str, body=body, headers=headers) -> str:
                    r = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=30)
                    assert r.status_code == 200, r.text
                    return streamed_text(r.text) if body["stream"] else r.json()["choices"][0]["message"]["content"]

                released.clear()
                before = waited()
                with concurrent.futures.ThreadPoolExecutor(2) as pool:
                    sent = [pool.submit(send, url) for url in (one.url, two.url)]
                    wait_for(lambda before=before: waited() > before, 30, "the second copy to wait on the first")
                    released.set()
                    answers = [f.result() for f in sent]
                kept = [
                    m["content"] for m in httpx.get(f"{one.url}/v1/users/u/threads/t{n}/messages", params={"replaced": "include"}).json()
                ]
                assert kept[0] == f"问题{n}" and len(kept) == 2
                assert answers == [kept[1], kept[1]]
                assert send(two.url) == send(one.url) == kept[1]  # retries replay the kept answer
        assert len(upstream.requests) == 4  # one model call per request, however many copies
