"""The store remembers its memory configuration: every process (CLI commands as real processes,
the worker, the REST server, a Python Memory) writes with the tenant's stored profile."""

import json
import os
import subprocess
import sys

import httpx
import pytest
from openai_stub import CannedOpenAI

from memstack import Memory
from memstack.errors import InvalidInput
from memstack.profile import Profile, ProfileMismatch
from memstack.server import ServerConfig, create_app
from memstack.server.run import BackgroundServer


def run(home, *args, check=True):
    env = {**os.environ, "MEMSTACK_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "memstack", *args], capture_output=True, env=env, timeout=180)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr.decode()}")
    return proc


def text(proc):
    return proc.stdout.decode()


def test_a_newcomer_adds_with_no_flags_and_search_finds_it_after_the_worker(tmp_path):
    home = tmp_path / "home"
    for message in ("我喜欢打网球", "我住在杭州", "周末常去西湖边跑步"):
        run(home, "add", "--user", "a", "--thread", "s1", "--role", "user", message)
    before = run(home, "search", "--user", "a", "我喜欢什么运动？")
    assert "no relevant memories" in text(before)
    assert (
        "3 jobs" not in before.stderr.decode() and "not run yet" in before.stderr.decode() and "memstack worker" in before.stderr.decode()
    )
    assert "ran 1 job" in text(run(home, "worker", "--once"))
    assert "打网球" in text(run(home, "search", "--user", "a", "我喜欢什么运动？"))
    config = json.loads(text(run(home, "config", "--json")))
    assert config["profile"]["layers"] == ["window", "retrieval"] and config["pending_jobs"] == 0


def test_add_wait_indexes_before_returning(tmp_path):
    home = tmp_path / "home"
    run(home, "add", "--wait", "--user", "a", "--thread", "s1", "--role", "user", "我养了一只叫麻薯的猫")
    found = run(home, "search", "--user", "a", "我的猫叫什么？")
    assert "麻薯" in text(found) and "not run yet" not in found.stderr.decode()


class _Extraction(CannedOpenAI):
    """A real OpenAI-compatible server on loopback that answers every call with one extraction."""

    ANSWER = {"memories": [{"subject": "用户", "subject_type": "人物", "predicate": "叫", "object": "李四"}], "state": []}

    def __init__(self):
        super().__init__(lambda body: json.dumps(self.ANSWER, ensure_ascii=False), usage=(100, 20))


def test_a_store_initialised_with_a_preset_runs_its_layers_from_add_worker_and_serve(tmp_path):
    home = tmp_path / "home"
    with _Extraction() as chat:
        model = f"vllm:qwen@{chat.url}"
        shown = text(run(home, "init", "--preset", "personal-assistant", "--model", model))
        assert "personal-assistant" in shown and "summary-buffer" in shown
        for i, (role, said) in enumerate([("user", "我叫李四"), ("assistant", "你好李四！")] * 3):
            run(home, "add", "--user", "u", "--thread", "t", "--role", role, "--at", f"2026-11-02T20:0{i}:00+08:00", said)
        report = json.loads(text(run(home, "worker", "--once", "--json")))  # no --model: the profile's
        assert report["ran"] >= 1 and report["failed"] == 0 and chat.requests
        assert "李四" in text(run(home, "entities", "--user", "u"))
        # the REST server opened with no stack of its own writes with the same layers
        store = f"sqlite:///{home / 'memstack.db'}"
        app = create_app(config=ServerConfig(db=store, model=model, worker=False))
        with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            assert (
                client.post("/v1/users/v/threads/t/messages", json={"messages": [{"role": "user", "content": "我叫王五"}]}).status_code
                == 201
            )
        with Memory(store) as memory:
            assert memory.write_layers == list(Profile.from_dict(memory.store.profiles.get("default")).layers)
            assert "summary-buffer" in memory.write_layers and memory.pending(user_id="v") >= 1


def test_a_worker_with_another_embedder_or_other_layers_is_refused(tmp_path):
    home = tmp_path / "home"
    run(home, "add", "--user", "a", "--thread", "s1", "--role", "user", "我喜欢打网球")
    refused = run(home, "worker", "--once", "--embedder", "use", check=False)
    assert refused.returncode == 2 and "memstack init --reconfigure" in refused.stderr.decode()
    assert len(refused.stderr.decode().strip().splitlines()) == 1
    other = run(home, "add", "--preset", "personal-assistant", "--user", "a", "--thread", "s1", "--role", "user", "x", check=False)
    assert other.returncode == 2 and "memstack init --reconfigure" in other.stderr.decode()
    # reading with another stack is fine
    assert "我喜欢打网球" in text(run(home, "context", "--user", "a", "--thread", "s1", "--strategy", "window"))


def test_reconfigure_queues_every_thread_for_the_new_layers(tmp_path):
    home = tmp_path / "home"
    run(home, "init", "--strategy", "window")
    run(home, "add", "--user", "a", "--thread", "s1", "--role", "user", "我喜欢打网球")
    run(home, "add", "--user", "b", "--thread", "s2", "--role", "user", "我喜欢游泳")
    assert run(home, "init", "--strategy", "window,retrieval", check=False).returncode == 2  # not silently
    shown = text(run(home, "init", "--strategy", "window,retrieval", "--reconfigure"))
    assert "queued 2 threads" in shown
    run(home, "worker", "--once")
    assert "打网球" in text(run(home, "search", "--user", "a", "我喜欢什么运动？"))
    assert "游泳" in text(run(home, "search", "--user", "b", "我喜欢什么运动？"))


def test_preset_and_strategy_together_are_refused_everywhere(tmp_path):
    home = tmp_path / "home"
    for command in (["add", "--user", "a", "--thread", "t", "--role", "user", "hi"], ["context", "--user", "a", "--thread", "t"], ["init"]):
        proc = run(home, *command, "--preset", "personal-assistant", "--strategy", "window", check=False)
        assert proc.returncode == 2 and "not" in proc.stderr.decode()
    with pytest.raises(InvalidInput):
        Memory("memory://", preset="personal-assistant", layers="window")
    with pytest.raises(InvalidInput):
        create_app(config=ServerConfig(db="memory://", preset="personal-assistant", strategy="window"))
    with Memory("memory://") as memory, pytest.raises(InvalidInput):
        memory.context(user_id="a", thread_id="t", preset="personal-assistant", strategy="window")


def test_the_first_memory_on_an_empty_store_writes_the_profile_and_later_ones_follow(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    with Memory(url, layers=["summary-buffer", "retrieval"], options={"model": "local", "embedder": "local", "k": 4}) as first:
        assert first.profile.layers == ("summary-buffer", "retrieval")
    with Memory(url) as later:
        assert later.layers == ["summary-buffer", "retrieval"] and later.options["k"] == 4 and later.options["model"] == "local"
    with Memory(url, layers=["window"]) as reader:  # a reader: fewer writing layers
        assert reader.layers == ["window"] and reader.write_layers == ["summary-buffer", "retrieval"]
    with pytest.raises(ProfileMismatch, match="memstack init --reconfigure"):
        Memory(url, layers=["entities", "retrieval"])
    with pytest.raises(ProfileMismatch, match="embedder"):
        Memory(url, options={"embedder": "use"})


def test_a_tenant_written_through_another_tenants_memory_gets_the_same_profile(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    Memory.configure(url, layers="window", tenant="acme")
    with Memory(url, layers=["window", "retrieval"]) as memory:
        memory.add("我叫李四", user_id="u", thread_id="t", tenant="globex")  # no profile yet: this one's
        assert Profile.from_dict(memory.store.profiles.get("globex")).layers == ("window", "retrieval")
        with pytest.raises(ProfileMismatch):
            memory.add("我叫李四", user_id="u", thread_id="t", tenant="acme")


def test_worker_once_shows_progress_on_a_terminal_and_only_a_summary_when_piped(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    home = tmp_path / "home"
    for user in ("a", "b", "c"):
        run(home, "add", "--user", user, "--thread", "s1", "--role", "user", f"我是{user}，我喜欢打网球")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "memstack", "worker", "--once"],
        env={**os.environ, "MEMSTACK_HOME": str(home)},
        encoding="utf-8",
        timeout=120,
    )
    child.expect(pexpect.EOF)
    assert "3/3 (100%) retrieval" in child.before and "ran 3 jobs, 0 failed" in child.before
    run(home, "add", "--user", "a", "--thread", "s2", "--role", "user", "我住在杭州")
    piped = run(home, "worker", "--once")
    assert piped.stderr.decode() == "" and text(piped) == "ran 1 job, 0 failed\n"
