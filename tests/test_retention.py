"""Retention: the policy in the profile, Store.expire on every backend (the contract), the pass
that applies a tenant's policy, the worker that runs it, and the command line that shows it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from memstack import Memory
from memstack.backends import open_store
from memstack.backends.jsonl import JsonlStore
from memstack.backends.memory import MemoryStore
from memstack.backends.sqlite import SQLiteStore
from memstack.errors import InvalidInput, UsageError
from memstack.expiry import RECORD_PREFIX, last_run, run, run_due
from memstack.profile import Profile
from memstack.retention import Retention, format_duration, parse_duration
from memstack.testing.expiry import ExpiryContract
from memstack.types import Scope, utcnow

DSN = os.environ.get("MEMSTACK_TEST_PG_DSN", "")

# ---- the contract on every backend -----------------------------------------------------------


class TestMemoryExpiry(ExpiryContract):
    def new_store(self):
        return MemoryStore()


class TestSQLiteExpiry(ExpiryContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.path = tmp_path / "memstack.db"

    def new_store(self):
        return SQLiteStore(self.path)


class TestJsonlExpiry(ExpiryContract):
    derived_memory = False

    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.root = tmp_path / "store"

    def new_store(self):
        return JsonlStore(self.root)


@pytest.mark.postgres
class TestPostgresExpiry(ExpiryContract):
    @pytest.fixture(autouse=True)
    def _schema(self, request):
        if not DSN:
            pytest.skip("set MEMSTACK_TEST_PG_DSN to run the PostgreSQL retention tests")
        self.schema = request.getfixturevalue("schema")

    def new_store(self):
        from memstack.backends.postgres import PostgresStore

        return PostgresStore(DSN, schema=self.schema)


# ---- the policy ------------------------------------------------------------------------------


def test_a_policy_parses_round_trips_and_describes_itself():
    policy = Retention.parse("messages=180d, audit=52w,usage=36h,derived=keep")
    assert policy == Retention(timedelta(days=180), timedelta(weeks=52), timedelta(hours=36), derived=False)
    assert policy.to_dict() == {"messages": "180d", "audit": "52w", "usage": "36h", "derived": "keep"}
    assert Retention.from_dict(policy.to_dict()) == policy
    assert Retention.parse("messages=14d") == Retention(messages=timedelta(days=14))
    assert Retention.parse("messages=keep,usage=2w").describe() == "messages kept, audit kept, usage 2w; derived memories deleted"
    assert Retention().describe() == "keep everything"
    assert [format_duration(parse_duration(t)) for t in ("24h", "7d", "30d", "12h", "2W")] == ["1d", "1w", "30d", "12h", "2w"]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("messages=3x", "'3x' is not a duration"),
        ("messages=0d", "'0d' is not a duration"),
        ("messages=-1d", "'-1d' is not a duration"),
        ("消息=30d", "unknown kind '消息'"),
        ("messages", "'messages' is not KIND=DURATION"),
        ("messages=30d,messages=40d", "messages is given twice"),
        ("derived=maybe", "derived='maybe'"),
        ("", "give KIND=DURATION pairs"),
    ],
)
def test_bad_policies_are_invalid_input_naming_the_part(text, named):
    with pytest.raises(InvalidInput, match="retain") as info:
        Retention.parse(text)
    assert named in str(info.value)


def test_the_profile_keeps_the_policy_and_an_older_profile_keeps_everything():
    profile = Profile(("window",), retention=Retention.parse("messages=30d"))
    data = json.loads(json.dumps(profile.to_dict()))
    assert data["retention"] == {"messages": "30d", "derived": "delete"}
    assert Profile.from_dict(data) == profile
    older = {"version": 1, "layers": ["window"], "preset": None, "options": {}, "counter": None}
    assert Profile.from_dict(older).retention == Retention()
    assert "retention" not in Profile(("window",)).to_dict()  # what an older memstack reads alike
    with pytest.raises(UsageError, match="retention"):
        Profile.from_dict({**older, "retention": {"messages": "soon"}})


# ---- the pass over a Memory ------------------------------------------------------------------


def _texts(ctx):
    return [m.text for m in ctx.messages]


def test_a_pass_deletes_what_the_tenants_policy_says_and_contexts_no_longer_show_it(tmp_path):
    store = SQLiteStore(tmp_path / "m.db")
    now = utcnow()
    Memory.configure(store, layers="window", retention="messages=30d", tenant="default")
    Memory.configure(store, layers="window", retention="messages=365d", tenant="long")
    Memory.configure(store, layers="window", tenant="keep")  # no policy
    mem = Memory(store, max_tokens=None)
    for tenant in ("default", "long", "keep"):
        for user in ("张三", "李四"):
            mem.add("六十天前：我住在北京", user_id=user, thread_id="t", tenant=tenant, at=now - timedelta(days=60))
            mem.add("昨天：我搬到上海了", user_id=user, thread_id="t", tenant=tenant, at=now - timedelta(days=1))
    assert _texts(mem.context(user_id="张三", thread_id="t")) == ["六十天前：我住在北京", "昨天：我搬到上海了"]

    done = run_due(store, ["default", "long", "keep"], now=now)

    assert [(r.tenant, r.users, dict(r.counts)) for r in done] == [("default", 2, {"messages": 2}), ("long", 0, {})]
    for user in ("张三", "李四"):
        assert _texts(mem.context(user_id=user, thread_id="t")) == ["昨天：我搬到上海了"]
        for tenant in ("long", "keep"):
            assert _texts(mem.context(user_id=user, thread_id="t", tenant=tenant)) == ["六十天前：我住在北京", "昨天：我搬到上海了"]
    assert [(n.kind, n.layer, n.rows) for n in store.deletions("default")] == [("expired", "retention", 1)] * 2
    assert store.deletions("long") == store.deletions("keep") == []
    assert last_run(store, "default") == done[0]
    assert last_run(store, "keep") is None
    assert run_due(store, ["default"], now=now + timedelta(minutes=5)) == []  # not due yet
    assert [r.tenant for r in run_due(store, ["default"], now=now + timedelta(hours=2))] == ["default"]
    mem.close()


def test_the_pass_record_is_no_tenant_and_needs_a_valid_one():
    store = MemoryStore()
    Memory.configure(store, layers="window", retention="messages=1d")
    assert run(store, "default") is not None
    assert store.profiles.get(RECORD_PREFIX + "default")["tenant"] == "default"
    with pytest.raises(InvalidInput):
        last_run(store, "bad\x00tenant")


def test_the_background_worker_applies_the_policy():
    store = MemoryStore()
    Memory.configure(store, layers="window", retention="messages=7d,derived=keep")
    mem = Memory(store, max_tokens=None)
    mem.add("太久以前的话", user_id="u", thread_id="t", at=utcnow() - timedelta(days=8))
    mem.add("最近的话", user_id="u", thread_id="t")
    mem.start_worker(poll_seconds=0.05)
    try:
        deadline = time.monotonic() + 10
        while last_run(store, "default") is None and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        mem.stop_worker()
    assert [m.text for m in mem.history(user_id="u", thread_id="t")] == ["最近的话"]
    assert [(n.kind, n.layer) for n in store.deletions("default")] == [("expired", "retention")]
    mem.close()


# ---- the command line, and `memstack worker` as a process ----------------------------------------


def cli(home, *args, check=True):
    env = {**os.environ, "MEMSTACK_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "memstack", *args], capture_output=True, env=env, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr.decode()}")
    return proc


def test_init_retain_config_and_retention_run(tmp_path):
    home = tmp_path / "home"
    bad = cli(home, "init", "--strategy", "window", "--retain", "messages=3x", check=False)
    assert bad.returncode == 2 and b"'3x' is not a duration" in bad.stderr
    cli(home, "init", "--strategy", "window", "--retain", "messages=30d,usage=90d")
    with Memory(SQLiteStore(home / "memstack.db")) as mem:
        mem.add("很久以前", user_id="u", thread_id="t", at=utcnow() - timedelta(days=31))
        mem.add("现在", user_id="u", thread_id="t")
        shown = cli(home, "config").stdout.decode()
        assert "retain  messages 30d, audit kept, usage 90d; derived memories deleted" in shown
        assert "last    no retention pass yet" in shown
        ran = cli(home, "retention", "run").stdout.decode()
        assert "1 user, 1 row (messages 1)" in ran
        config = json.loads(cli(home, "--json", "config").stdout)
        assert config["retention"]["policy"] == {"messages": "30d", "usage": "90d", "derived": "delete"}
        assert config["retention"]["last_run"]["counts"] == {"messages": 1}
        assert [m.text for m in mem.history(user_id="u", thread_id="t")] == ["现在"]
        assert run(mem.store, "other") is None  # a tenant without a policy: nothing to do


def test_memstack_worker_applies_the_policy_while_it_runs(tmp_path):
    db = tmp_path / "w.db"
    store = open_store(f"sqlite:///{db}")
    Memory.configure(store, layers="window", retention="messages=2d")
    mem = Memory(store)
    mem.add("三天前", user_id="u", thread_id="t", at=utcnow() - timedelta(days=3))
    mem.add("今天", user_id="u", thread_id="t")
    env = {**os.environ, "MEMSTACK_HOME": str(tmp_path / "home")}
    worker = subprocess.Popen(
        [sys.executable, "-m", "memstack", "--db", f"sqlite:///{db}", "worker", "--poll", "0.1"], env=env, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while last_run(store, "default") is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, worker.stderr.read() if worker.stderr else ""
    assert [m.text for m in mem.history(user_id="u", thread_id="t")] == ["今天"]
    assert [(n.kind, n.layer, n.rows) for n in store.deletions("default")] == [("expired", "retention", 1)]
    mem.close()


# ---- the REST API and the dashboard ------------------------------------------------------------------


def test_rest_and_the_dashboard_show_the_policy_and_the_last_pass():
    pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")
    import re

    import httpx

    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer
    from memstack.testing import ScriptedModel

    store = MemoryStore()
    Memory.configure(store, layers="window", retention="messages=30d,audit=1w", tenant="acme")
    memory = Memory(store, tenant="acme", layers="window")
    memory.add("两个月前的话", user_id="王五", thread_id="t", at=utcnow() - timedelta(days=60))
    keys = {"key-acme": "acme", "key-globex": "globex"}
    app = create_app(memory, ServerConfig(model=ScriptedModel(), api_keys=keys, worker=False))
    with BackgroundServer(app) as server:
        with httpx.Client(base_url=server.url, headers={"Authorization": "Bearer key-acme"}, timeout=30) as acme:
            before = acme.get("/v1/retention").json()
            assert before == {
                "tenant": "acme",
                "policy": {"messages": "30d", "audit": "1w", "derived": "delete"},
                "keeps_everything": False,
                "last_run": None,
            }
            run(store, "acme")
            after = acme.get("/v1/retention").json()["last_run"]
            assert (after["users"], after["rows"], after["counts"]) == (1, 1, {"messages": 1})
            notes = acme.get("/v1/deletions")
            assert notes.status_code == 200, notes.text
            assert [(n["kind"], n["layer"], n["rows"]) for n in notes.json()] == [("expired", "retention", 1)]
        with httpx.Client(base_url=server.url, headers={"Authorization": "Bearer key-globex"}, timeout=30) as globex:
            assert globex.get("/v1/retention").json()["keeps_everything"] is True
        with httpx.Client(base_url=server.url, timeout=30) as browser:
            token = re.search(r'name="csrf" value="([^"]+)"', browser.get("/ui/login").text).group(1)
            assert browser.post("/ui/login", data={"key": "key-acme", "csrf": token}).status_code == 303
            log = browser.get("/ui/forgotten").text
            assert "messages 30d, audit 1w, usage kept; derived memories deleted" in log
            assert "1 user, 1 row (messages 1)" in log and "expired memory" in log
            assert "两个月前" not in log and "王五" not in log
    memory.close()


def test_changing_the_policy_needs_reconfigure_like_the_rest_of_the_profile():
    from memstack.profile import ProfileMismatch

    store = MemoryStore()
    Memory.configure(store, layers="window", retention="messages=30d")
    with pytest.raises(ProfileMismatch, match=r"retain messages 30d.*--reconfigure.*retain messages 60d"):
        Memory.configure(store, layers="window", retention="messages=60d")
    with pytest.raises(InvalidInput, match="retain"):
        Memory.configure(store, layers="window", retention="messages=60", reconfigure=True)
    assert Profile.from_dict(store.profiles.get("default")).retention == Retention.parse("messages=30d")  # nothing written
    profile, _ = Memory.configure(store, layers="window", retention="messages=60d", reconfigure=True)
    assert profile.retention == Retention.parse("messages=60d")
    profile, _ = Memory.configure(store, layers="window", reconfigure=True)
    assert profile.retention.keeps_everything


def test_the_retrieval_layers_units_of_expired_rounds_go_unless_derived_keep(tmp_path):
    store = SQLiteStore(tmp_path / "r.db")
    Memory.configure(store, retention="messages=30d")  # window,retrieval: the local embedder
    Memory.configure(store, retention="messages=30d,derived=keep", tenant="keeps")
    mem = Memory(store)
    for tenant in ("default", "keeps"):
        old = [{"role": "user", "content": "我喜欢打网球"}, {"role": "assistant", "content": "好的"}]
        mem.add(old, user_id="u", thread_id="old", tenant=tenant, at=utcnow() - timedelta(days=40))
        mem.add([{"role": "user", "content": "我的后端使用SpringBoot"}], user_id="u", thread_id="new", tenant=tenant)
    mem.flush()
    found = {t: [h.unit.text for h in mem.search("我喜欢什么运动？", user_id="u", tenant=t)] for t in ("default", "keeps")}
    assert all(any("网球" in text for text in hits) for hits in found.values()), found

    done = run_due(store, ["default", "keeps"])

    assert [dict(r.counts) for r in done] == [{"messages": 2, "units": 1, "vectors": 1}, {"messages": 2}]
    assert not any("网球" in h.unit.text for h in mem.search("我喜欢什么运动？", user_id="u"))
    assert any("网球" in h.unit.text for h in mem.search("我喜欢什么运动？", user_id="u", tenant="keeps"))
    assert any("SpringBoot" in h.unit.text for h in mem.search("后端用什么？", user_id="u"))
    mem.close()


def test_with_the_vectors_in_milvus_the_expired_units_vectors_go_there_too(tmp_path):
    pytest.importorskip("milvus_lite", reason="pip install 'memstack[milvus]'")
    from memstack.backends.milvus import MilvusVectorIndex

    store, index = SQLiteStore(tmp_path / "r.db"), MilvusVectorIndex(str(tmp_path / "vectors.db"), collection="kept")
    Memory.configure(store, vectors=index, retention="messages=30d")  # window,retrieval: the local embedder
    mem = Memory(store, vectors=index)
    try:
        old = [{"role": "user", "content": "我的病历号是A-7731"}, {"role": "assistant", "content": "好的"}]
        mem.add(old, user_id="u", thread_id="old", at=utcnow() - timedelta(days=40))
        mem.add([{"role": "user", "content": "我的后端使用SpringBoot"}], user_id="u", thread_id="new")
        mem.flush()
        user = Scope(user_id="u")
        held = {u.id: u.text for batch in store.units.iterate(user) for u in batch}
        expired = [i for i, text in held.items() if "A-7731" in text]
        assert expired and set(index.fetch(user, list(held))) == set(held)

        (done,) = mem.retention_pass(force=True)

        assert done.counts["units"] == len(expired) and done.counts["vectors"] == len(expired)
        assert index.fetch(user, expired) == {}  # no embedding of the expired message is left in Milvus
        assert set(index.fetch(user, list(held))) == set(held) - set(expired)
        assert any("SpringBoot" in h.unit.text for h in mem.search("后端用什么？", user_id="u"))
    finally:
        mem.close()
        index.close()


def test_the_services_worker_passes_over_every_tenant_it_serves():
    pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")
    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer
    from memstack.testing import ScriptedModel

    store = MemoryStore()
    Memory.configure(store, layers="window", retention="messages=12h", tenant="globex")
    with Memory(store, tenant="globex", layers="window") as writer:  # another process's writes, as the service sees them
        writer.add("一天前", user_id="u", thread_id="t", at=utcnow() - timedelta(days=1))
    memory = Memory(store, layers="window")  # the service's own tenant is "default"
    app = create_app(memory, ServerConfig(model=ScriptedModel(), api_keys={"k": "globex"}))
    with BackgroundServer(app):
        deadline = time.monotonic() + 10
        while last_run(store, "globex") is None and time.monotonic() < deadline:
            time.sleep(0.02)
    assert last_run(store, "globex").counts == {"messages": 1}
    assert store.history.read(Scope(user_id="u", thread_id="t", tenant="globex")) == []


@pytest.fixture(params=["memory", "sqlite", "jsonl", "postgres"])
def any_store(request, tmp_path):
    if request.param == "postgres":
        if not DSN:
            pytest.skip("set MEMSTACK_TEST_PG_DSN to run the PostgreSQL retention tests")
        from memstack.backends.postgres import PostgresStore

        store = PostgresStore(DSN, schema=request.getfixturevalue("schema"))
    else:
        store = {"memory": MemoryStore, "sqlite": lambda: SQLiteStore(tmp_path / "s.db"), "jsonl": lambda: JsonlStore(tmp_path / "j")}[
            request.param
        ]()
    yield store
    store.close()


def test_one_pass_on_every_backend_leaves_contexts_without_the_expired_turns(any_store):
    store, now = any_store, utcnow()
    Memory.configure(store, layers="window", retention="messages=90d")
    Memory.configure(store, layers="window", tenant="other")
    mem = Memory(store, max_tokens=None)
    for tenant in ("default", "other"):
        mem.add("半年前：我在学 Java", user_id="李雷", thread_id="t", tenant=tenant, at=now - timedelta(days=180))
        mem.add("上周：我在学 Rust", user_id="李雷", thread_id="t", tenant=tenant, at=now - timedelta(days=7))
    (done,) = run_due(store, ["default", "other"], now=now)
    assert (done.tenant, done.users, dict(done.counts)) == ("default", 1, {"messages": 1})
    assert _texts(mem.context(user_id="李雷", thread_id="t")) == ["上周：我在学 Rust"]
    assert _texts(mem.context(user_id="李雷", thread_id="t", tenant="other")) == ["半年前：我在学 Java", "上周：我在学 Rust"]
    assert [(n.kind, n.layer) for n in store.deletions("default", user_id="李雷")] == [("expired", "retention")]
    assert store.deletions("other") == []
    assert last_run(store, "default") == done and last_run(store, "other") is None
