"""``memstack serve`` as a real process: SIGTERM during a burst of adds loses nothing that was
acknowledged and drains the write queue; a public address without API keys is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from ports import free_port

pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")

from memstack import Memory  # noqa: E402


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"memstack serve exited with {proc.returncode}"
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("memstack serve did not become healthy")


@pytest.mark.timeout(180)
def test_sigterm_during_a_burst_loses_no_acknowledged_message_and_drains_the_queue(tmp_path):
    port, db = free_port(), tmp_path / "burst.db"
    env = {**os.environ, "MEMSTACK_API_KEYS": "burst-key:acme", "MEMSTACK_HOME": str(tmp_path / "home")}
    command = [
        sys.executable,
        "-m",
        "memstack",
        "serve",
        "--db",
        f"sqlite:///{db}",
        "--port",
        str(port),
        "--strategy",
        "window,retrieval",
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    acknowledged: list[tuple[str, str]] = []
    refused = threading.Event()
    errors: list[str] = []
    try:
        wait_healthy(url, proc)

        def client(n: int) -> None:
            with httpx.Client(base_url=url, headers={"Authorization": "Bearer burst-key"}, timeout=30) as c:
                for i in range(10_000):
                    text = f"客户端{n}的第{i}条消息"
                    try:
                        r = c.post(f"/v1/users/user{n}/threads/t/messages", json={"messages": [{"role": "user", "content": text}]})
                    except httpx.TransportError:
                        refused.set()
                        return
                    if r.status_code == 201:
                        acknowledged.append((f"user{n}", text))
                    elif r.status_code != 503:
                        errors.append(r.text)
                        return

        clients = [threading.Thread(target=client, args=(n,)) for n in range(8)]
        for t in clients:
            t.start()
        deadline = time.monotonic() + 60
        while len(acknowledged) < 60 and not errors and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        for t in clients:
            t.join(60)
        assert refused.is_set()  # the server stopped taking requests
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not errors, errors[:3]
    assert proc.returncode in (0, -signal.SIGTERM), proc.stderr.read().decode()
    with Memory(f"sqlite:///{db}", tenant="acme") as memory:
        stored = {(f"user{n}", m.text) for n in range(8) for m in memory.history(user_id=f"user{n}", thread_id="t")}
        assert memory.store.jobs.pending() == 0  # the write queue was drained before exit
    assert len(acknowledged) >= 60 and set(acknowledged) <= stored


def test_a_public_address_without_keys_is_refused(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MEMSTACK_API_KEYS"} | {"MEMSTACK_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "memstack", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        capture_output=True,
        timeout=60,
    )
    err = proc.stderr.decode().strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1 and "without API keys" in err, err
    bad = subprocess.run(
        [sys.executable, "-m", "memstack", "serve", "--api-key", "no-tenant", "--port", str(free_port())],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "KEY:TENANT" in bad.stderr.decode()


def test_serve_passes_the_answer_bound_to_the_app(monkeypatch, tmp_path):
    """``--answer-max-tokens N`` (default 512; 0: unbounded) reaches ServerConfig."""
    import memstack.server
    import memstack.server.run
    from memstack.cli import main

    configs = []
    monkeypatch.setattr(memstack.server, "create_app", lambda config: configs.append(config))
    monkeypatch.setattr(memstack.server.run, "serve", lambda app, **kw: None)
    monkeypatch.setenv("MEMSTACK_HOME", str(tmp_path))
    for argv, bound in ((["serve"], 512), (["serve", "--answer-max-tokens", "64"], 64), (["serve", "--answer-max-tokens", "0"], None)):
        assert main(argv) == 0
        assert configs[-1].answer_max_tokens == bound, argv


def test_serve_keeps_metrics_and_docs_closed_unless_made_public(monkeypatch, tmp_path):
    """``--public-metrics`` and ``--public-docs`` reach ServerConfig; without them both are closed
    (test_server_api checks what a closed and an open route answer over HTTP)."""
    import memstack.server
    import memstack.server.run
    from memstack.cli import main

    configs = []
    monkeypatch.setattr(memstack.server, "create_app", lambda config: configs.append(config))
    monkeypatch.setattr(memstack.server.run, "serve", lambda app, **kw: None)
    monkeypatch.setenv("MEMSTACK_HOME", str(tmp_path))
    keys = ["--api-key", "k:acme"]
    for flags, public in (
        ([], (False, False)),
        (["--public-metrics"], (True, False)),
        (["--public-docs"], (False, True)),
        (["--public-metrics", "--public-docs"], (True, True)),
    ):
        assert main(["serve", *keys, *flags]) == 0
        assert (configs[-1].public_metrics, configs[-1].public_docs) == public, flags


ASSEMBLE = """
import hashlib, logging.config, sys
from pathlib import Path
from memstack.llm import local
from memstack.llm.local import assemble_gguf
from memstack.server.run import log_config
local._CHUNK = 400  # ten blocks: a log line at each tenth
if sys.argv[2] == "serve":
    logging.config.dictConfig(log_config("info"))
part = Path(sys.argv[1]) / "part1.bin"
part.write_bytes(b"GGUF" * 1000)
assemble_gguf([part], Path(sys.argv[1]) / "m.gguf", hashlib.sha256(b"GGUF" * 1000).hexdigest(), name="the local model")
"""


@pytest.mark.parametrize("process", ["serve", "worker"])
def test_the_model_assembly_is_shown_on_stderr(tmp_path, process):
    """``serve`` logs through uvicorn's handler (its memstack loggers at --log-level); a process
    that configured no logging (``memstack worker``) still shows the lines on stderr."""
    proc = subprocess.run([sys.executable, "-c", ASSEMBLE, str(tmp_path), process], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    prefix = "INFO:     " if process == "serve" else "memstack: "
    assert lines[0].startswith(f"{prefix}assembling the local model (4000 bytes) from 1 packaged parts into "), lines
    assert [line.removeprefix(prefix) for line in lines[1:-1]] == [
        f"assembling the local model: {p}% ({p * 40} bytes of 4000 bytes)" for p in range(10, 100, 10)
    ]
    assert lines[-1] == f"{prefix}assembled the local model in 0 s", lines


def test_serve_loads_an_in_process_model_before_it_reports_ready(monkeypatch, tmp_path):
    """The first request must not wait for the local model's assembly and load (a minute on two
    cores, past the upstream timeout): ``memstack serve`` warms it in the lifespan, before
    ``/health`` says ready; an app made in code does so when asked."""
    import httpx

    import memstack.server
    import memstack.server.run
    from memstack import Memory
    from memstack.cli import main
    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer
    from memstack.server.upstream import ModelUpstream
    from memstack.testing import ScriptedModel

    configs = []
    monkeypatch.setattr(memstack.server, "create_app", lambda config: configs.append(config))
    monkeypatch.setattr(memstack.server.run, "serve", lambda app, **kw: None)
    monkeypatch.setenv("MEMSTACK_HOME", str(tmp_path))
    assert main(["serve"]) == 0 and configs[-1].warm_model

    class Loading(ScriptedModel):
        loads = 0

        def load(self):
            type(self).loads += 1

    upstream = ModelUpstream(Loading(default="好"), timeout=5)
    for warm, loads in ((False, 0), (True, 1)):
        app = create_app(Memory("memory://"), ServerConfig(worker=False, warm_model=warm), upstream=upstream)
        with BackgroundServer(app) as server:
            assert httpx.get(f"{server.url}/health").status_code == 200 and Loading.loads == loads


def test_a_server_whose_local_model_is_not_installed_serves_rest_and_the_proxy_answers_501():
    # `memstack serve` without the `local` extra: the warm-up fails on the missing package; the
    # REST API still serves, and a chat completion says what to install instead of a traceback
    from memstack.errors import MissingDependency
    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer
    from memstack.server.upstream import ModelUpstream
    from memstack.testing import ScriptedModel

    class NotInstalled(ScriptedModel):
        def load(self):
            raise MissingDependency("xllamacpp", "local")

        def complete(self, messages, **kwargs):
            raise MissingDependency("xllamacpp", "local")

    app = create_app(Memory("memory://"), ServerConfig(worker=False, warm_model=True), upstream=ModelUpstream(NotInstalled(), timeout=5))
    with BackgroundServer(app) as server:
        assert httpx.get(f"{server.url}/health").status_code == 200
        added = httpx.post(f"{server.url}/v1/users/u/threads/t/messages", json={"messages": [{"role": "user", "content": "我叫王五"}]})
        assert added.status_code in (200, 201), added.text
        answer = httpx.post(
            f"{server.url}/v1/chat/completions",
            json={"model": "local", "messages": [{"role": "user", "content": "你好"}], "user": "u"},
        )
        assert answer.status_code == 501, answer.text
        assert answer.json()["error"]["code"] == "missing_dependency"
        assert 'pip install "memstack[local]"' in answer.json()["error"]["message"]
